/*
 * fuzz_sharding.c — libFuzzer target for the sharding-text parser (gs_sharding_parse, what
 * follows `sharding=` in HLO: `{devices=[2,1]<=[2]}`, tuples, named `{mesh[...] [...]}`).
 *
 * The input is given as exactly `size` bytes with no terminator, so ASan reports any read past
 * text[len). A parse must succeed or fail with a diagnostic, never crash; a parsed sharding's
 * canonical text must parse back to an equal sharding that prints the same (a fixed point).
 *
 * Built only with clang and -DGSPMD_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by `make fuzz`.
 */
#include "gspmd/sharding.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
