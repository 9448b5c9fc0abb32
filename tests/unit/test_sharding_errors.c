/*
 * test_sharding_errors.c — bad input gives a clear error naming the problem, at the right
 * column, never a crash: malformed sharding text, device counts that do not match the tile
 * assignment, devices listed twice, bad named shardings, bad meshes and PartitionSpecs. And
 * fault injection: every allocation of a parse, a PartitionSpec conversion and the transforms
 * may fail, giving GS_ERR (or a clean result), never a crash or a leak.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "gspmd/sharding.h"
#include "gspmd/text.h"

/* One bad input, its exact message and the 1-based column the error points at. */
typedef struct bad_case {
    const char *text;
    const char *message;
    uint32_t col;
} bad_case;

static void check_bad(const bad_case *c) {
    gs_arena a;
    gs_arena_init(&a);
    gs_source *src = gs_source_from_string("s", c->text);
    gs_diags d = {0};
    gs_sharding *s = (gs_sharding *)&d; /* must be reset to NULL */
    gs_span sp = {src, 1, 1};
    assert_int_equal(gs_sharding_parse(&a, c->text, strlen(c->text), &s, &d, sp), GS_ERR);
    assert_null(s);
    assert_int_equal(d.n, 1);
    if (strcmp(d.items[0].message, c->message) != 0 || d.items[0].span.col != c->col)
        fprintf(stderr, "%s\n  got  col %u: %s\n  want col %u: %s\n", c->text, d.items[0].span.col,
                d.items[0].message, c->col, c->message);
    assert_string_equal(d.items[0].message, c->message);
    assert_int_equal(d.items[0].span.col, c->col);
    assert_int_equal(d.items[0].span.line, 1);
    gs_diags_free(&d);
    gs_source_free(src);
    gs_arena_free(&a);
}

/* Found by tests/fuzz/fuzz_sharding: a NUL inside metadata or a quoted axis name was kept, and
 * the stored C string (cut at the NUL) printed as `metadata={op_name="a}` or as a mesh naming
 * an axis twice, neither of which parses back. A NUL is now an error wherever it is. */
static void check_nul(const char *text, size_t len, uint32_t col) {
    gs_arena a;
    gs_arena_init(&a);
    gs_source *src = gs_source_from_string("s", "");
    gs_diags d = {0};
    gs_sharding *s = NULL;
    gs_span sp = {src, 1, 1};
    assert_int_equal(gs_sharding_parse(&a, text, len, &s, &d, sp), GS_ERR);
    assert_null(s);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.items[0].message, "unexpected NUL byte in the sharding text");
    assert_int_equal(d.items[0].span.col, col);
    gs_diags_free(&d);
    gs_source_free(src);
    gs_arena_free(&a);
}

static void test_nul_bytes(void **state) {
    (void)state;
    static const char meta[] = "{devices=[2]0,1 metadata={op_name=\"a\0b\"}}";
    check_nul(meta, sizeof meta - 1, 37);
    static const char axis[] = "{mesh['x'=2,'M\0z'=2,'M'=3] []}";
    check_nul(axis, sizeof axis - 1, 15);
}

static void test_bad_sharding_text(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"", "expected '{' to start a sharding, found the end", 1},
        {"replicated", "expected '{' to start a sharding, found 'r'", 1},
        {"{", "unterminated sharding: expected '}'", 1},
        {"{devices=[2]0,1", "unterminated sharding: expected '}'", 1},
        {"{devices=[2]0,1}}", "unexpected text after the sharding", 17},
        {"{foo}", "unknown sharding attribute 'foo'", 2},
        {"{replicated manual}", "conflicting sharding kinds 'replicated' and 'manual'", 13},
        {"{maximal}", "a maximal sharding needs device=N", 1},
        {"{device=1}", "device=N needs the word maximal", 1},
        {"{maximal device=1 devices=[2]0,1}",
         "a maximal sharding takes device=N, not devices=[...]", 19},
        {"{replicated devices=[2]0,1}", "replicated shardings should not have any devices assigned",
         13},
        /* Device counts and device lists. */
        {"{devices=[2,2]0,1,2}", "devices=[2,2] needs 4 device ids, found 3", 15},
        {"{devices=[2,2]0,1,2,3,4}", "devices=[2,2] needs 4 device ids, found 5", 15},
        {"{devices=[2,2]<=[8]}", "devices=[2,2] has 4 tiles but the iota lists 8 devices", 15},
        {"{devices=[2,2]0,1,2,2}", "device 2 is listed twice", 15},
        {"{devices=[2]0,-1}", "device id -1 is negative", 13},
        {"{devices=[2]}", "expected a device id, found '}'", 13},
        {"{devices=[0]}", "devices=[...] sizes must be >= 1, found 0", 10},
        {"{devices=[]0}", "devices=[] has no dims", 10},
        {"{devices=[2,2}", "expected ']' to close devices=[...], found '}'", 14},
        {"{devices=2}", "expected '[' to open devices=[...], found '2'", 10},
        {"{devices=[99999999999,99999999]<=[4]}", "devices=[...] has too many devices", 10},
        {"{devices=[2,2]<=[4]T(1,0)}", "T(...) has 2 entries but the iota has 1 reshape dims", 20},
        {"{devices=[4]<=[2,2]T(1,1)}", "T(...) is not a permutation of 0..1", 20},
        /* Subgroups. */
        {"{devices=[2,2]<=[4] last_tile_dims={manual, foo}}",
         "unknown subgroup type 'foo' in last_tile_dims (expected manual, replicated or "
         "unreduced)",
         44},
        {"{devices=[2]<=[2] last_tile_dims={manual, replicated}}",
         "last_tile_dims lists 2 types but devices=[2] has only 1 dims", 19},
        {"{devices=[2,2]0,1,2,3 last_tile_dim_replicate last_tile_dims={manual}}",
         "last_tile_dim_replicate and last_tile_dims cannot both be given", 47},
        {"{devices=[2]0,1 shard_as}", "expected a shard group id, found '}'", 25},
        {"{devices=[2]0,1 metadata={op_name=\"a\"}", "unterminated sharding: expected '}'", 1},
        /* fuzz_front: metadata with an unbalanced '(' (outside a string) printed into a module
         * that could not be parsed back. */
        {"{replicated metadata={/p(q}}", "unbalanced brackets in metadata (a module could not read it back)", 22},
        {"{replicated metadata={a] b}}", "unbalanced brackets in metadata (a module could not read it back)", 22},
        /* fuzz_front: a vertical tab in metadata printed into text that read back otherwise. */
        {"{replicated metadata={name\v=\"a\"}}", "a control character (0x0b) in metadata", 27},
        /* fuzz_front: two slashes, or a slash and a star, outside a string would start a comment
         * in HLO text. */
        {"{replicated metadata={/p//_name=\"a\"}}",
         "'//' in metadata outside a string (a module could not read it back: it starts a "
         "comment)",
         25},
        {"{replicated metadata={a/*b}}",
         "'/*' in metadata outside a string (a module could not read it back: it starts a "
         "comment)",
         24},
        /* Tuples. */
        {"{{replicated}, {{manual}}}", "tuple shardings cannot nest", 16},
        {"{{replicated} {manual}}", "expected '}' to close the tuple sharding, found '{'", 15},
        /* Named shardings. */
        {"{mesh['x'=2] [{'z'}]}", "mesh axis 'z' does not exist", 16},
        {"{mesh['x'=2,'y'=2] [{'x'}, {'x'}]}", "mesh axis 'x' is used twice", 29},
        {"{mesh['x'=4] [{'x'}, {'x':(2)2}]}", "mesh axis 'x' is used twice", 23},
        {"{mesh['x'=2,'x'=2] [{}]}", "mesh axis 'x' is defined twice", 13},
        {"{mesh['x'=4] [{'x':(2)4}]}", "sub-axis 'x':(2)4 does not fit axis 'x' of size 4", 16},
        {"{mesh['x'=2,'y'=2], device_ids=(0,1,2), [{'x'}]}", "the mesh needs 4 device ids, found 3",
         33},
        {"{mesh['x'=2,'y'=2], device_ids=(0,1,2,2), [{'x'}]}", "device 2 is listed twice", 33},
        {"{mesh['x'=2,'y'=2], device_ids=(0,1,2,5), [{'x'}]}",
         "the device order is not a permutation of 0..3", 33},
        {"{mesh['x'=2] bogus}",
         "expected [dim shardings], replicated, unreduced or manual after the mesh, found 'b'", 14},
        {"{mesh['x'=2] [{'x'}], foo={'x'}}", "unknown attribute 'foo' in a named sharding", 22},
        {"{mesh['x'=0] [{}]}", "mesh axis 'x' has size 0; sizes must be >= 1", 11},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_bad(&cases[i]);
}

static void test_bad_mesh(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"", "the mesh is empty: expected NAME=SIZE,...", 1},
        {"data=4,data=2", "mesh axis 'data' is defined twice", 8},
        {"data=0", "mesh axis 'data' has size 0; sizes must be >= 1", 6},
        {"data", "expected '=' after the mesh axis name, found the end", 5},
        {"data=4:0,1,2", "the mesh needs 4 device ids, found 3", 8},
        {"data=2:0,0", "device 0 is listed twice", 8},
        {"data=2:1,2", "the device order is not a permutation of 0..1", 8},
        {"data=4:<=[2,3]", "the mesh has 4 devices but the iota lists 6 devices", 8},
        {"data=4,model=2 extra", "unexpected 'e' in the mesh", 16},
        /* Found by tests/fuzz/fuzz_front: an empty quoted name printed as `=2`. */
        {"x=2,''=2", "an axis name must not be empty", 5},
        /* ... and a device order without axes (`:0`) printed as the empty mesh. */
        {":0", "the mesh has no axes: expected NAME=SIZE,... before the device order", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gs_arena a;
        gs_arena_init(&a);
        gs_source *src = gs_source_from_string("m", cases[i].text);
        gs_span sp = {src, 1, 1};
        gs_diags d = {0};
        gs_mesh m;
        assert_int_equal(gs_mesh_parse(&a, cases[i].text, strlen(cases[i].text), &m, &d, sp),
                         GS_ERR);
        if (strcmp(d.items[0].message, cases[i].message) != 0 ||
            d.items[0].span.col != cases[i].col)
            fprintf(stderr, "%s\n  got  col %u: %s\n", cases[i].text, d.items[0].span.col,
                    d.items[0].message);
        assert_string_equal(d.items[0].message, cases[i].message);
        assert_int_equal(d.items[0].span.col, cases[i].col);
        gs_diags_free(&d);
        gs_source_free(src);
        gs_arena_free(&a);
    }
}

static void test_bad_partition_spec(void **state) {
    (void)state;
    static const struct {
        const char *spec;
        int rank;
        const char *message;
        uint32_t col;
    } cases[] = {
        {"foo,None", 2, "mesh axis 'foo' does not exist (the mesh has data, model)", 1},
        {"data,data", 2, "mesh axis 'data' is used twice in the PartitionSpec", 6},
        {"(data,model),data", 2, "mesh axis 'data' is used twice in the PartitionSpec", 14},
        {"data,model,None", 2, "the PartitionSpec has 3 entries but the tensor has rank 2", 1},
        {"data", 0, "the PartitionSpec has 1 entries but the tensor has rank 0", 1},
        {"(data,model", 2, "expected ')' to close the axis group, found the end", 12},
        {"data model", 2, "unexpected 'm' in the PartitionSpec", 6},
    };
    gs_arena a;
    gs_arena_init(&a);
    gs_mesh m;
    assert_int_equal(gs_mesh_parse(&a, "data=4,model=2", 14, &m, NULL, gs_span_none()), GS_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gs_source *src = gs_source_from_string("p", cases[i].spec);
        gs_span sp = {src, 1, 1};
        gs_diags d = {0};
        gs_sharding *s;
        assert_int_equal(gs_sharding_from_spec(&a, &m, cases[i].spec, strlen(cases[i].spec),
                                               cases[i].rank, &s, &d, sp),
                         GS_ERR);
        if (strcmp(d.items[0].message, cases[i].message) != 0 ||
            d.items[0].span.col != cases[i].col)
            fprintf(stderr, "%s\n  got  col %u: %s\n", cases[i].spec, d.items[0].span.col,
                    d.items[0].message);
        assert_string_equal(d.items[0].message, cases[i].message);
        assert_int_equal(d.items[0].span.col, cases[i].col);
        gs_diags_free(&d);
        gs_source_free(src);
    }
    gs_arena_free(&a);
}

/* A bad sharding attribute in a module is a parse error located at the attribute's value. */
static void test_bad_attribute(void **state) {
    (void)state;
    gs_source *src = gs_source_from_string("bad.hlo", "HloModule x\n\nENTRY e {\n"
                                                      "  ROOT p = f32[2] parameter(0), "
                                                      "sharding={devices=[2]0}\n}\n");
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    assert_null(m);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.items[0].message, "devices=[2] needs 2 device ids, found 1");
    assert_int_equal(d.items[0].span.line, 4);
    gs_diags_free(&d);
    gs_source_free(src);
}

/* Runs f with the k-th arena allocation failing for every k until it runs clean; f must return
 * GS_ERR or GS_OK with a result, and never crash (ASan checks the leaks). */
typedef gs_status (*faulty_fn)(gs_arena *a, gs_diags *d);

static void each_fault(faulty_fn f) {
    for (long k = 1; k < 100000; k++) {
        gs_arena a;
        gs_arena_init(&a);
        a.fail_at = k;
        gs_diags d = {0};
        gs_status st = f(&a, &d);
        bool hit = a.failed;
        if (hit && st == GS_OK) fprintf(stderr, "allocation %ld failed silently\n", k);
        assert_true(!hit || st == GS_ERR);
        gs_diags_free(&d);
        gs_arena_free(&a);
        if (!hit) {
            assert_int_equal(st, GS_OK);
            return;
        }
    }
    fail_msg("allocation count never settled");
}

static gs_status parse_many(gs_arena *a, gs_diags *d) {
    static const char *const texts[] = {
        "{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate metadata={op_name=\"a\"}}",
        "{devices=[2,2]3,1,2,0 last_tile_dim_replicate}",
        "{devices=[1,1,2,2]<=[4] last_tile_dims={replicated, manual}}",
        "{{replicated}, {devices=[4]0,2,1,3}, {maximal device=1 shard_as 2}}",
        ("{mesh['a'=2,'b'=4,'c'=3,'d'=8], [{'a'}], replicated={'c'}, unreduced={'d':(4)2}, "
         "manual={'b':(2)2}, metadata={{op_name=\"foo\"}}}"),
        "{mesh['x'=2,'y'=2], device_ids=(0,2,1,3), [{'x'}, {}]}",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        gs_sharding *s;
        if (gs_sharding_parse(a, texts[i], strlen(texts[i]), &s, d, gs_span_none()) != GS_OK)
            return GS_ERR;
        if (!gs_sharding_to_string(a, s)) return GS_ERR;
    }
    return GS_OK;
}

static gs_status spec_and_transforms(gs_arena *a, gs_diags *d) {
    gs_mesh m;
    if (gs_mesh_parse(a, "x=4,y=2,z=2:<=[2,8]T(1,0)", 25, &m, d, gs_span_none()) != GS_OK)
        return GS_ERR;
    gs_sharding *s, *r, *t;
    if (gs_sharding_from_spec(a, &m, "(z,x),None,y", 12, 3, &s, d, gs_span_none()) != GS_OK)
        return GS_ERR;
    int perm[3] = {2, 0, 1};
    int64_t dims[1] = {1}, src[3] = {8, 6, 4}, dst[2] = {48, 4};
    if (gs_sharding_transpose(a, s, 3, perm, &r) != GS_OK) return GS_ERR;
    if (gs_sharding_replicate_dims(a, s, 1, dims, &r) != GS_OK) return GS_ERR;
    if (gs_sharding_reshape(a, s, 3, src, 2, dst, &r) != GS_OK) return GS_ERR;
    if (gs_sharding_reshape_partial(a, s, 3, src, 2, dst, &r) != GS_OK) return GS_ERR;
    if (gs_sharding_parse(a, "{devices=[1,4,4]<=[16] last_tile_dim_replicate}", 47, &t, d,
                          gs_span_none()) != GS_OK)
        return GS_ERR;
    bool changed;
    if (gs_sharding_merge(a, t, r ? r : s, true, &r, &changed) != GS_OK) return GS_ERR;
    gs_replica_groups *g;
    if (gs_sharding_replica_groups(a, s, &g) != GS_OK) return GS_ERR;
    return GS_OK;
}

static void test_fault_injection(void **state) {
    (void)state;
    each_fault(parse_many);
    each_fault(spec_and_transforms);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_sharding_text),
        cmocka_unit_test(test_nul_bytes),
        cmocka_unit_test(test_bad_mesh),
        cmocka_unit_test(test_bad_partition_spec),
        cmocka_unit_test(test_bad_attribute),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
