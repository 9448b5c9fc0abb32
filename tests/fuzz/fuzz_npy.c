/*
 * fuzz_npy.c — libFuzzer target for the .npy reader (gs_npy_read, what `--input NAME=FILE.npy`
 * reads).
 *
 * Each input is the bytes of a .npy file. The reader takes a path, so the bytes go to an
 * in-memory file (memfd) read through /proc/self/fd/N: no disk traffic. A read must succeed or
 * fail with an error, never crash or trip ASan/UBSan; run.sh sets -malloc_limit_mb far above
 * what any file of -max_len bytes holds, so allocating for a shape the file cannot fill is a
 * finding too.
 * When it succeeds, writing the value back (gs_npy_write) and reading that must give the same
 * type, dims and bytes. Any violation aborts, which libFuzzer reports as a finding.
 *
 * Built only with clang and -DGSPMD_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by `make fuzz`.
 */
#define _GNU_SOURCE
#include "gspmd/npy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* An in-memory file and its /proc path, made once per process. */
typedef struct memfile {
    int fd;        /* the memfd */
    char path[64]; /* /proc/self/fd/N */
} memfile;

static void memfile_open(memfile *f, const char *name) {
    f->fd = memfd_create(name, 0);
    if (f->fd < 0) {
        perror("fuzz_npy: memfd_create");
        abort();
    }
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

/* Replaces the file's contents with data[0..size). */
static void memfile_set(const memfile *f, const uint8_t *data, size_t size) {
    if (ftruncate(f->fd, 0) != 0) abort();
    for (size_t at = 0; at < size;) {
        ssize_t k = pwrite(f->fd, data + at, size - at, (off_t)at);
        if (k <= 0) abort();
        at += (size_t)k;
    }
}

static bool same_value(const gs_value *x, const gs_value *y) {
    if (x->type != y->type || x->rank != y->rank || x->n != y->n) return false;
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] != y->dims[i]) return false;
    return memcmp(x->data, y->data, gs_value_bytes(x)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static memfile in, out;
    static FILE *sink;
    if (!sink) {
        sink = fopen("/dev/null", "w");
        memfile_open(&in, "fuzz_npy_in");
        memfile_open(&out, "fuzz_npy_out");
    }
    memfile_set(&in, data, size);
    gs_diags d = {0};
    gs_value *v = NULL;
    gs_status st = gs_npy_read(in.path, &v, &d);
    if (st != GS_OK && d.n_errors == 0) {
        fprintf(stderr, "fuzz_npy: read failed without an error\n");
        abort();
    }
    if (sink) gs_diags_render(&d, sink);
    gs_diags_free(&d);
    if (st != GS_OK) return 0;
    if (!v || !gs_type_is_array(v->type)) abort();
    gs_diags d2 = {0};
    gs_value *w = NULL;
    if (gs_npy_write(out.path, v, &d2) != GS_OK || gs_npy_read(out.path, &w, &d2) != GS_OK) {
        fprintf(stderr, "fuzz_npy: a value read cannot be written and read back:\n");
        gs_diags_render(&d2, stderr);
        abort();
    }
    if (!same_value(v, w)) {
        fprintf(stderr, "fuzz_npy: write + read gives another value\n");
        abort();
    }
    gs_diags_free(&d2);
    gs_value_free(w);
    gs_value_free(v);
    return 0;
}
