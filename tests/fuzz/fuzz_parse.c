/*
 * fuzz_parse.c — libFuzzer target for the HLO text parser and printer.
 *
 * Each input is HLO text. The parse must succeed or fail with diagnostics (rendered, to exercise
 * the caret code), never crash or trip ASan/UBSan. When it succeeds, printing must be a fixed
 * point: print(parse(print(m))) == print(m), and the printed text must parse. When the input is
 * StableHLO (MLIR) text, printing as StableHLO must be a fixed point as well:
 * print_mlir(parse(print_mlir(m))) == print_mlir(m) (the printer may refuse an op with a
 * located error, never crash). Any violation aborts with both texts on stderr, which libFuzzer
 * reports as a finding.
 *
 * Built only with clang and -DGSPMD_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by `make fuzz`.
 */
#include "gspmd/text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Constants up to 1 MiB: a scalar fills its whole shape (`f32[1000000] constant(0)`), and a
 * bigger fill only makes printing slow, not the parser more exercised. */
static const gs_parse_options OPTS = {.max_literal_bytes = 1 << 20};

/* Parses text (NUL-terminated); renders any diagnostics to sink. */
static gs_module *parse(const char *name, const char *text, gs_source **src, FILE *sink) {
    *src = gs_source_from_string(name, text);
    if (!*src) abort();
    gs_diags d = {0};
    gs_module *m = gs_parse_module_ex(*src, &OPTS, &d);
    if (sink) gs_diags_render(&d, sink);
    if (!m && d.n_errors == 0) {
        fprintf(stderr, "fuzz_parse: parse failed without an error\n");
        abort();
    }
    gs_diags_free(&d);
    return m;
}

/* m printed as StableHLO, or NULL when the printer refuses it (with an error, else abort). */
static char *print_mlir(const gs_module *m) {
    gs_diags d = {0};
    char *text = gs_module_to_mlir(m, &d);
    if (!text && d.n_errors == 0) {
        fprintf(stderr, "fuzz_parse: printing as StableHLO failed without an error\n");
        abort();
    }
    gs_diags_free(&d);
    return text;
}

/* m printed as HLO text (NULL only when memory runs out: abort). */
static char *print_hlo(const gs_module *m) {
    char *text = gs_module_to_string(m);
    if (!text) abort();
    return text;
}

/* print(parse(print(m))) == print(m), and print(m) parses; `what` names the format. A printer
 * that refuses m (NULL) ends the check. */
static void check_fixed_point(const gs_module *m, char *(*print)(const gs_module *),
                              const char *what) {
    char *once = print(m);
    if (!once) return;
    gs_source *src;
    gs_module *m2 = parse("once", once, &src, NULL);
    if (!m2) {
        gs_diags d = {0};
        gs_module_free(gs_parse_module_ex(src, &OPTS, &d));
        fprintf(stderr, "fuzz_parse: the printed %s does not parse:\n%s\n", what, once);
        gs_diags_render(&d, stderr);
        abort();
    }
    char *twice = print(m2);
    if (!twice || strcmp(once, twice) != 0) {
        fprintf(stderr, "fuzz_parse: printing %s is not a fixed point\n--- once:\n%s\n"
                        "--- twice:\n%s\n",
                what, once, twice ? twice : "(refused)");
        abort();
    }
    free(twice);
    gs_module_free(m2);
    gs_source_free(src);
    free(once);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0; /* the parser reads a NUL-terminated source (up to the first NUL) */
    gs_source *src;
    gs_module *m = parse("fuzz.hlo", text, &src, sink);
    free(text);
    if (m) {
        check_fixed_point(m, print_hlo, "HLO");
        /* StableHLO gives each value one type, taken from its definition: a module whose
         * instructions disagree on a value's type (which the verifier rejects) has no faithful
         * StableHLO text, so the fixed point is asked of verified modules. */
        gs_diags vd = {0};
        if (gs_source_is_mlir(src) && gs_module_verify(m, &vd) == GS_OK)
            check_fixed_point(m, print_mlir, "StableHLO");
        gs_diags_free(&vd);
        gs_module_free(m);
    }
    gs_source_free(src);
    return 0;
}
