/*
 * fuzz_sharding.c — libFuzzer target for the sharding-text parser (gs_sharding_parse, what
 * follows `sharding=` in HLO: `{devices=[2,1]<=[2]}`, tuples, named `{mesh[...] [...]}`).
 *
 * The input is given as exactly `size` bytes with no terminator, so ASan reports any read past
 * text[len). A parse must succeed or fail with a diagnostic, never crash; a parsed sharding's
 * canonical text must parse back to an equal sharding that prints the same (a fixed point).
 * The same bytes also go to the Shardy mesh, sharding and op sharding rule readers.
 *
 * Built only with clang and -DGSPMD_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by `make fuzz`.
 */
#include "gspmd/sharding.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The same bytes as Shardy's attributes: a mesh, and a sharding over @mesh (x=2, y=4, z=3).
 * Either is an error with a message or reads; a sharding read prints (in XLA's named form)
 * text that XLA's sharding parser reads back to an equal sharding. */
static void sdy(gs_arena *a, const char *text, size_t size, gs_span span) {
    gs_diags d = {0};
    gs_mesh m;
    if (gs_mesh_parse_sdy(a, text, size, &m, NULL, &d, span) != GS_OK && d.n_errors == 0) abort();
    gs_diags_free(&d);
    static const char mesh_text[] = "<[\"x\"=2, \"y\"=4, \"z\"=3]>";
    gs_mesh mesh;
    if (gs_mesh_parse_sdy(a, mesh_text, strlen(mesh_text), &mesh, NULL, NULL, span) != GS_OK)
        abort();
    const char *name = "mesh";
    gs_mesh_table t = {1, &name, &mesh};
    gs_sharding *s = NULL;
    if (gs_sharding_parse_sdy(a, &t, text, size, &s, NULL, &d, span) != GS_OK) {
        if (d.n_errors == 0) abort();
    } else {
        char *once = gs_sharding_to_string(a, s);
        gs_sharding *back = NULL;
        gs_diags d2 = {0};
        if (!once || gs_sharding_parse(a, once, strlen(once), &back, &d2, span) != GS_OK ||
            !gs_sharding_equal(s, back)) {
            fprintf(stderr, "fuzz_sharding: sdy sharding printed as %s does not read back\n",
                    once ? once : "(null)");
            abort();
        }
        gs_diags_free(&d2);
    }
    gs_diags_free(&d);
}

/* The same bytes as a Shardy op sharding rule (`#sdy.op_sharding_rule<...>`): an error with a
 * message, or a rule whose printed text reads back to a rule printing the same. */
static void rule(gs_arena *a, const char *text, size_t size, gs_span span) {
    gs_diags d = {0};
    gs_op_rule *r = NULL;
    if (gs_op_rule_parse(a, text, size, NULL, &r, NULL, &d, span) != GS_OK) {
        if (d.n_errors == 0) abort();
        gs_diags_free(&d);
        return;
    }
    char *once = NULL, *twice = NULL;
    gs_sb sb = {0};
    gs_sb_putc(&sb, '<');
    gs_op_rule_print(&sb, r);
    gs_sb_putc(&sb, '>');
    once = gs_sb_take(&sb);
    gs_op_rule *back = NULL;
    if (!once || gs_op_rule_parse(a, once, strlen(once), NULL, &back, NULL, &d, span) != GS_OK) {
        fprintf(stderr, "fuzz_sharding: rule printed as %s does not read back\n",
                once ? once : "(null)");
        abort();
    }
    gs_sb_putc(&sb, '<');
    gs_op_rule_print(&sb, back);
    gs_sb_putc(&sb, '>');
    twice = gs_sb_take(&sb);
    if (!twice || strcmp(once, twice) != 0) {
        fprintf(stderr, "fuzz_sharding: rule printing is not a fixed point\n  once:  %s\n", once);
        abort();
    }
    free(once);
    free(twice);
    gs_diags_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    char *text = malloc(size ? size : 1);
    if (!text) return 0;
    memcpy(text, data, size);
    gs_source src = {"fuzz", "", 0}; /* spans only: the text is not a source line */
    gs_span span = {&src, 1, 1};
    gs_arena a;
    gs_arena_init(&a);
    gs_diags d = {0};
    gs_sharding *s = NULL;
    gs_status st = gs_sharding_parse(&a, text, size, &s, &d, span);
    sdy(&a, text, size, span);
    rule(&a, text, size, span);
    free(text);
    if (st != GS_OK && d.n_errors == 0) {
        fprintf(stderr, "fuzz_sharding: parse failed without an error\n");
        abort();
    }
    if (st == GS_OK) {
        if (!s) abort();
        char *once = gs_sharding_to_string(&a, s);
        if (!once) abort();
        gs_sharding *s2 = NULL;
        gs_diags d2 = {0};
        if (gs_sharding_parse(&a, once, strlen(once), &s2, &d2, span) != GS_OK) {
            fprintf(stderr, "fuzz_sharding: the printed sharding does not parse: %s\n", once);
            gs_diags_render(&d2, stderr);
            abort();
        }
        gs_diags_free(&d2);
        char *twice = gs_sharding_to_string(&a, s2);
        if (!twice) abort();
        if (strcmp(once, twice) != 0) {
            fprintf(stderr,
                    "fuzz_sharding: printing is not a fixed point\n  once:  %s\n  twice: %s\n",
                    once, twice);
            abort();
        }
        if (!gs_sharding_equal(s, s2)) {
            fprintf(stderr, "fuzz_sharding: %s parses back to an unequal sharding\n", once);
            abort();
        }
    }
    if (sink) gs_diags_render(&d, sink);
    gs_diags_free(&d);
    gs_arena_free(&a);
    return 0;
}
