/*
 * test_args.c — a sharded run's arguments made per device (gs_arg_source, src/interp/args.c):
 * every device's part, drawn for that device alone, must equal bitwise the slice
 * (gs_value_shard) of the global argument gs_interp_make_sharded_args draws, for random
 * shapes, element types and shardings (uneven and empty dims, partial replication, unreduced
 * and manual subgroups, replicated, maximal and unreduced values), weights scaled by their
 * fan-in included. A property test: GSPMD_SEED picks the seed (printed), GSPMD_CASES the count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gspmd/interp.h"
#include "gspmd/npy.h"
#include "gspmd/numeric.h"
#include "gspmd/text.h"

static uint64_t rng_state;

static uint32_t rnd(uint32_t n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % n;
}

static const char *const TYPES[] = {"f32", "bf16", "f16", "f64", "c64", "s8",
                                    "u8",  "s32",  "pred", "u4", "f8e8m0fnu", "f8e4m3fn"};

/* A random sharding of a rank-r array for n devices, appended to *p. */
static void random_sharding(char **p, int r, int n) {
    int kind = (int)rnd(10);
    if (kind == 0) {
        *p += sprintf(*p, "{replicated}");
        return;
    }
    if (kind == 1) {
        *p += sprintf(*p, "{maximal device=%u}", rnd((uint32_t)n));
        return;
    }
    if (kind == 2) {
        *p += sprintf(*p, "{unreduced}");
        return;
    }
    if (kind == 3 && r > 0 && n > 1) { /* a manual subgroup: the value differs per group */
        int t = n % 2 == 0 ? 2 : 1;
        *p += sprintf(*p, "{devices=[");
        for (int i = 0; i < r; i++) *p += sprintf(*p, "%d,", i == 0 ? t : 1);
        *p += sprintf(*p, "%d]<=[%d] last_tile_dims={manual}}", n / t, n);
        return;
    }
    /* tiled: n's factors spread over the dims and maybe a replicated or unreduced subgroup */
    int tiles[8] = {1, 1, 1, 1, 1, 1, 1, 1}, rest = n;
    int sub = r == 0 || rnd(3) == 0 ? (int)rnd(2) + 1 : 0; /* 1 replicated, 2 unreduced */
    for (int f = 2; f <= rest; f++)
        while (rest % f == 0) {
            rest /= f;
            int at = (int)rnd((uint32_t)(r + (sub ? 1 : 0)));
            if (r == 0) at = 0;
            tiles[sub && (r == 0 || at == r) ? r : at] *= f;
        }
    if (r == 0) sub = sub ? sub : 1;
    *p += sprintf(*p, "{devices=[");
    for (int i = 0; i < r; i++) *p += sprintf(*p, "%d,", tiles[i]);
    if (sub) *p += sprintf(*p, "%d,", tiles[r]);
    (*p)[-1] = ']';
    if (rnd(2)) {
        *p += sprintf(*p, "<=[%d]", n);
    } else { /* an explicit device order: a random permutation */
        int perm[8];
        for (int i = 0; i < n; i++) perm[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = (int)rnd((uint32_t)i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int i = 0; i < n; i++) *p += sprintf(*p, "%s%d", i ? "," : "", perm[i]);
    }
    if (sub == 1) *p += sprintf(*p, " last_tile_dim_replicate");
    if (sub == 2) *p += sprintf(*p, " last_tile_dims={unreduced}");
    *p += sprintf(*p, "}");
}

/* A random shape: type and dims 0..6 (rank 0..4), appended to *p; its rank returned. */
static int random_shape(char **p, const char *type, int64_t *dims) {
    int r = (int)rnd(5);
    *p += sprintf(*p, "%s[", type);
    for (int i = 0; i < r; i++) {
        dims[i] = rnd(9) == 0 ? 0 : (int64_t)rnd(6) + 1;
        *p += sprintf(*p, "%s%lld", i ? "," : "", (long long)dims[i]);
    }
    *p += sprintf(*p, "]");
    return r;
}

/* A random module for n devices: parameters of random types, shapes and shardings; some
 * float matrices are also a dot's right operand (weights, scaled by their fan-in). */
static char *random_module(int n) {
    char *text = malloc(1 << 16), *p = text;
    int n_params = (int)rnd(5) + 1, next = 0;
    char body[1 << 15], *b = body, roots[4096], *rp = roots;
    roots[0] = 0;
    for (int k = 0; k < n_params; k++) {
        const char *type = TYPES[rnd(sizeof TYPES / sizeof *TYPES)];
        int64_t dims[8];
        char shape[128], *sp = shape;
        int r = random_shape(&sp, type, dims);
        b += sprintf(b, "  %%p%d = %s parameter(%d), sharding=", next, shape, next);
        random_sharding(&b, r, n);
        b += sprintf(b, "\n");
        rp += sprintf(rp, "%s%%p%d", rp == roots ? "" : ", ", next);
        int w = next++;
        bool floaty = strcmp(type, "f32") == 0 || strcmp(type, "bf16") == 0 ||
                      strcmp(type, "f16") == 0 || strcmp(type, "f64") == 0;
        if (floaty && r == 2 && rnd(2)) { /* x[3, K] . w[K, N] */
            b += sprintf(b, "  %%p%d = %s[3,%lld] parameter(%d), sharding={replicated}\n", next,
                         type, (long long)dims[0], next);
            b += sprintf(b, "  %%d%d = %s[3,%lld] dot(%%p%d, %%p%d), lhs_contracting_dims={1}, "
                            "rhs_contracting_dims={0}\n",
                         w, type, (long long)dims[1], next, w);
            rp += sprintf(rp, ", %%d%d", w);
            next++;
        }
    }
    p += sprintf(p, "HloModule args, num_partitions=%d\n\nENTRY %%main {\n%s  ROOT %%t = tuple(%s)\n}\n",
                 n, body, roots);
    return text;
}

static bool same_value(const gs_value *a, const gs_value *b) {
    if (a->type != b->type || a->rank != b->rank || a->n != b->n) return false;
    if (a->type == GS_TUPLE) {
        if (a->n_tuple != b->n_tuple) return false;
        for (int i = 0; i < a->n_tuple; i++)
            if (!same_value(a->tuple[i], b->tuple[i])) return false;
        return true;
    }
    if (a->type == GS_TOKEN) return true;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return memcmp(a->data, b->data, gs_value_bytes(a)) == 0;
}

/* Every device's part of every argument of m: drawn (gs_arg_source) == sliced (global). */
static void check_module(const char *text, int n, uint64_t seed, const gs_interp_inputs *in) {
    gs_diags d = {0};
    gs_source *src = gs_source_from_string("args.hlo", text);
    gs_module *m = gs_parse_module(src, &d);
    if (!m || gs_module_verify(m, &d) != GS_OK) {
        gs_diags_render(&d, stderr);
        fprintf(stderr, "%s", text);
        fail();
    }
    gs_value **args = NULL;
    int n_args = 0;
    gs_arg_source *as = NULL;
    assert_int_equal(gs_interp_make_sharded_args(m, in, seed, n, &args, &n_args, &d), GS_OK);
    assert_int_equal(gs_arg_source_new(m, in, seed, n, &as, &d), GS_OK);
    assert_int_equal(gs_arg_source_count(as), n_args);
    for (int i = 0; i < n_args; i++) {
        const gs_sharding *s = gs_instr_get_sharding(m->entry->params[i]);
        for (int dev = 0; dev < n; dev++) {
            gs_value *want = NULL, *got = NULL;
            gs_status a = gs_value_shard(args[i], s, dev, &want, &d);
            gs_status b = gs_arg_source_part(as, i, s, dev, &got, &d);
            if (a != GS_OK || b != GS_OK || !same_value(want, got)) {
                gs_diags_render(&d, stderr);
                fprintf(stderr, "parameter %d, device %d of %d differs (seed %llu):\n%s", i, dev,
                        n, (unsigned long long)seed, text);
                fail();
            }
            gs_value_free(want);
            gs_value_free(got);
        }
    }
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    gs_arg_source_free(as);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

static void random_modules(void **state) {
    (void)state;
    const char *env = getenv("GSPMD_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : 1;
    const char *cases_env = getenv("GSPMD_CASES");
    int cases = cases_env ? atoi(cases_env) : 400;
    printf("test_args: seed %llu, %d cases (GSPMD_SEED, GSPMD_CASES)\n", (unsigned long long)seed,
           cases);
    rng_state = seed;
    for (int c = 0; c < cases; c++) {
        static const int NS[] = {1, 2, 3, 4, 6, 8};
        int n = NS[rnd(6)];
        char *text = random_module(n);
        check_module(text, n, rng_state >> 40, NULL);
        free(text);
    }
}

/* A file of the given type and dims with values 0.5 * i, written to a new temporary path. */
static void write_npy(char *path, gs_type t, int rank, const int64_t *dims) {
    gs_value *v = gs_value_new_array(t, rank, dims);
    for (int64_t i = 0; i < v->n; i++) gs_elem_set_f(v->data, t, i, 0.5 * (double)i - 3);
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
    gs_diags d = {0};
    assert_int_equal(gs_npy_write(path, v, &d), GS_OK);
    gs_value_free(v);
}

/* Parameters read from .npy, each device reading only its box of the file: equal to slicing
 * the file's whole value, for uneven and 2-D tilings, partial replication and a bf16 parameter
 * read from a float32 file (rounded as the whole read rounds it). */
static void npy_parts_read_per_device(void **state) {
    (void)state;
    const char *text =
        "HloModule a, num_partitions=4\n\nENTRY %main {\n"
        "  %a = f32[5,3,7] parameter(0), sharding={devices=[2,1,2]<=[4]}\n"
        "  %b = bf16[9,2] parameter(1), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
        "  %c = f32[6] parameter(2), sharding={devices=[4]3,1,0,2}\n"
        "  %e = f32[4,4] parameter(3), sharding={replicated}\n"
        "  ROOT %t = tuple(%a, %b, %c, %e)\n}\n";
    char pa[] = "/tmp/test_args_a_XXXXXX.npy", pb[] = "/tmp/test_args_b_XXXXXX.npy",
         pc[] = "/tmp/test_args_c_XXXXXX.npy", pe[] = "/tmp/test_args_e_XXXXXX.npy";
    write_npy(pa, GS_F32, 3, (int64_t[]){5, 3, 7});
    write_npy(pb, GS_F32, 2, (int64_t[]){9, 2});
    write_npy(pc, GS_F32, 1, (int64_t[]){6});
    write_npy(pe, GS_F32, 2, (int64_t[]){4, 4});
    gs_interp_inputs in = {0};
    assert_int_equal(gs_interp_inputs_add(&in, "a", 1, pa), GS_OK);
    assert_int_equal(gs_interp_inputs_add(&in, "b", 1, pb), GS_OK);
    assert_int_equal(gs_interp_inputs_add(&in, "c", 1, pc), GS_OK);
    assert_int_equal(gs_interp_inputs_add(&in, "e", 1, pe), GS_OK);
    check_module(text, 4, 3, &in);
    gs_interp_inputs_free(&in);
    remove(pa);
    remove(pb);
    remove(pc);
    remove(pe);
}

/* A file that does not match its parameter: the error names both shapes, before any run. */
static void npy_wrong_shape(void **state) {
    (void)state;
    const char *text = "HloModule a, num_partitions=2\n\nENTRY %main {\n"
                       "  ROOT %x = f32[4,3] parameter(0), sharding={devices=[2,1]<=[2]}\n}\n";
    char path[] = "/tmp/test_args_w_XXXXXX.npy";
    write_npy(path, GS_F32, 2, (int64_t[]){3, 4});
    gs_diags d = {0};
    gs_source *src = gs_source_from_string("a.hlo", text);
    gs_module *m = gs_parse_module(src, &d);
    gs_interp_inputs in = {0};
    assert_int_equal(gs_interp_inputs_add(&in, "x", 1, path), GS_OK);
    gs_arg_source *as = NULL;
    assert_int_equal(gs_arg_source_new(m, &in, 0, 2, &as, &d), GS_ERR);
    assert_null(as);
    assert_non_null(strstr(d.items[0].message, "holds f32[3,4], but the parameter is f32[4,3]"));
    gs_interp_inputs_free(&in);
    gs_module_free(m);
    gs_source_free(src);
    gs_diags_free(&d);
    remove(path);
}

/* A parameter from .npy is sliced from the file's value; the others drawn. */
static void npy_input_sliced(void **state) {
    (void)state;
    const char *text = "HloModule a, num_partitions=2\n\nENTRY %main {\n"
                       "  %x = f32[4,3] parameter(0), sharding={devices=[2,1]<=[2]}\n"
                       "  %y = f32[5] parameter(1), sharding={devices=[2]<=[2]}\n"
                       "  ROOT %t = tuple(%x, %y)\n}\n";
    int64_t dims[2] = {4, 3};
    gs_value *v = gs_value_new_array(GS_F32, 2, dims);
    for (int i = 0; i < 12; i++) ((float *)v->data)[i] = (float)i;
    gs_diags d = {0};
    char path[] = "/tmp/test_args_XXXXXX.npy";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(gs_npy_write(path, v, &d), GS_OK);
    gs_interp_inputs in = {0};
    assert_int_equal(gs_interp_inputs_add(&in, "x", 1, path), GS_OK);
    check_module(text, 2, 7, &in);
    /* device 1's rows of x are rows 2 and 3 of the file */
    gs_source *src = gs_source_from_string("a.hlo", text);
    gs_module *m = gs_parse_module(src, &d);
    assert_non_null(m);
    gs_arg_source *as = NULL;
    assert_int_equal(gs_arg_source_new(m, &in, 7, 2, &as, &d), GS_OK);
    gs_value *part = NULL;
    assert_int_equal(gs_arg_source_part(as, 0, gs_instr_get_sharding(m->entry->params[0]), 1,
                                        &part, &d),
                     GS_OK);
    assert_int_equal(part->dims[0], 2);
    assert_true(((float *)part->data)[0] == 6.0f && ((float *)part->data)[5] == 11.0f);
    gs_value_free(part);
    gs_arg_source_free(as);
    gs_interp_inputs_free(&in);
    gs_module_free(m);
    gs_source_free(src);
    gs_value_free(v);
    gs_diags_free(&d);
    remove(path);
}

/* The stream itself, pinned: splitmix64's first draws from seed 5, computed by hand (Python):
 * 2 * (draw >> 11) / 2^53 - 1, rounded to f32. Runs, saved outputs and tests depend on it. */
static void stream_pinned(void **state) {
    (void)state;
    gs_shape s = {0};
    int64_t dims[1] = {3};
    s.type = GS_F32;
    s.rank = 1;
    s.dims = dims;
    gs_value *v = gs_random_value(&s, 5);
    const float want[3] = {-0.2264639139175415f, 0.5046140551567078f, -0.5345816612243652f};
    assert_memory_equal(v->data, want, sizeof want);
    gs_value_free(v);
}

/* Inputs naming no parameter: the error gs_interp_make_args gives. */
static void unknown_input(void **state) {
    (void)state;
    const char *text = "HloModule a\n\nENTRY %main {\n  ROOT %x = f32[2] parameter(0)\n}\n";
    gs_diags d = {0};
    gs_source *src = gs_source_from_string("a.hlo", text);
    gs_module *m = gs_parse_module(src, &d);
    gs_interp_inputs in = {0};
    assert_int_equal(gs_interp_inputs_add(&in, "nope", 4, "/nonexistent.npy"), GS_OK);
    gs_arg_source *as = NULL;
    assert_int_equal(gs_arg_source_new(m, &in, 0, 1, &as, &d), GS_ERR);
    assert_null(as);
    assert_non_null(strstr(d.items[0].message, "no parameter named 'nope'"));
    gs_interp_inputs_free(&in);
    gs_module_free(m);
    gs_source_free(src);
    gs_diags_free(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_modules),
        cmocka_unit_test(npy_input_sliced),
        cmocka_unit_test(npy_parts_read_per_device),
        cmocka_unit_test(npy_wrong_shape),
        cmocka_unit_test(stream_pinned),
        cmocka_unit_test(unknown_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
