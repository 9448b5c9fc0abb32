/*
 * bench_parse.c — parser (and printer) throughput on real dumps: parses each file given on the
 * command line repeatedly for about half a second and prints MB/s. Not part of `make test`.
 *
 *   build/bench/bench_parse ../shared/real/NAME.hlo ...
 */
#include "gspmd/text.h"

#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_parse FILE.hlo...\n");
        return 2;
    }
    double total_bytes = 0, total_parse = 0;
    printf("%-60s %10s %8s %10s %10s\n", "file", "bytes", "runs", "parse MB/s", "print MB/s");
    for (int i = 1; i < argc; i++) {
        char err[512];
        gs_source *src = gs_source_read_file(argv[i], err, sizeof err);
        if (!src) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        int runs = 0;
        double t0 = now(), t_print = 0;
        do {
            gs_diags d = {0};
            gs_module *m = gs_parse_module(src, &d);
            if (!m) {
                gs_diags_render(&d, stderr);
                return 1;
            }
            double tp = now();
            char *text = gs_module_to_string(m);
            t_print += now() - tp;
            free(text);
            gs_module_free(m);
            gs_diags_free(&d);
            runs++;
        } while (now() - t0 < 0.5);
        double elapsed = now() - t0 - t_print;
        double mb = (double)src->len * runs / 1e6;
        printf("%-60s %10zu %8d %10.1f %10.1f\n", argv[i], src->len, runs, mb / elapsed, mb / t_print);
        total_bytes += mb;
        total_parse += elapsed;
        gs_source_free(src);
    }
    printf("overall parse: %.1f MB/s\n", total_bytes / total_parse);
    return 0;
}
