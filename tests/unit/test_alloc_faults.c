/*
 * test_alloc_faults.c — every heap allocation of the interpreter and the runtime can fail, and a
 * run whose allocation fails returns an error: no crash, no hang, no leak (the ASan build's leak
 * checker sees every run), no half-made result.
 *
 * This executable links its own gs_sys_malloc/calloc/realloc (src/base/sysalloc.h), which fail
 * the k-th call once armed. For each module of tests/interp (the reference interpreter, every
 * kernel family) and of tests/partition whose partitioning needs no command-line sharding (the
 * partitioned program on its devices, threads backend: collectives, device threads, the
 * communicator's abort), a clean run counts the allocations, then the run is repeated with
 * allocation k failing, for every k (a stride over long runs, so the walk stays a few seconds).
 * The parser's and the partitioner's arenas have their own walks (test_text.c, test_partition.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sysalloc.h"
#include "gspmd/interp.h"
#include "gspmd/ir.h"
#include "gspmd/partition.h"
#include "gspmd/propagate.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

#if defined(__SANITIZE_ADDRESS__)
#define LEAK_CHECKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LEAK_CHECKS 1
#endif
#endif
#ifdef LEAK_CHECKS
#include <sanitizer/lsan_interface.h>
/* Under ASan each module's walk is checked for leaks at once, so that a leak names its module
 * (GSPMD_FAULT_FILE and GSPMD_FAULT_CALL narrow a walk down to one file and one call). */
static bool leaked(void) { return __lsan_do_recoverable_leak_check() != 0; }
#else
static bool leaked(void) { return false; }
#endif

/* ------------------------------------------------------------------ the failing allocator */

static atomic_long n_calls;   /* allocations since the counter was reset */
static atomic_long fail_call; /* the call that fails (1-based); 0 = none */
static atomic_long n_failed;  /* allocations refused since the reset */

static bool refuse(void) {
    long k = atomic_fetch_add(&n_calls, 1) + 1;
    long f = atomic_load(&fail_call);
    if (f > 0 && k == f) {
        atomic_fetch_add(&n_failed, 1);
        return true;
    }
    return false;
}

void *gs_sys_malloc(size_t size) { return refuse() ? NULL : malloc(size); }
void *gs_sys_calloc(size_t n, size_t size) { return refuse() ? NULL : calloc(n, size); }
void *gs_sys_realloc(void *p, size_t size) { return refuse() ? NULL : realloc(p, size); }

static void arm(long k) {
    atomic_store(&fail_call, k);
    atomic_store(&n_calls, 0);
    atomic_store(&n_failed, 0);
}

/* ------------------------------------------------------------------ files */

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = malloc((size_t)n + 1);
    if (t && fread(t, 1, (size_t)n, f) != (size_t)n) {
        free(t);
        t = NULL;
    }
    if (t) t[n] = 0;
    fclose(f);
    return t;
}

/* Is this file left out by GSPMD_FAULT_FILE (a name to walk alone)? */
static bool skipped(const char *name) {
    const char *only = getenv("GSPMD_FAULT_FILE");
    return only && strcmp(only, name) != 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .hlo files of dir, sorted (malloc'd names; *n of them). */
static char **hlo_files(const char *dir, int *n) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    char **names = NULL;
    int cap = 0;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".hlo") != 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, (size_t)cap * sizeof *names);
            assert_non_null(names);
        }
        names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, sizeof *names, by_name);
    return names;
}

/* ------------------------------------------------------------------ one run */

/* What a walk runs: a module (and for partitioned runs its program and device count). */
typedef struct subject {
    const char *name;
    gs_module *m, *p;
    int n_devices; /* 0: the reference interpreter */
} subject;

/* Are a and b the same value, bit for bit (NaNs included)? */
static bool same_value(const gs_value *a, const gs_value *b) {
    if (!a || !b || a->type != b->type || a->n_tuple != b->n_tuple || a->rank != b->rank ||
        a->n != b->n)
        return false;
    for (int i = 0; i < a->n_tuple; i++)
        if (!same_value(a->tuple[i], b->tuple[i])) return false;
    if (a->type == GS_TUPLE || a->type == GS_TOKEN) return true;
    return memcmp(a->data, b->data, (size_t)a->n * gs_type_size(a->type)) == 0;
}

/* One run from the module's arguments to its result, every allocation in it counted: GS_OK
 * with a result (kept in *result when result is not NULL, else compared with *want when want
 * is not NULL), or GS_ERR with an error. */
static gs_status run_once(const subject *s, bool *had_error, gs_value **result,
                          const gs_value *want) {
    gs_diags d = {0};
    gs_value **args = NULL, *out = NULL, *bound = NULL;
    int n_args = 0;
    gs_status st = gs_interp_make_args(s->m, NULL, 7, &args, &n_args, &d);
    if (st == GS_OK) {
        if (s->n_devices) {
            st = gs_run_partitioned(s->m, s->p, s->n_devices, args, n_args, 7, 30, &out, &d);
        } else {
            gs_collectives manual = {NULL, (void *)s->m, gs_collective_execute_bundle, NULL};
            gs_interp_env env = {0, 0, 1, &manual, 7, NULL, NULL, 0, NULL};
            st = gs_interp_eval_bounded(s->m, &env, args, n_args, &out, &bound, &d);
        }
    }
    if (st == GS_OK && !out) st = GS_ERR; /* success must give a result */
    *had_error = d.n_errors > 0;
    if (st == GS_OK && want && !same_value(out, want))
        fail_msg("%s: a run with a failed allocation succeeded with another result", s->name);
    if (result && st == GS_OK) {
        *result = out;
        out = NULL;
    }
    gs_value_free(out);
    gs_value_free(bound);
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    gs_diags_free(&d);
    return st;
}

/* The walk: allocations 1..n fail in turn (every `stride`-th when n is large). Returns how many
 * runs failed an allocation. */
static long walk(const subject *s, long *n_allocs) {
    bool had_error;
    gs_value *want = NULL;
    arm(0);
    if (run_once(s, &had_error, &want, NULL) != GS_OK) return -1; /* not runnable here: skipped */
    long n = atomic_load(&n_calls);
    *n_allocs = n;
    long stride = n > 300 ? n / 300 : 1, failed_runs = 0, first = 1;
    const char *only = getenv("GSPMD_FAULT_CALL");
    if (only) first = n = atol(only), stride = 1;
    for (long k = first; k <= n; k += stride) {
        arm(k);
        gs_status st = run_once(s, &had_error, NULL, want);
        bool refused = atomic_load(&n_failed) > 0;
        arm(0);
        if (!refused) continue; /* a run on threads may allocate less than the clean run */
        failed_runs++;
        if (st == GS_OK) continue; /* the failing allocation had a fallback */
        if (!had_error) fail_msg("%s: allocation %ld of %ld failed: error status without a diagnostic",
                                 s->name, k, n);
    }
    gs_value_free(want);
    if (leaked()) fail_msg("%s: a run with a failed allocation leaked", s->name);
    return failed_runs;
}

/* ------------------------------------------------------------------ the walks */

/* The device count of a verified tests/partition file (`// STAGE: partition`, tests/check_hlo.py)
 * whose one ARGS line asks only for a device count (and maybe --propagate): 0 when it needs more
 * of the command line. */
static int plain_partition_line(const char *text, bool *propagate) {
    const char *p = strstr(text, "// ARGS:");
    if (!strstr(text, "// STAGE: partition\n") || !p || strstr(p + 1, "// ARGS:") ||
        strstr(text, "// ERROR") || !strstr(text, "// VERIFY"))
        return 0;
    p += strlen("// ARGS:");
    int n = 0;
    *propagate = false;
    while (*p && *p != '\n') {
        while (*p == ' ') p++;
        if (strncmp(p, "--num-partitions ", 17) == 0) {
            n = atoi(p + 17);
            p += 17;
            while (*p >= '0' && *p <= '9') p++;
        } else if (strncmp(p, "--propagate", 11) == 0) {
            *propagate = true;
            p += 11;
        } else if (*p && *p != '\n') {
            return 0;
        }
    }
    return n;
}

/* Makes the subject of file `name` (its text): the module, and when `partitioned` its program
 * for the ARGS line's device count. False when the file is not one to walk. */
static bool make_subject(const char *name, const char *text, bool partitioned, gs_source **src,
                         subject *s, gs_diags *d) {
    bool propagate = false;
    int n_devices = partitioned ? plain_partition_line(text, &propagate) : 0;
    if (partitioned && !n_devices) return false;
    *src = gs_source_from_string(name, text);
    s->name = name;
    s->n_devices = n_devices;
    if (!(s->m = gs_parse_module(*src, d)) || gs_module_verify(s->m, d) != GS_OK) return false;
    if (propagate) {
        gs_propagate_options po = {0};
        po.is_spmd = true;
        if (gs_propagate(s->m, &po, d) != GS_OK) return false;
    }
    if (partitioned) {
        gs_partition_options o = {0};
        o.num_partitions = n_devices;
        o.no_warnings = true;
        if (gs_partition(s->m, &o, &s->p, NULL, d) != GS_OK) return false;
    }
    return d->n_errors == 0;
}

/* Walks every runnable .hlo file of dir (tests/interp: the interpreter; tests/partition: the
 * partitioned program on threads); asserts that enough were walked. */
static void walk_dir(const char *dir, bool partitioned, int min_files) {
    int n_files;
    char **files = hlo_files(dir, &n_files);
    int walked = 0;
    long allocs = 0, runs = 0;
    for (int i = 0; i < n_files; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        char *text = skipped(files[i]) ? NULL : read_text(path);
        gs_diags d = {0};
        gs_source *src = NULL;
        subject s = {0};
        if (text && make_subject(files[i], text, partitioned, &src, &s, &d)) {
            long n = 0, r = walk(&s, &n);
            if (r >= 0) {
                walked++;
                allocs += n;
                runs += r;
            }
        }
        gs_module_free(s.p);
        gs_module_free(s.m);
        gs_source_free(src);
        gs_diags_free(&d);
        free(text);
        free(files[i]);
    }
    free(files);
    printf("%s: %d modules, %ld allocations, %ld runs with one failing\n",
           partitioned ? "partitioned programs" : "interpreter", walked, allocs, runs);
    if (getenv("GSPMD_FAULT_FILE")) return;
    assert_true(walked >= min_files);
    assert_true(runs >= 1000);
}

static void test_interpreter_walk(void **state) {
    (void)state;
    walk_dir(GSPMD_SOURCE_DIR "/tests/interp", false, 40);
}

static void test_runtime_walk(void **state) {
    (void)state;
    walk_dir(GSPMD_SOURCE_DIR "/tests/partition", true, 30);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interpreter_walk),
        cmocka_unit_test(test_runtime_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
