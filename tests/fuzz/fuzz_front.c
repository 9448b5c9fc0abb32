/*
 * fuzz_front.c — libFuzzer target for the JAX-style front end: the `--mesh` parser
 * (gs_mesh_parse), PartitionSpecs (gs_sharding_from_spec) and `--shard NAME=SPEC` requests
 * (gs_module_apply_shardings) on a small fixed module.
 *
 * The input is split on newlines: the first line is the mesh text (`data=2,model=4:<=[4,2]T(1,0)`,
 * empty: no mesh), each further line one request `NAME=SPEC` (a line without '=' is a spec for
 * every instruction, `*`). Mesh text and each spec are also given to their parsers as exactly
 * their bytes with no terminator, so ASan reports any read past the end.
 *
 * Checked: nothing crashes or trips ASan/UBSan; a failure comes with an error; a parsed mesh
 * prints to text that parses back to a mesh printing the same; a spec that parses gives a
 * sharding that prints and parses back equal; after requests that succeed, the module verifies
 * and its text parses back and prints the same (the shardings set are valid HLO text). Any
 * violation aborts, which libFuzzer reports as a finding.
 *
 * Built only with clang and -DGSPMD_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by `make fuzz`.
 */
#include "gspmd/sharding.h"
#include "gspmd/text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The module the requests apply to: arrays of rank 0 to 4 (uneven and size-1 dims among them),
 * a tuple, a called computation. No num_partitions, so any device count is accepted. */
static const char MODULE[] =
    "HloModule front\n"
    "\n"
    "add {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(a, b)\n"
    "}\n"
    "\n"
    "ENTRY main {\n"
    "  x = f32[8,6] parameter(0)\n"
    "  w = f32[6,5] parameter(1)\n"
    "  v = f32[3,1,4,2] parameter(2)\n"
    "  s = s32[] parameter(3)\n"
    "  y = f32[8,5] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  z = f32[] constant(0)\n"
    "  r = f32[8] reduce(y, z), dimensions={1}, to_apply=add\n"
    "  t = (f32[8], f32[3,1,4,2], s32[]) tuple(r, v, s)\n"
    "  ROOT o = (f32[8,5], (f32[8], f32[3,1,4,2], s32[])) tuple(y, t)\n"
    "}\n";

static FILE *sink;

/* Aborts unless a failed call left an error. */
static void need_error(gs_status st, const gs_diags *d, const char *what) {
    if (st != GS_OK && d->n_errors == 0) {
        fprintf(stderr, "fuzz_front: %s failed without an error\n", what);
        abort();
    }
}

/* A copy of text[0..len) in a buffer of exactly len bytes (at least 1), for overread checks. */
static char *exact_copy(const char *text, size_t len) {
    char *c = malloc(len ? len : 1);
    if (!c) abort();
    memcpy(c, text, len);
    return c;
}

/* Parses a mesh; on success checks print + re-parse is a fixed point. */
static bool parse_mesh(gs_arena *a, const char *text, size_t len, gs_mesh *out) {
    gs_source src = {"--mesh", "", 0}; /* spans only */
    gs_span span = {&src, 1, 1};
    char *c = exact_copy(text, len);
    gs_diags d = {0};
    gs_status st = gs_mesh_parse(a, c, len, out, &d, span);
    free(c);
    need_error(st, &d, "gs_mesh_parse");
    gs_diags_render(&d, sink);
    gs_diags_free(&d);
    if (st != GS_OK) return false;
    gs_sb once = {0}, twice = {0};
    gs_mesh_print(&once, out);
    if (once.failed) abort();
    gs_mesh m2;
    gs_diags d2 = {0};
    if (gs_mesh_parse(a, gs_sb_str(&once), strlen(gs_sb_str(&once)), &m2, &d2, span) != GS_OK) {
        fprintf(stderr, "fuzz_front: the printed mesh does not parse: %s\n", gs_sb_str(&once));
        gs_diags_render(&d2, stderr);
        abort();
    }
    gs_mesh_print(&twice, &m2);
    if (twice.failed || strcmp(gs_sb_str(&once), gs_sb_str(&twice)) != 0 ||
        m2.n_devices != out->n_devices || !gs_tile_equal(&m2.devices, &out->devices)) {
        fprintf(stderr,
                "fuzz_front: mesh printing is not a fixed point\n  once:  %s\n  twice: %s\n",
                gs_sb_str(&once), gs_sb_str(&twice));
        abort();
    }
    gs_diags_free(&d2);
    gs_sb_free(&once);
    gs_sb_free(&twice);
    return true;
}

/* Turns spec into a sharding over mesh (not NULL) for each rank 0..4 and checks the result round-trips as text. */
static void try_spec(gs_arena *a, const gs_mesh *mesh, const char *spec, size_t len) {
    gs_source src = {"--shard", "", 0};
    gs_span span = {&src, 1, 1};
    for (int rank = 0; rank <= 4; rank++) {
        char *c = exact_copy(spec, len);
        gs_diags d = {0};
        gs_sharding *s = NULL;
        gs_status st = gs_sharding_from_spec(a, mesh, c, len, rank, &s, &d, span);
        free(c);
        need_error(st, &d, "gs_sharding_from_spec");
        gs_diags_render(&d, sink);
        gs_diags_free(&d);
        if (st != GS_OK) continue;
        if (!s) abort();
        char *text = gs_sharding_to_string(a, s);
        if (!text) abort();
        gs_sharding *s2 = NULL;
        gs_diags d2 = {0};
        if (gs_sharding_parse(a, text, strlen(text), &s2, &d2, span) != GS_OK ||
            !gs_sharding_equal(s, s2)) {
            fprintf(stderr,
                    "fuzz_front: spec '%.*s' (rank %d) gives %s, which does not parse "
                    "back to the same sharding\n",
                    (int)len, spec, rank, text);
            gs_diags_render(&d2, stderr);
            abort();
        }
        gs_diags_free(&d2);
    }
}

/* Parses text; aborts when it does not parse (the fixed module, or a printed one). */
static gs_module *must_parse(const char *name, const char *text, gs_source **src) {
    *src = gs_source_from_string(name, text);
    if (!*src) abort();
    gs_diags d = {0};
    gs_module *m = gs_parse_module(*src, &d);
    if (!m) {
        fprintf(stderr, "fuzz_front: %s does not parse:\n%s\n", name, text);
        gs_diags_render(&d, stderr);
        abort();
    }
    gs_diags_free(&d);
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!sink) sink = fopen("/dev/null", "w");
    if (size > 4096) return 0;
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    size_t mesh_len = nl ? (size_t)(nl - text) : size;

    gs_source *src;
    gs_module *m = must_parse("front.hlo", MODULE, &src);
    gs_mesh mesh;
    bool have_mesh = mesh_len > 0 && parse_mesh(&m->arena, text, mesh_len, &mesh);

    /* The request lines, NUL-terminated copies (gs_shard_request holds C strings). */
    enum { MAX_REQS = 16 };
    gs_shard_request reqs[MAX_REQS];
    char *owned[2 * MAX_REQS];
    int n = 0, n_owned = 0;
    for (const char *p = nl ? nl + 1 : text + size; p < text + size && n < MAX_REQS;) {
        const char *end = memchr(p, '\n', (size_t)(text + size - p));
        if (!end) end = text + size;
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *spec = eq ? eq + 1 : p;
        if (have_mesh) try_spec(&m->arena, &mesh, spec, (size_t)(end - spec)); /* needs one */
        char *pat = strndup(eq ? p : "*", eq ? (size_t)(eq - p) : 1);
        char *sp = strndup(spec, (size_t)(end - spec));
        if (!pat || !sp) abort();
        owned[n_owned++] = pat;
        owned[n_owned++] = sp;
        reqs[n].pattern = pat;
        reqs[n].spec = sp;
        n++;
        p = end + 1;
    }

    gs_diags d = {0};
    int n_set = 0;
    gs_status st = gs_module_apply_shardings(m, have_mesh ? &mesh : NULL, n, reqs, &n_set, &d);
    need_error(st, &d, "gs_module_apply_shardings");
    gs_diags_render(&d, sink);
    gs_diags_free(&d);
    if (st == GS_OK) {
        gs_diags dv = {0};
        char *once = gs_module_to_string(m);
        if (!once) abort();
        if (gs_module_verify(m, &dv) != GS_OK) {
            fprintf(stderr, "fuzz_front: the module no longer verifies:\n%s\n", once);
            gs_diags_render(&dv, stderr);
            abort();
        }
        gs_diags_free(&dv);
        gs_source *src2;
        gs_module *m2 = must_parse("applied.hlo", once, &src2);
        char *twice = gs_module_to_string(m2);
        if (!twice || strcmp(once, twice) != 0) {
            fprintf(stderr,
                    "fuzz_front: printing is not a fixed point\n--- once:\n%s\n"
                    "--- twice:\n%s\n",
                    once, twice ? twice : "(out of memory)");
            abort();
        }
        free(twice);
        gs_module_free(m2);
        gs_source_free(src2);
        free(once);
    }
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    gs_module_free(m);
    gs_source_free(src);
    return 0;
}
