/*
 * test_sharding_prop.c — property tests against slow, obviously-correct references. Random
 * shardings (iota, transposed iota and explicit device orders, dense and sparse ids, partial
 * replication and subgroups, uneven and tiny dims) are written as XLA text and parsed; a
 * reference materialises the device array straight from the text (arange, reshape, transpose by
 * index arithmetic) and computes every device's tile, offset, padded size and valid extent by
 * brute force, which the layout JSON (what `show-sharding --json` prints) must match. Also:
 * printing is a fixed point, the explicit spelling of the same array compares equal, replication
 * groups come out sorted, and tile transposes and device groups match brute force.
 *
 * GSPMD_SHARDING_SEED=N picks the seed (default below), GSPMD_SHARDING_ITERS=N the number of
 * cases; a failure prints the seed, the case number and the sharding text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "gspmd/sharding.h"

enum { MAXD = 8, MAXN = 512 };

static uint64_t g_seed;
static uint64_t rng_state;

static uint64_t next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

static int64_t rnd(int64_t n) { return (int64_t)(next() % (uint64_t)n); }

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "property failed (seed %llu, case %d): %s\n  sharding %s\n  ",         \
                    (unsigned long long)g_seed, iter, #cond, text);                                \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

/* The array arange(prod r) reshaped to r (nr dims), transposed by p, flattened. Index by index,
 * the obvious way. */
static void ref_iota(const int64_t *r, const int *p, int nr, int64_t *out) {
    int64_t n = 1, st[MAXD], tdim[MAXD], idx[MAXD] = {0};
    for (int i = 0; i < nr; i++) n *= r[i];
    for (int i = nr - 1, s = 1; i >= 0; i--) {
        st[i] = s;
        s *= (int)r[i];
    }
    for (int i = 0; i < nr; i++) tdim[i] = r[p[i]];
    for (int64_t pos = 0; pos < n; pos++) {
        int64_t v = 0;
        for (int k = 0; k < nr; k++) v += idx[k] * st[p[k]];
        out[pos] = v;
        for (int k = nr - 1; k >= 0; k--) {
            if (++idx[k] < tdim[k]) break;
            idx[k] = 0;
        }
    }
}

/* Unravels pos over dims (rank k). */
static void unravel(int64_t pos, const int64_t *dims, int k, int64_t *idx) {
    for (int i = k - 1; i >= 0; i--) {
        idx[i] = pos % dims[i];
        pos /= dims[i];
    }
}

/* A random factorisation of n into 1..4 factors (order random). */
static int factorise(int64_t n, int64_t *f) {
    int k = 0;
    int64_t rest = n;
    int want = 1 + (int)rnd(4);
    while (k < want - 1 && rest > 1) {
        int64_t divs[64];
        int nd = 0;
        for (int64_t d = 2; d <= rest && nd < 64; d++)
            if (rest % d == 0) divs[nd++] = d;
        if (!nd) break;
        f[k] = divs[rnd(nd)];
        rest /= f[k++];
    }
    f[k++] = rest;
    return k;
}

static void shuffle(int64_t *v, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = rnd(i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

static int64_t jget(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -999;
}

static int64_t jat(const cJSON *o, const char *k, int i) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k);
    const cJSON *v = cJSON_GetArrayItem(a, i);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -999;
}

static void test_random_layouts(void **state) {
    (void)state;
    const char *env = getenv("GSPMD_SHARDING_SEED");
    g_seed = env ? strtoull(env, NULL, 10) : 20260101ULL;
    const char *it = getenv("GSPMD_SHARDING_ITERS");
    int iters = it ? atoi(it) : 3000;
    rng_state = g_seed * 0x9E3779B97F4A7C15ULL + 1;
    fprintf(stderr, "property test: seed %llu, %d cases\n", (unsigned long long)g_seed, iters);
    for (int iter = 0; iter < iters; iter++) {
        char text[8192] = "";
        /* Data dims, subgroup dims. */
        int r = (int)rnd(5);
        int64_t tdims[MAXD], shape[MAXD];
        int64_t n = 1;
        for (int i = 0; i < r; i++) {
            static const int64_t choice[] = {1, 1, 2, 2, 3, 4};
            tdims[i] = choice[rnd(6)];
            shape[i] = rnd(5) == 0 ? rnd(3) : 1 + rnd(12);
            n *= tdims[i];
        }
        int mode = (int)rnd(3), n_sub = 0;
        const char *types[3];
        static const char *const kinds[] = {"manual", "replicated", "unreduced"};
        if (mode == 1) {
            n_sub = 1;
            types[0] = "replicated";
        } else if (mode == 2) {
            n_sub = 1 + (int)rnd(2);
            for (int i = 0; i < n_sub; i++) types[i] = kinds[rnd(3)];
        }
        if (r == 0 && n_sub == 0) {
            n_sub = 1;
            types[0] = "replicated";
            mode = 1;
        }
        int k = r + n_sub;
        for (int i = r; i < k; i++) {
            tdims[i] = 1 + rnd(3);
            n *= tdims[i];
        }
        if (n > MAXN) continue;
        /* Device order. */
        int64_t arr[MAXN];
        int order = (int)rnd(5);
        char dev_text[4096];
        int pos = 0;
        if (order <= 1) {
            int64_t rd[MAXD];
            int p[MAXD];
            int nr = order == 0 ? 1 : factorise(n, rd);
            if (order == 0) rd[0] = n;
            for (int i = 0; i < nr; i++) p[i] = i;
            for (int i = nr - 1; i > 0; i--) {
                int j = (int)rnd(i + 1), t = p[i];
                p[i] = p[j];
                p[j] = t;
            }
            ref_iota(rd, p, nr, arr);
            pos += snprintf(dev_text + pos, sizeof dev_text - pos, "<=[");
            for (int i = 0; i < nr; i++)
                pos += snprintf(dev_text + pos, sizeof dev_text - pos, "%s%lld", i ? "," : "",
                                (long long)rd[i]);
            pos += snprintf(dev_text + pos, sizeof dev_text - pos, "]");
            if (nr > 1 || rnd(2)) {
                pos += snprintf(dev_text + pos, sizeof dev_text - pos, "T(");
                for (int i = 0; i < nr; i++)
                    pos +=
                        snprintf(dev_text + pos, sizeof dev_text - pos, "%s%d", i ? "," : "", p[i]);
                pos += snprintf(dev_text + pos, sizeof dev_text - pos, ")");
            }
        } else {
            if (order == 2) {
                for (int64_t i = 0; i < n; i++) arr[i] = i;
                shuffle(arr, n);
            } else if (order == 3) {
                int64_t rd[MAXD];
                int p[MAXD];
                int nr = factorise(n, rd);
                for (int i = 0; i < nr; i++) p[i] = nr - 1 - i;
                ref_iota(rd, p, nr, arr);
            } else {
                /* Sparse ids: a random subset of 0..3n-1 in random order. */
                int64_t pool[3 * MAXN];
                for (int64_t i = 0; i < 3 * n; i++) pool[i] = i;
                shuffle(pool, 3 * n);
                memcpy(arr, pool, sizeof arr[0] * (size_t)n);
            }
            for (int64_t i = 0; i < n; i++)
                pos += snprintf(dev_text + pos, sizeof dev_text - pos, "%s%lld", i ? "," : "",
                                (long long)arr[i]);
        }
        /* The text. */
        int tp = snprintf(text, sizeof text, "{devices=[");
        for (int i = 0; i < k; i++)
            tp +=
                snprintf(text + tp, sizeof text - tp, "%s%lld", i ? "," : "", (long long)tdims[i]);
        tp += snprintf(text + tp, sizeof text - tp, "]%s", dev_text);
        char suffix[128] = "";
        if (mode == 1) {
            snprintf(suffix, sizeof suffix, " last_tile_dim_replicate");
        } else if (mode == 2) {
            int sp = snprintf(suffix, sizeof suffix, " last_tile_dims={");
            for (int i = 0; i < n_sub; i++)
                sp += snprintf(suffix + sp, sizeof suffix - sp, "%s%s", i ? ", " : "", types[i]);
            snprintf(suffix + sp, sizeof suffix - sp, "}");
        }
        snprintf(text + tp, sizeof text - tp, "%s}", suffix);

        gs_arena a;
        gs_arena_init(&a);
        gs_diags d = {0};
        gs_sharding *s = NULL;
        gs_status st = gs_sharding_parse(&a, text, strlen(text), &s, &d, gs_span_none());
        CHECK(st == GS_OK, "parse failed: %s", d.n ? d.items[0].message : "?");
        gs_diags_free(&d);

        /* Printing is a fixed point; the explicit spelling is the same value. */
        char *printed = gs_sharding_to_string(&a, s);
        gs_sharding *again = NULL;
        CHECK(gs_sharding_parse(&a, printed, strlen(printed), &again, NULL, gs_span_none()) ==
                  GS_OK,
              "reparse of %s", printed);
        CHECK(gs_sharding_equal(s, again) && strcmp(printed, gs_sharding_to_string(&a, again)) == 0,
              "print is not a fixed point: %s", printed);
        char explicit_text[8192];
        int ep = snprintf(explicit_text, sizeof explicit_text, "{devices=[");
        for (int i = 0; i < k; i++)
            ep += snprintf(explicit_text + ep, sizeof explicit_text - ep, "%s%lld", i ? "," : "",
                           (long long)tdims[i]);
        ep += snprintf(explicit_text + ep, sizeof explicit_text - ep, "]");
        for (int64_t i = 0; i < n; i++)
            ep += snprintf(explicit_text + ep, sizeof explicit_text - ep, "%s%lld", i ? "," : "",
                           (long long)arr[i]);
        snprintf(explicit_text + ep, sizeof explicit_text - ep, "%s}", suffix);
        gs_sharding *ex = NULL;
        CHECK(gs_sharding_parse(&a, explicit_text, strlen(explicit_text), &ex, NULL,
                                gs_span_none()) == GS_OK,
              "explicit spelling %s", explicit_text);
        CHECK(gs_sharding_equal(s, ex) && gs_sharding_hash(s) == gs_sharding_hash(ex),
              "explicit spelling %s differs: %s vs %s", explicit_text, printed,
              gs_sharding_to_string(&a, ex));

        /* Layout JSON against brute force. */
        char *js = gs_sharding_layout_json(s, "f32[...]", r, shape, n);
        cJSON *root = cJSON_Parse(js);
        CHECK(root != NULL, "bad json %s", js);
        const cJSON *devs = cJSON_GetObjectItemCaseSensitive(root, "devices");
        if (s->kind == GS_SHARDING_TILED) {
            CHECK(s->data_rank == r, "data rank %d", s->data_rank);
            CHECK(jget(root, "num_devices") == n, "num_devices %lld",
                  (long long)jget(root, "num_devices"));
            CHECK(cJSON_GetArraySize(devs) == n, "%d entries", cJSON_GetArraySize(devs));
            /* Reference: every position of the array as written. */
            int64_t sorted_dev[MAXN], ref_pos[MAXN];
            for (int64_t i = 0; i < n; i++) sorted_dev[i] = arr[i];
            for (int64_t i = 1; i < n; i++)
                for (int64_t j = i; j > 0 && sorted_dev[j - 1] > sorted_dev[j]; j--) {
                    int64_t t = sorted_dev[j];
                    sorted_dev[j] = sorted_dev[j - 1];
                    sorted_dev[j - 1] = t;
                }
            for (int64_t i = 0; i < n; i++)
                for (int64_t p = 0; p < n; p++)
                    if (arr[p] == sorted_dev[i]) ref_pos[i] = p;
            for (int64_t i = 0; i < n; i++) {
                const cJSON *e = cJSON_GetArrayItem(devs, (int)i);
                CHECK(jget(e, "device") == sorted_dev[i], "entry %lld is device %lld, want %lld",
                      (long long)i, (long long)jget(e, "device"), (long long)sorted_dev[i]);
                int64_t idx[MAXD];
                unravel(ref_pos[i], tdims, k, idx);
                for (int dd = 0; dd < r; dd++) {
                    int64_t size = (shape[dd] + tdims[dd] - 1) / tdims[dd];
                    int64_t lo = idx[dd] * size, hi = lo + size;
                    if (lo > shape[dd]) lo = shape[dd];
                    if (hi > shape[dd]) hi = shape[dd];
                    CHECK(jat(e, "tile", dd) == idx[dd], "device %lld dim %d tile %lld want %lld",
                          (long long)sorted_dev[i], dd, (long long)jat(e, "tile", dd),
                          (long long)idx[dd]);
                    CHECK(jat(e, "offset", dd) == lo, "device %lld dim %d offset %lld want %lld",
                          (long long)sorted_dev[i], dd, (long long)jat(e, "offset", dd),
                          (long long)lo);
                    CHECK(jat(e, "shard_shape", dd) == size, "device %lld dim %d size",
                          (long long)sorted_dev[i], dd);
                    CHECK(jat(e, "valid", dd) == hi - lo,
                          "device %lld dim %d valid %lld want "
                          "%lld",
                          (long long)sorted_dev[i], dd, (long long)jat(e, "valid", dd),
                          (long long)(hi - lo));
                }
            }
            /* Replication groups are sorted. */
            int rd = gs_sharding_replication_dim(s);
            if (rd == s->tiles.rank - 1) {
                int64_t g = s->tiles.dims[rd];
                for (int64_t p = 0; p < n; p++)
                    if (p % g)
                        CHECK(gs_tile_device_at(&s->tiles, p - 1) < gs_tile_device_at(&s->tiles, p),
                              "group at %lld not sorted", (long long)p);
            }
            /* Tile transpose against brute force. */
            int perm[MAXD];
            int64_t before[MAXN];
            for (int i = 0; i < s->tiles.rank; i++) perm[i] = i;
            for (int i = s->tiles.rank - 1; i > 0; i--) {
                int j = (int)rnd(i + 1), t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            gs_tile_assignment tt;
            CHECK(gs_tile_transpose(&a, &s->tiles, perm, &tt) == GS_OK, "transpose");
            gs_tile_materialize(&s->tiles, before);
            int64_t nd[MAXD], oidx[MAXD], tidx[MAXD];
            for (int i = 0; i < s->tiles.rank; i++) nd[i] = s->tiles.dims[perm[i]];
            for (int64_t p = 0; p < n; p++) {
                unravel(p, nd, s->tiles.rank, tidx);
                for (int i = 0; i < s->tiles.rank; i++) oidx[perm[i]] = tidx[i];
                int64_t op = 0;
                for (int i = 0; i < s->tiles.rank; i++) op = op * s->tiles.dims[i] + oidx[i];
                CHECK(gs_tile_device_at(&tt, p) == before[op], "transpose at %lld", (long long)p);
            }
            /* Device groups along a random subset of tile dims. */
            int along[MAXD], na = 0;
            bool in[MAXD] = {0};
            for (int i = 0; i < s->tiles.rank; i++)
                if (rnd(2)) {
                    along[na++] = perm[i];
                    in[perm[i]] = true;
                }
            gs_replica_groups *grp;
            CHECK(gs_sharding_groups_along(&a, s, na, along, &grp) == GS_OK, "groups");
            int64_t gsize = 1;
            for (int i = 0; i < na; i++) gsize *= s->tiles.dims[along[i]];
            CHECK(gs_replica_groups_size(grp, 0) == gsize, "group size");
            for (int64_t p = 0; p < n; p++) {
                unravel(p, s->tiles.dims, s->tiles.rank, oidx);
                int64_t group = 0, member = 0;
                for (int i = 0; i < s->tiles.rank; i++)
                    if (!in[i]) group = group * s->tiles.dims[i] + oidx[i];
                for (int i = 0; i < na; i++)
                    member = member * s->tiles.dims[along[i]] + oidx[along[i]];
                CHECK(gs_replica_groups_device(grp, (int)group, (int)member) == before[p],
                      "group %lld member %lld", (long long)group, (long long)member);
            }
        } else {
            /* Canonicalised to a whole-array kind: every device holds everything. */
            CHECK(s->kind == GS_SHARDING_REPLICATED || s->kind == GS_SHARDING_MANUAL ||
                      s->kind == GS_SHARDING_UNREDUCED,
                  "kind %d", s->kind);
            int nd_ = cJSON_GetArraySize(devs);
            CHECK(nd_ == n, "%d entries", nd_);
            for (int i = 0; i < nd_; i++) {
                const cJSON *e = cJSON_GetArrayItem(devs, i);
                for (int dd = 0; dd < r; dd++)
                    CHECK(jat(e, "offset", dd) == 0 && jat(e, "valid", dd) == shape[dd] &&
                              jat(e, "shard_shape", dd) == shape[dd],
                          "whole-array entry %d", i);
            }
        }
        cJSON_Delete(root);
        free(js);
        gs_arena_free(&a);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
