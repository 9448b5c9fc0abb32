/*
 * fuzz_pipeline.c — libFuzzer target for the whole pipeline on HLO text, the path `gspmd run
 * --verify` takes, calling the library as an embedder does (no CLI checks first): parse →
 * gs_module_verify → the cost model (gs_cost_step) → gs_compile for 2 devices (SPMD propagation,
 * GSPMD's or for inputs of odd length Shardy's, and partitioning), then gs_partition of the propagated module for 4 devices →
 * gs_module_verify and the cost model of each
 * partitioned program; then, for small modules, the 2-device program runs on the threads backend
 * (gs_run_partitioned) and its result is compared with the reference interpreter
 * (gs_verify_outputs).
 *
 * Errors returned as values (a module that does not verify, conflicting shardings, an
 * instruction the partitioner cannot handle) are fine. Findings, each an abort() with the
 * module on stderr: a crash or ASan/UBSan report anywhere; a failure without an error; a
 * partitioned program that does not verify; a program that fails to run or whose result
 * differs from the reference.
 *
 * Time per input stays bounded: the run happens only when every value has at most MAX_ELEMENTS
 * elements, the module has at most MAX_INSTRS instructions and no while loop (the interpreter
 * has no trip-count limit, so a fuzzed loop could spin forever), and the reference interpreter
 * runs it; the partitioner only sees
 * modules of at most MAX_PARTITION_INSTRS instructions. libFuzzer's -timeout (run.sh) catches
 * the rest.
 *
 * Built only with clang and -DGSPMD_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by `make fuzz`.
 */
#include "gspmd/compile.h"
#include "gspmd/cost.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_ELEMENTS = 4096,        /* run only when every value (leaf) is at most this big */
    MAX_INSTRS = 200,           /* run only modules of at most this many instructions */
    MAX_PARTITION_INSTRS = 2000 /* propagate and partition only up to this many */
};

/* Constants up to 64 KiB: enough for any module small enough to run. */
static const gs_parse_options OPTS = {.max_literal_bytes = 1 << 16};

static FILE *sink;
static const char *current; /* the input's text, printed with every finding */
static bool has_collective; /* the input holds collectives of its own: not run */

static void finding(const char *what, const gs_diags *d, const gs_module *p) {
    fprintf(stderr, "fuzz_pipeline: %s\n--- module:\n%s\n", what, current);
    if (d) gs_diags_render(d, stderr);
    if (p) {
        char *t = gs_module_to_string(p);
        fprintf(stderr, "--- partitioned program:\n%s\n", t ? t : "(out of memory)");
        free(t);
    }
    abort();
}

/* Whether every leaf of s has at most MAX_ELEMENTS elements. */
static bool small_shape(const gs_shape *s) {
    if (gs_shape_is_tuple(s)) {
        for (int i = 0; i < s->n_tuple; i++)
            if (!small_shape(s->tuple[i])) return false;
        return true;
    }
    if (!gs_shape_is_array(s)) return true;
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dims[i] < 0 || s->dims[i] > MAX_ELEMENTS) return false;
        n *= s->dims[i];
        if (n > MAX_ELEMENTS) return false;
    }
    return true;
}

/* Counts m's instructions; *runnable: small enough to run, without while loops or device ids;
 * sets has_collective. */
static int count_instrs(const gs_module *m, bool *runnable) {
    int n = 0;
    *runnable = true;
    for (int c = 0; c < m->n_comps; c++) {
        const gs_computation *comp = m->comps[c];
        n += comp->n_instrs;
        for (int i = 0; i < comp->n_instrs && *runnable; i++) {
            const gs_instr *in = comp->instrs[i];
            /* partition-id and replica-id differ per device: an unpartitioned module using
             * them has no one result to compare with. */
            if (in->op == GS_OP_WHILE || in->op == GS_OP_PARTITION_ID ||
                in->op == GS_OP_REPLICA_ID || !small_shape(in->shape))
                *runnable = false;
        }
        for (int i = 0; i < comp->n_instrs; i++)
            if (gs_op_info_of(comp->instrs[i]->op)->flags & GS_OPF_COLLECTIVE)
                has_collective = true;
    }
    if (n > MAX_INSTRS) *runnable = false;
    return n;
}

/* Partitions m for n devices; NULL when the partitioner declines with an error. A program that
 * does not verify is a finding. */
static gs_module *partition(const gs_module *m, int n) {
    gs_partition_options o = {0};
    o.num_partitions = n;
    o.no_warnings = true;
    gs_diags d = {0};
    gs_module *p = NULL;
    gs_status st = gs_partition(m, &o, &p, NULL, &d);
    if (st != GS_OK && d.n_errors == 0) finding("partition failed without an error", &d, NULL);
    if (st == GS_OK && !p) finding("partition succeeded without a program", &d, NULL);
    gs_diags_render(&d, sink);
    gs_diags_free(&d);
    if (st != GS_OK) {
        gs_module_free(p);
        return NULL;
    }
    gs_diags dv = {0};
    if (gs_module_verify(p, &dv) != GS_OK) finding("the program does not verify", &dv, p);
    gs_diags_free(&dv);
    return p;
}

/* The cost model on m: a step's cost, or an error; a failure without one is a finding. */
static void cost(const gs_module *m) {
    gs_machine mc;
    if (!gs_machine_builtin("tpu-v3", &mc)) abort();
    gs_diags d = {0};
    gs_step_cost c;
    if (gs_cost_step(m, &mc, &c, &d) != GS_OK && d.n_errors == 0)
        finding("the cost model failed without an error", &d, NULL);
    gs_cost site;
    gs_cost_module(m, &site);
    gs_diags_render(&d, sink);
    gs_diags_free(&d);
}

/* Runs p (from m) on 2 devices (threads) and compares with the reference interpreter. */
static void run_and_compare(const gs_module *m, const gs_module *p) {
    gs_diags d = {0};
    gs_value **args = NULL, *got = NULL;
    int n_args = 0;
    if (gs_interp_make_sharded_args(m, NULL, 1, 2, &args, &n_args, &d) != GS_OK) {
        /* Parameters the interpreter cannot make values for (tokens, say): not a finding. */
        gs_diags_free(&d);
        return;
    }
    /* The reference first: a module the interpreter rejects (an op it lacks, a custom-call,
     * mixed precision it does not run) is not run on devices. */
    gs_diags dr = {0};
    gs_value *want = NULL;
    bool reference_ok = gs_interp_eval(m, NULL, args, n_args, &want, &dr) == GS_OK;
    gs_value_free(want);
    gs_diags_free(&dr);
    if (reference_ok) {
        if (gs_run_partitioned(m, p, 2, args, n_args, 1, 10, &got, &d) != GS_OK)
            finding("the 2-device program fails to run where the reference runs", &d, p);
        gs_leaf_check *checks = NULL;
        int n_checks = 0;
        bool all_ok = false;
        if (gs_verify_outputs(m, args, n_args, 1, 2, got, &checks, &n_checks, &all_ok, &d) != GS_OK) {
            /* An error the comparison reports (the rounding bounds refuse an op the reference's
             * fast path ran, say) is a clean failure, not a finding; only a silent one is. */
            if (d.n_errors == 0) finding("the outputs cannot be compared with the reference", &d, p);
        } else if (!all_ok) {
            for (int i = 0; i < n_checks; i++)
                if (!checks[i].ok)
                    fprintf(stderr,
                            "output %d: error %g (limit %g) at element %lld: got %.9g, "
                            "want %.9g\n",
                            i, checks[i].error, checks[i].limit, (long long)checks[i].worst,
                            checks[i].got, checks[i].want);
            finding("the 2-device result differs from the reference", &d, p);
        }
        free(checks);
    }
    gs_value_free(got);
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    gs_diags_render(&d, sink);
    gs_diags_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!sink) sink = fopen("/dev/null", "w");
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    current = text;
    has_collective = false;
    gs_source *src = gs_source_from_string("fuzz.hlo", text);
    if (!src) abort();
    gs_diags d = {0};
    gs_module *m = gs_parse_module_ex(src, &OPTS, &d);
    if (!m && d.n_errors == 0) finding("parse failed without an error", &d, NULL);
    gs_module *p2 = NULL, *p4 = NULL;
    bool runnable = false;
    /* The library's calls as an embedder makes them: its entry points check what an input needs
     * (bounded shapes, device counts, shardings that fit), so none reaches an assertion. */
    if (m && gs_module_verify(m, &d) == GS_OK &&
        count_instrs(m, &runnable) <= MAX_PARTITION_INSTRS) {
        cost(m);
        /* 2 devices through the whole compile (gs_compile: propagate, partition, checks),
         * 4 devices by the partitioner alone on the module it propagated. */
        gs_compile_options co;
        gs_compile_options_init(&co, 2);
        co.partition.no_warnings = true;
        /* Half the inputs through Shardy's propagation (named shardings: `{mesh[...], ...}`). */
        co.algorithm = size & 1 ? GS_PROPAGATE_SHARDY : GS_PROPAGATE_GSPMD;
        gs_compiled compiled = {0};
        int errors = d.n_errors;
        gs_status st = gs_compile(m, &co, &compiled, &d);
        if (st != GS_OK && d.n_errors == errors)
            finding("the compile failed without an error", &d, NULL);
        p2 = compiled.program;
        if (st == GS_OK) {
            gs_diags dv = {0};
            if (gs_module_verify(m, &dv) != GS_OK)
                finding("the propagated module does not verify", &dv, NULL);
            if (gs_module_verify(p2, &dv) != GS_OK)
                finding("the 2-device program does not verify", &dv, p2);
            gs_diags_free(&dv);
            p4 = partition(m, 4);
            if (p2) cost(p2);
            if (p4) cost(p4);
            /* Not run: inputs with collectives of their own (the reference runs them as one
             * device would; see partition_collective_out_of_range.hlo). */
            if (p2 && runnable && !has_collective) run_and_compare(m, p2);
        }
    }
    gs_diags_render(&d, sink);
    gs_diags_free(&d);
    gs_module_free(p4);
    gs_module_free(p2);
    gs_module_free(m);
    gs_source_free(src);
    free(text);
    current = NULL;
    return 0;
}
