/*
 * machine.c — machine profiles for the step-time model (gspmd/cost.h): the built-in table and
 * the `key = value` text format.
 *
 * The built-in figures are the vendors' published peaks per device (dense matmul, no
 * sparsity), memory bandwidth and capacity, and per-direction link bandwidth per device:
 *   tpu-v3  one TPU v3 core (the GSPMD paper counts cores): 123 TFLOP/s bf16 and 900 GB/s HBM
 *           per chip of two cores, 32 GiB per chip; a 2D torus of ICI links.
 *   tpu-v4  one TPU v4 chip: 275 TFLOP/s bf16, 1.2 TB/s, 32 GiB; a 3D torus.
 *   a100    A100 SXM 80 GB: 312 TFLOP/s bf16, 19.5 f32 (no TF32), 2.0 TB/s; NVLink 3 within
 *           an 8-GPU node (300 GB/s per direction), 200 Gb/s InfiniBand per GPU between nodes.
 *   h100    H100 SXM: 989 TFLOP/s bf16, 67 f32, 3.35 TB/s, 80 GB; NVLink 4 (450 GB/s per
 *           direction) in 8-GPU nodes, 400 Gb/s InfiniBand per GPU.
 *   h200    H200 SXM: the H100's compute with 4.8 TB/s and 141 GB.
 *   mi300x  AMD Instinct MI300X (OAM): 1307.4 TFLOP/s bf16, 163.4 f32 and f64 (matrix), 5.3 TB/s,
 *           192 GB; Infinity Fabric to each of the 7 other GPUs of an 8-GPU platform (448 GB/s
 *           per direction in all), a 400 Gb/s NIC per GPU between nodes.
 *   mi350x  AMD Instinct MI350X (OAM, air-cooled): 2.3 PFLOP/s bf16, 144.2 TFLOP/s f32, 72.1 f64,
 *           8 TB/s, 288 GB; Infinity Fabric 537.6 GB/s per direction, 400 Gb/s NIC per GPU.
 *           (Each AMD figure's source is beside its entry. Neither vendor publishes a
 *           transcendental rate: a quarter of the vector rate, as for the NVIDIA profiles. The
 *           MI355X is the MI350X at 2.4 GHz instead of 2.2: `base = mi350x` and its figures.)
 *   this-cpu one core of a small x86 server running a device of gspmd's threads backend (about
 *           100 GFLOP/s sgemm, shared-memory collectives); `gspmd calibrate` measures the real
 *           machine and writes its profile.
 */
#include "gspmd/cost.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define G 1e9
#define T 1e12
#define GIB (1024.0 * 1024.0 * 1024.0)

static const gs_machine BUILTIN[] = {
    {"tpu-v3", "TPU v3, one core (the GSPMD paper's device)", 61.5 * T, 61.5 * T / 4, 61.5 * T / 16,
     3.9 * T, 3.9 * T / 8, 450 * G, 16 * GIB, 0, 0, {81 * G, 5e-6, GS_TOPO_TORUS}, {81 * G, 5e-6, GS_TOPO_TORUS}},
    {"tpu-v4", "TPU v4 chip", 275 * T, 275 * T / 4, 275 * T / 16, 8.6 * T, 8.6 * T / 8, 1200 * G, 32 * GIB, 0, 0,
     {150 * G, 5e-6, GS_TOPO_TORUS}, {150 * G, 5e-6, GS_TOPO_TORUS}},
    {"a100", "NVIDIA A100 SXM 80GB", 312 * T, 19.5 * T, 19.5 * T, 19.5 * T, 19.5 * T / 4, 2039 * G, 80 * GIB, 0, 8,
     {300 * G, 5e-6, GS_TOPO_SWITCH}, {25 * G, 1e-5, GS_TOPO_SWITCH}},
    {"h100", "NVIDIA H100 SXM", 989 * T, 67 * T, 67 * T, 67 * T, 67 * T / 4, 3350 * G, 80e9, 0, 8,
     {450 * G, 5e-6, GS_TOPO_SWITCH}, {50 * G, 1e-5, GS_TOPO_SWITCH}},
    {"h200", "NVIDIA H200 SXM", 989 * T, 67 * T, 67 * T, 67 * T, 67 * T / 4, 4800 * G, 141e9, 0, 8,
     {450 * G, 5e-6, GS_TOPO_SWITCH}, {50 * G, 1e-5, GS_TOPO_SWITCH}},
    /* AMD Instinct MI300X data sheet, dense figures (sparsity doubles the low-precision ones):
     * "Peak Bfloat16 1307.4 TFLOPs", "Peak Single Precision Matrix (FP32) 163.4 TFLOPs", "Peak
     * Double Precision Matrix (FP64) 163.4 TFLOPs", "Peak Single Precision (FP32) Vector 163.4
     * TFLOPs"; "192 GB HBM3", "Peak Memory Bandwidth 5.3 TB/s"; "AMD Infinity Fabric Links 7",
     * "Peak Infinity Fabric Link Bandwidth 128 GB/s" (both directions: 64 GB/s each way, 7 x 64
     * = 448 GB/s per GPU of the fully connected 8-GPU platform); between nodes one 400 Gb/s NIC
     * per GPU (50 GB/s), as AMD's reference platforms pair them. */
    {"mi300x", "AMD Instinct MI300X (OAM)", 1307.4 * T, 163.4 * T, 163.4 * T, 163.4 * T,
     163.4 * T / 4, 5300 * G, 192e9, 0, 8, {448 * G, 5e-6, GS_TOPO_SWITCH},
     {50 * G, 1e-5, GS_TOPO_SWITCH}},
    /* AMD Instinct MI350X product page and data sheet, dense: "Peak Bfloat16 2.3 PFLOPs", "Peak
     * Single Precision Matrix (FP32) 144.2 TFLOPs", "Peak Double Precision Matrix (FP64) 72.1
     * TFLOPs", "Peak Single Precision (FP32) Vector 144.2 TFLOPs"; "288 GB HBM3E", "Peak Memory
     * Bandwidth 8 TB/s"; 7 Infinity Fabric links, "Peak Infinity Fabric Link Bandwidth 153.6
     * GB/s" (both directions; 1075.2 GB/s aggregate: 537.6 GB/s each way per GPU of an 8-GPU
     * platform); one 400 Gb/s NIC per GPU between nodes (AMD Pensando Pollara 400). */
    {"mi350x", "AMD Instinct MI350X (OAM)", 2300 * T, 144.2 * T, 72.1 * T, 144.2 * T,
     144.2 * T / 4, 8000 * G, 288e9, 0, 8, {537.6 * G, 5e-6, GS_TOPO_SWITCH},
     {50 * G, 1e-5, GS_TOPO_SWITCH}},
    {"this-cpu", "one core of a small x86 server (run `gspmd calibrate` for this machine's)",
     100 * G, 100 * G, 50 * G, 8 * G, 0.5 * G, 10 * G, 8 * GIB, 1e-6, 0, {10 * G, 2e-5, GS_TOPO_SWITCH},
     {1 * G, 5e-5, GS_TOPO_SWITCH}},
};

static const char *const NAMES[] = {"tpu-v3", "tpu-v4", "a100",   "h100",
                                    "h200",   "mi300x", "mi350x", "this-cpu", NULL};

const char *const *gs_machine_names(void) { return NAMES; }

bool gs_machine_builtin(const char *name, gs_machine *out) {
    for (size_t i = 0; i < sizeof BUILTIN / sizeof BUILTIN[0]; i++)
        if (strcmp(BUILTIN[i].name, name) == 0) {
            *out = BUILTIN[i];
            return true;
        }
    return false;
}

/* ------------------------------------------------------------------ text */

static const char *topo_name(gs_topology t) {
    return t == GS_TOPO_RING ? "ring" : t == GS_TOPO_TORUS ? "torus" : "switch";
}

/* A number with an optional K/M/G/T (1000) or Ki/Mi/Gi/Ti (1024) suffix; false if malformed. */
static bool parse_number(const char *s, double *v) {
    char *end;
    double x = strtod(s, &end);
    if (end == s) return false;
    static const char units[] = "KMGT";
    const char *u = *end ? strchr(units, *end) : NULL;
    if (u) {
        bool binary = end[1] == 'i';
        double base = binary ? 1024.0 : 1000.0, f = 1;
        for (const char *q = units; q <= u; q++) f *= base;
        x *= f;
        end += binary ? 2 : 1;
    }
    while (isspace((unsigned char)*end)) end++;
    if (*end) return false;
    *v = x;
    return true;
}

static gs_span span_at(const gs_source *src, const char *p) {
    gs_span sp = gs_span_none();
    sp.src = src;
    int line = 1, col = 1;
    for (const char *q = src->text; q < p; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    sp.line = line;
    sp.col = col;
    return sp;
}

/* Where in m a numeric key goes; NULL when key names no number. */
static double *number_slot(gs_machine *m, const char *key) {
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"flops.bf16", offsetof(gs_machine, flops_bf16)},
        {"flops.f32", offsetof(gs_machine, flops_f32)},
        {"flops.f64", offsetof(gs_machine, flops_f64)},
        {"flops.vector", offsetof(gs_machine, vector_flops)},
        {"transcendentals", offsetof(gs_machine, transcendentals)},
        {"memory.bandwidth", offsetof(gs_machine, mem_bandwidth)},
        {"memory.capacity", offsetof(gs_machine, mem_capacity)},
        {"op.overhead", offsetof(gs_machine, op_overhead)},
        {"intra.bandwidth", offsetof(gs_machine, intra.bandwidth)},
        {"intra.latency", offsetof(gs_machine, intra.latency)},
        {"inter.bandwidth", offsetof(gs_machine, inter.bandwidth)},
        {"inter.latency", offsetof(gs_machine, inter.latency)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(keys[i].key, key) == 0) return (double *)((char *)m + keys[i].off);
    return NULL;
}

gs_status gs_machine_parse(const gs_source *src, gs_machine *out, gs_diags *d) {
    memset(out, 0, sizeof *out);
    gs_machine_builtin("this-cpu", out);
    out->name[0] = 0;
    const char *p = src->text;
    while (*p) {
        const char *line = p, *eol = strchr(p, '\n');
        if (!eol) eol = p + strlen(p);
        p = *eol ? eol + 1 : eol;
        char buf[512];
        size_t n = (size_t)(eol - line);
        if (n >= sizeof buf)
            return gs_error(d, span_at(src, line), "line longer than %zu characters", sizeof buf);
        memcpy(buf, line, n);
        buf[n] = 0;
        char *hash = strchr(buf, '#');
        if (hash) *hash = 0;
        char *s = buf;
        while (isspace((unsigned char)*s)) s++;
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) return gs_error(d, span_at(src, line + (s - buf)), "expected `key = value`");
        char *key_end = eq;
        while (key_end > s && isspace((unsigned char)key_end[-1])) key_end--;
        *key_end = 0;
        char *val = eq + 1;
        while (isspace((unsigned char)*val)) val++;
        char *ve = val + strlen(val);
        while (ve > val && isspace((unsigned char)ve[-1])) *--ve = 0;
        gs_span at = span_at(src, line + (val - buf));
        double *slot = number_slot(out, s);
        if (strcmp(s, "base") == 0) {
            char keep[64];
            memcpy(keep, out->name, sizeof keep);
            if (!gs_machine_builtin(val, out))
                return gs_error(d, at, "no built-in machine named '%s'", val);
            if (keep[0]) memcpy(out->name, keep, sizeof keep);
        } else if (strcmp(s, "name") == 0) {
            snprintf(out->name, sizeof out->name, "%s", val);
        } else if (strcmp(s, "description") == 0) {
            snprintf(out->description, sizeof out->description, "%s", val);
        } else if (strcmp(s, "node.devices") == 0) {
            double v;
            if (!parse_number(val, &v) || v < 0 || v > 1e9 || v != (double)(int)v)
                return gs_error(d, at, "node.devices must be a whole number >= 0");
            out->node_devices = (int)v;
        } else if (strcmp(s, "intra.topology") == 0 || strcmp(s, "inter.topology") == 0) {
            gs_link *l = strncmp(s, "intra", 5) == 0 ? &out->intra : &out->inter;
            if (strcmp(val, "switch") == 0) l->topology = GS_TOPO_SWITCH;
            else if (strcmp(val, "ring") == 0) l->topology = GS_TOPO_RING;
            else if (strcmp(val, "torus") == 0) l->topology = GS_TOPO_TORUS;
            else return gs_error(d, at, "topology must be switch, ring or torus, not '%s'", val);
        } else if (slot) {
            double v;
            if (!parse_number(val, &v) || !(v >= 0) || v > 1e30)
                return gs_error(d, at, "%s must be a number >= 0 (with K, M, G, T, Ki, Mi, Gi "
                                       "or Ti), not '%s'", s, val);
            *slot = v;
        } else {
            return gs_error(d, span_at(src, line + (s - buf)), "unknown key '%s'", s);
        }
    }
    if (!out->name[0]) snprintf(out->name, sizeof out->name, "%s", src->name);
    if (!(out->flops_bf16 > 0) || !(out->flops_f32 > 0) || !(out->mem_bandwidth > 0) ||
        !(out->intra.bandwidth > 0) || !(out->inter.bandwidth > 0))
        return gs_error(d, gs_span_none(), "%s: flops, memory.bandwidth and link bandwidths must "
                                           "be > 0", src->name);
    if (!(out->flops_f64 > 0)) out->flops_f64 = out->flops_f32 / 2;
    if (!(out->vector_flops > 0)) out->vector_flops = out->flops_f32 / 8;
    return GS_OK;
}

void gs_machine_print(const gs_machine *m, FILE *out) {
    fprintf(out, "name = %s\n", m->name);
    if (m->description[0]) fprintf(out, "description = %s\n", m->description);
    fprintf(out, "flops.bf16 = %.6g\nflops.f32 = %.6g\nflops.f64 = %.6g\nflops.vector = %.6g\n"
            "transcendentals = %.6g\n", m->flops_bf16, m->flops_f32, m->flops_f64, m->vector_flops,
            m->transcendentals);
    fprintf(out, "memory.bandwidth = %.6g\nmemory.capacity = %.6g\nop.overhead = %.6g\n"
            "node.devices = %d\n", m->mem_bandwidth, m->mem_capacity, m->op_overhead,
            m->node_devices);
    fprintf(out, "intra.bandwidth = %.6g\nintra.latency = %.6g\nintra.topology = %s\n",
            m->intra.bandwidth, m->intra.latency, topo_name(m->intra.topology));
    fprintf(out, "inter.bandwidth = %.6g\ninter.latency = %.6g\ninter.topology = %s\n",
            m->inter.bandwidth, m->inter.latency, topo_name(m->inter.topology));
}
