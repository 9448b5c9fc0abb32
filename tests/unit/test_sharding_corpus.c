/*
 * test_sharding_corpus.c — every sharding string of the XLA corpus parses, prints back equal,
 * and compares equal to its other spellings. A representative set of strings taken from
 * ../shared/conformance/xla (module texts and expected shardings) and ../shared/real is embedded
 * here so the core check never depends on that folder; when the folder exists, every
 * `sharding={...}` of every module.hlo, every expected sharding of every case.json, and every
 * sharding of the real dumps is checked too (skipped with a message when it is absent).
 *
 * The checks per string: it parses; printing is a fixed point (print, parse, print gives the same
 * text, the same value, the same hash); the explicit device-list spelling of each tiled leaf
 * (materialised from the parsed assignment) compares equal to it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gspmd/sharding.h"

static const char *const EMBEDDED[] = {
    "{ devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}",
    "{devices=[1,1,2,2]0,1,2,3 last_tile_dims={replicated, manual} metadata={op_name=\"b\"}}",
    "{devices=[1,1,2,2]0,2,1,3 last_tile_dim_replicate metadata={op_name=\"b\"}}",
    "{devices=[1,1,2,2]<=[4] last_tile_dim_replicate}",
    "{devices=[1,2,2,1]0,1,4,5 metadata={op_name=\"a\"}}",
    "{devices=[1,2,2,2,1]0,1,2,3,4,5,6,7}",
    "{devices=[1,2,2]0,1,2,3 last_tile_dims={manual} metadata={op_name=\"a\"}}",
    "{devices=[1,2,2]0,1,2,3 last_tile_dims={manual}}",
    "{devices=[1,2,2]1,0,3,2 last_tile_dim_replicate}",
    "{devices=[1,32,1,2,1,2]<=[2,64]T(1,0) last_tile_dim_replicate}",
    "{devices=[1,8,1,1]<=[8]}",
    "{devices=[1,8,1]0,1,4,5,2,3,6,7}",
    "{devices=[2,1,1,1]<=[2]}",
    "{devices=[2,1,1,8]0,2,4,6,8,10,12,14,1,3,5,7,9,11,13,15 last_tile_dim_replicate}",
    "{devices=[2,1,2,1]0,1,4,5 }",
    "{devices=[2,1,2]0,1,2,3 last_tile_dims={manual}}",
    "{devices=[2,1,2]3,2,1,0 last_tile_dim_replicate}",
    "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dims={manual}}",
    "{devices=[2,1,2]<=[2,2]T(1,0)}",
    "{devices=[2,1,8]<=[2,2,4]T(1,2,0) last_tile_dim_replicate}",
    "{devices=[2,1]1,2}",
    "{devices=[2,2,2,2]<=[16] metadata={op_name=\"lhs_sharding\"}}",
    "{devices=[2,2,2,2]<=[2,2,2,2]T(0,1,3,2) last_tile_dim_replicate}",
    "{devices=[2,2,2,2]<=[2,2,2,2]T(0,2,1,3) last_tile_dims={unreduced,replicated}}",
    "{devices=[2,2,2]<=[8] metadata={op_name=\"a\"}}",
    "{devices=[2,2]0,1,2,3 last_tile_dim_replicate metadata={op_name=\"a\"}}",
    "{devices=[2,2]1,2,3,0 last_tile_dim_replicate}",
    "{devices=[2,2]3,1,2,0}",
    "{devices=[2,2]<=[4] last_tile_dims={manual}}",
    "{devices=[2,2]<=[4] last_tile_dims={replicated,manual}}",
    "{devices=[2,4,2]<=[2,4,2]T(2,1,0) last_tile_dim_replicate}",
    "{devices=[4,1,1,4,2,1,1]<=[8,2,2]T(1,2,0)}",
    "{devices=[4,1,4]<=[2,2,4]T(2,1,0) last_tile_dim_replicate}",
    "{devices=[4,2,1,1]0,1,2,3,4,5,6,7 metadata={op_name=\"a\"}}",
    "{devices=[4,4]<=[16] last_tile_dim_replicate}",
    "{devices=[64,1,1,1,2]<=[2,64]T(1,0) last_tile_dim_replicate}",
    "{devices=[8,2,1]<=[2,4,2]T(2,1,0)}",
    "{manual metadata={op_name=\"a\"}}",
    "{manual metadata={op_name=\"b\"}}",
    "{manual}",
    "{maximal device=0 metadata={op_name=\"a\"}}",
    "{maximal device=0 metadata={op_name=\"b\"}}",
    "{maximal device=0}",
    "{mesh['x'=2,'y'=2,'z'=2] [{'x'}, {}, {'y'}, {}, {'z'}]}",
    "{mesh['x'=2,'y'=2,'z'=2] [{}, {}, {'x'}, {'y'}, {'z'}]}",
    "{mesh['x'=2,'y'=2] [{'x'}, {}], replicated={'y'}}",
    "{mesh['x'=4] [{'x':(1)2}, {'x':(2)2}]}",
    "{mesh['x'=8] [{'x':(1)2, 'x':(4)2}, {}]}",
    "{replicated metadata={op_name=\"rhs_sharding\"}}",
    "{unknown shard_as 0}",
    "{unknown shard_like 0}",
    "{unreduced}",
    "{{devices=[1,2,2]<=[4] last_tile_dim_replicate}, "
    "{devices=[1,2,2]<=[4] last_tile_dim_replicate}}",
    "{{devices=[1,2,2]<=[4] last_tile_dims={replicated,manual}}, "
    "{devices=[1,2,2]<=[4] last_tile_dims={replicated,manual}}}",
    "{{devices=[1,4] 0,1,2,3}, {devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}}",
    "{{devices=[1,4]0,1,2,3 metadata={op_name=\"d\"}}, "
    "{devices=[1,2,2]0,1,2,3 last_tile_dim_replicate metadata={op_name=\"e\"}}}",
    "{{devices=[1,4]0,1,2,3}, {replicated}}",
    "{{devices=[2,1,2]<=[4] last_tile_dim_replicate}, "
    "{devices=[2,1,2]<=[4] last_tile_dim_replicate}}",
    "{{devices=[2,1]0,1 metadata={op_name=\"a\"}}, {devices=[2,1]0,1 metadata={op_name=\"b\"}}}",
    "{{devices=[2,1]0,1}, {maximal device=0}}",
    "{{devices=[2,1]<=[2]}, {devices=[2,1]<=[2]}}",
    "{{devices=[2,1]<=[2]}, {maximal device=0}}",
    "{{devices=[2,1]<=[2]},{devices=[2,1]<=[2]}}",
    "{{devices=[2,1]<=[2]},{manual}}",
    "{{devices=[2,2,1,1]<=[4]}, {maximal device=0}}",
    "{{devices=[2,2,2,1]<=[8]}, {devices=[1,2,2,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}}",
    "{{devices=[2,2]0,1,2,3 last_tile_dim_replicate},"
    "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}}",
    "{{devices=[4]0,1,2,3}, {replicated}}",
    "{{devices=[8,1,1,1]0,1,4,5,2,3,6,7 metadata={op_name=\"a\"}}, "
    "{devices=[4,1,1,1,2]0,1,4,5,2,3,6,7 last_tile_dim_replicate metadata={op_name=\"b\"}}}",
    "{{manual metadata={op_name=\"c\"}}, {manual metadata={op_name=\"d\"}}}",
    "{{manual}, {devices=[1,2]0,1}}",
    "{{manual}, {manual}}",
    "{{manual}, {maximal device=0}}",
    "{{maximal device=0}, {maximal device=1}, {maximal device=0}}",
    "{{maximal device=1 metadata={op_name=\"a\"}}, {maximal device=1}, {maximal device=1}}",
    "{{replicated metadata={op_name=\"a\"}}, {devices=[2]0,1 metadata={op_name=\"b\"}}}",
};

/* The explicit spelling of a tiled leaf: devices=[dims]d0,d1,... plus its subgroup suffix. */
static void explicit_spelling(gs_sb *sb, const gs_sharding *s) {
    gs_sb_puts(sb, "{devices=[");
    for (int i = 0; i < s->tiles.rank; i++)
        gs_sb_printf(sb, "%s%lld", i ? "," : "", (long long)s->tiles.dims[i]);
    gs_sb_putc(sb, ']');
    for (int64_t p = 0; p < s->tiles.n; p++)
        gs_sb_printf(sb, "%s%lld", p ? "," : "", (long long)gs_tile_device_at(&s->tiles, p));
    static const char *const names[] = {"manual", "unreduced", "replicated"};
    if (s->n_subgroups) {
        gs_sb_puts(sb, " last_tile_dims={");
        for (int i = 0; i < s->n_subgroups; i++)
            gs_sb_printf(sb, "%s%s", i ? ", " : "", names[s->subgroups[i]]);
        gs_sb_putc(sb, '}');
    }
    gs_sb_putc(sb, '}');
}

/* Checks one string; returns false (after printing why) on failure. */
static bool check_one(const char *text, size_t len, const char *where) {
    gs_arena a;
    gs_arena_init(&a);
    gs_diags d = {0};
    gs_sharding *s = NULL, *t = NULL;
    bool ok = gs_sharding_parse(&a, text, len, &s, &d, gs_span_none()) == GS_OK;
    if (!ok) {
        fprintf(stderr, "%s: %.*s: %s\n", where, (int)len, text, d.n ? d.items[0].message : "");
    } else {
        const char *p1 = gs_sharding_to_string(&a, s);
        ok = gs_sharding_parse(&a, p1, strlen(p1), &t, &d, gs_span_none()) == GS_OK &&
             gs_sharding_equal(s, t) && gs_sharding_hash(s) == gs_sharding_hash(t) &&
             strcmp(p1, gs_sharding_to_string(&a, t)) == 0;
        if (!ok)
            fprintf(stderr, "%s: %.*s: printing is not a fixed point (%s)\n", where, (int)len, text,
                    p1);
        int n = s->kind == GS_SHARDING_TUPLE ? s->n_tuple : 1;
        for (int i = 0; ok && i < n; i++) {
            const gs_sharding *leaf = s->kind == GS_SHARDING_TUPLE ? s->tuple[i] : s;
            if (leaf->kind != GS_SHARDING_TILED) continue;
            gs_sb sb = {0};
            explicit_spelling(&sb, leaf);
            gs_sharding *e = NULL;
            ok = gs_sharding_parse(&a, gs_sb_str(&sb), sb.len, &e, &d, gs_span_none()) == GS_OK &&
                 gs_sharding_equal(e, leaf);
            if (!ok)
                fprintf(stderr, "%s: %.*s: explicit spelling %s differs\n", where, (int)len, text,
                        gs_sb_str(&sb));
            gs_sb_free(&sb);
        }
    }
    gs_diags_free(&d);
    gs_arena_free(&a);
    return ok;
}

static void test_embedded(void **state) {
    (void)state;
    int bad = 0, n = (int)(sizeof EMBEDDED / sizeof EMBEDDED[0]);
    for (int i = 0; i < n; i++) bad += !check_one(EMBEDDED[i], strlen(EMBEDDED[i]), "embedded");
    fprintf(stderr, "embedded corpus: %d strings, %d failed\n", n, bad);
    assert_int_equal(bad, 0);
}

/* Other spellings of one value compare equal (and hash equal). */
static void test_spellings(void **state) {
    (void)state;
    static const char *const groups[][4] = {
        {"{devices=[2,1]0,1}", "{devices=[2,1]<=[2]}", "{devices=[2,1]<=[2,1]T(1,0)}",
         "{devices=[2,1]0,1 metadata={op_name=\"x\"}}"},
        {"{devices=[4,2]<=[2,4]T(1,0)}", "{devices=[4,2]0,4,1,5,2,6,3,7}",
         "{devices=[4,2]<=[2,2,2]T(1,2,0)}", "{devices=[4,2]<=[2,4]T(1,0) }"},
        {"{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}",
         "{devices=[2,2,2]4,0,6,2,5,1,7,3 last_tile_dim_replicate}",
         "{devices=[2,2,2]0,4,2,6,1,5,3,7 last_tile_dims={replicated}}",
         "{mesh['x'=2,'y'=2,'z'=2] [{'z'}, {'y'}], replicated={'x'}}"},
        {"{devices=[1,1,2,2]<=[4] last_tile_dims={replicated,manual}}",
         "{devices=[1,1,2,2]0,2,1,3 last_tile_dims={manual, replicated}}",
         "{devices=[1,1,2,2]<=[2,2]T(1,0) last_tile_dims={manual,replicated}}",
         "{devices=[1,1,2,1,2]<=[2,2]T(1,0) last_tile_dims={manual,manual,replicated}}"},
        {"{replicated}", "{devices=[1,1,4]<=[4] last_tile_dim_replicate}",
         "{devices=[1,4]3,2,1,0 last_tile_dim_replicate}", "{mesh['a'=4] [{}, {}]}"},
        {"{manual}", "{devices=[1,2,2]<=[4] last_tile_dims={manual, manual}}",
         "{devices=[1,1,4]<=[4] last_tile_dims={manual}}", "{mesh['a'=2,'b'=4] manual}"},
    };
    gs_arena a;
    gs_arena_init(&a);
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        gs_sharding *first = NULL;
        for (int i = 0; i < 4; i++) {
            gs_sharding *s;
            gs_diags d = {0};
            if (gs_sharding_parse(&a, groups[g][i], strlen(groups[g][i]), &s, &d, gs_span_none()) !=
                GS_OK)
                gs_diags_render(&d, stderr);
            gs_diags_free(&d);
            assert_non_null(s);
            if (!first) {
                first = s;
                continue;
            }
            if (!gs_sharding_equal(first, s))
                fprintf(stderr, "%s != %s\n", groups[g][0], groups[g][i]);
            assert_true(gs_sharding_equal(first, s));
            assert_true(gs_sharding_hash(first) == gs_sharding_hash(s));
        }
    }
    gs_arena_free(&a);
}

/* ------------------------------------------------------------------ the shared folder */

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

/* Checks every balanced {...} after `sharding=` in an HLO text. Returns the count; *bad counts
 * failures. */
static int scan_hlo(const char *path, int *bad) {
    char *text = read_all(path);
    if (!text) return 0;
    int n = 0;
    for (char *p = strstr(text, "sharding={"); p; p = strstr(p + 1, "sharding={")) {
        if (p > text && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'))) continue;
        char *start = p + 9, *q = start;
        int depth = 0;
        bool quote = false;
        for (; *q; q++) {
            if (quote) {
                if (*q == '\\' && q[1])
                    q++;
                else if (*q == '"')
                    quote = false;
            } else if (*q == '"') {
                quote = true;
            } else if (*q == '{') {
                depth++;
            } else if (*q == '}' && --depth == 0) {
                break;
            }
        }
        if (!*q) break;
        n++;
        if (!check_one(start, (size_t)(q - start + 1), path)) (*bad)++;
    }
    free(text);
    return n;
}

/* Every "sharding" string value anywhere in a JSON tree. */
static void scan_json(const cJSON *j, const char *path, int *n, int *bad) {
    for (const cJSON *c = j ? j->child : NULL; c; c = c->next) {
        if (c->string && strcmp(c->string, "sharding") == 0 && cJSON_IsString(c)) {
            (*n)++;
            if (!check_one(c->valuestring, strlen(c->valuestring), path)) (*bad)++;
        } else {
            scan_json(c, path, n, bad);
        }
    }
}

static void test_shared_corpus(void **state) {
    (void)state;
    char root[4096];
    snprintf(root, sizeof root, "%s/../shared/conformance/xla", GSPMD_SOURCE_DIR);
    DIR *dir = opendir(root);
    if (!dir) {
        fprintf(stderr,
                "note: %s not found; skipping the shared corpus (the embedded set "
                "still ran)\n",
                root);
        return;
    }
    int cases = 0, n_hlo = 0, n_json = 0, bad = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.') continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s/module.hlo", root, e->d_name);
        n_hlo += scan_hlo(path, &bad);
        snprintf(path, sizeof path, "%s/%s/case.json", root, e->d_name);
        char *js = read_all(path);
        if (!js) continue;
        cases++;
        cJSON *j = cJSON_Parse(js);
        if (j) {
            scan_json(cJSON_GetObjectItemCaseSensitive(j, "expectations"), path, &n_json, &bad);
            scan_json(cJSON_GetObjectItemCaseSensitive(j, "structure_expectations"), path, &n_json,
                      &bad);
        }
        cJSON_Delete(j);
        free(js);
    }
    closedir(dir);
    int n_real = 0;
    snprintf(root, sizeof root, "%s/../shared/real", GSPMD_SOURCE_DIR);
    if ((dir = opendir(root))) {
        while ((e = readdir(dir))) {
            size_t l = strlen(e->d_name);
            if (l < 4 || strcmp(e->d_name + l - 4, ".hlo") != 0) continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", root, e->d_name);
            n_real += scan_hlo(path, &bad);
        }
        closedir(dir);
    }
    fprintf(stderr,
            "shared corpus: %d cases, %d module shardings, %d expected shardings, %d in "
            "real dumps; %d failed\n",
            cases, n_hlo, n_json, n_real, bad);
    assert_true(n_hlo > 0);
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedded),
        cmocka_unit_test(test_spellings),
        cmocka_unit_test(test_shared_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
