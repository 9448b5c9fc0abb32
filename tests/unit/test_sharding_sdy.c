/*
 * test_sharding_sdy.c — Shardy's mesh and sharding attributes (`sdy.mesh @mesh = <["x"=2]>`,
 * `#sdy.sharding<@mesh, [{"x", ?}, {}]>`) read into gspmd's shardings: the tiled form each
 * converts to (hand-derived: a dim's axes, major first, become its tile dim; the devices are the
 * mesh's, reshaped by the axes and sub-axes and transposed into dim order; the axes no dim uses
 * replicate), the named form kept (open dims, priorities) and printed back in Shardy's text,
 * HLO shardings converted to a mesh's axes where exact (gs_sharding_to_named), and located
 * errors.
 */
#include "gspmd/sharding.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

typedef struct fixture {
    gs_arena a;
    gs_mesh meshes[3];
    const char *names[3];
    gs_mesh_table table;
} fixture;

static int setup(void **state) {
    static fixture f;
    memset(&f, 0, sizeof f);
    gs_arena_init(&f.a);
    static const char *const texts[] = {"<[\"x\"=2, \"y\"=4]>", "mesh<[\"x\"=4], device_ids=[3, 2, 1, 0]>",
                                        "<[], device_ids=[5]>"};
    static const char *const names[] = {"mesh", "rev", "one"};
    for (int i = 0; i < 3; i++) {
        size_t used = 0;
        gs_diags d = {0};
        assert_int_equal(gs_mesh_parse_sdy(&f.a, texts[i], strlen(texts[i]), &f.meshes[i], &used,
                                           &d, gs_span_none()),
                         GS_OK);
        assert_int_equal(used, strlen(texts[i]));
        f.names[i] = names[i];
    }
    f.table.n = 3;
    f.table.names = f.names;
    f.table.meshes = f.meshes;
    *state = &f;
    return 0;
}

static int teardown(void **state) {
    gs_arena_free(&((fixture *)*state)->a);
    return 0;
}

/* The tiled (V2) text of sdy sharding `text`, which must be read whole. */
static const char *v2(fixture *f, const char *text, const gs_sharding **out) {
    gs_sharding *s = NULL;
    size_t used = 0;
    gs_diags d = {0};
    if (gs_sharding_parse_sdy(&f->a, &f->table, text, strlen(text), &s, &used, &d,
                              gs_span_none()) != GS_OK)
        fail_msg("%s: %s", text, d.n ? d.items[0].message : "?");
    assert_int_equal(used, strlen(text));
    assert_non_null(s->named);
    if (out) *out = s;
    gs_sharding plain = *s;
    plain.named = NULL;
    return gs_sharding_to_string(&f->a, &plain);
}

static void test_meshes(void **state) {
    fixture *f = *state;
    assert_int_equal(f->meshes[0].n_axes, 2);
    assert_int_equal(f->meshes[0].n_devices, 8);
    assert_string_equal(f->meshes[0].names[1], "y");
    assert_true(f->meshes[1].device_order);
    assert_int_equal(gs_tile_device_at(&f->meshes[1].devices, 0), 3);
    assert_int_equal(f->meshes[2].n_axes, 0);
    assert_ptr_equal(gs_mesh_table_find(&f->table, "rev", 3), &f->meshes[1]);
    assert_null(gs_mesh_table_find(&f->table, "nope", 4));
}

static void test_conversion(void **state) {
    fixture *f = *state;
    assert_string_equal(v2(f, "<@mesh, [{\"x\"}, {\"y\"}]>", NULL), "{devices=[2,4]<=[8]}");
    /* y (4) before x (2): the mesh [2,4] transposed. */
    assert_string_equal(v2(f, "<@mesh, [{\"y\"}, {\"x\"}]>", NULL), "{devices=[4,2]<=[2,4]T(1,0)}");
    /* y unused: replicated over its 4 devices. */
    assert_string_equal(v2(f, "<@mesh, [{\"x\"}, {}]>", NULL),
                        "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
    assert_string_equal(v2(f, "<@mesh, [{}, {}]>", NULL), "{replicated}");
    /* Both axes on one dim, y major. */
    assert_string_equal(v2(f, "<@mesh, [{\"y\", \"x\"}, {}]>", NULL),
                        "{devices=[8,1]<=[2,4]T(1,0)}");
    /* Sub-axes: x (4, devices 3,2,1,0) split in two halves of 2. */
    assert_string_equal(v2(f, "<@rev, [{\"x\":(1)2}, {\"x\":(2)2}]>", NULL),
                        "{devices=[2,2]3,2,1,0}");
    assert_string_equal(v2(f, "<@rev, [{\"x\":(2)2}, {\"x\":(1)2}]>", NULL),
                        "{devices=[2,2]3,1,2,0}");
    assert_string_equal(v2(f, "<@rev, [{\"x\"}]>", NULL), "{devices=[4]3,2,1,0}");
    assert_string_equal(v2(f, "<@one, []>", NULL), "{maximal device=5}");
    /* An inline mesh. */
    assert_string_equal(v2(f, "<mesh<[\"a\"=2]>, [{}, {\"a\"}]>", NULL), "{devices=[1,2]<=[2]}");
}

static void test_named_kept(void **state) {
    fixture *f = *state;
    const gs_sharding *s;
    assert_string_equal(v2(f, "<@mesh, [{\"x\", ?}, {?}]>", &s),
                        "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
    assert_int_equal(s->named->n_dims, 2);
    assert_true(s->named->dims[0].open);
    assert_int_equal(s->named->dims[0].n, 1);
    assert_true(s->named->dims[1].open);
    assert_null(s->named->priorities);
    assert_string_equal(v2(f, "<@mesh, [{\"x\"}p1, {\"y\"}]>", &s), "{devices=[2,4]<=[8]}");
    assert_non_null(s->named->priorities);
    assert_int_equal(s->named->priorities[0], 1);
    assert_int_equal(s->named->priorities[1], -1);
    assert_string_equal(v2(f, "<@mesh, [{\"x\"}, {}], replicated={\"y\"}>", &s),
                        "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
    assert_int_equal(s->named->replicated.n, 1);
    assert_int_equal(s->named->replicated.v[0].axis, 1);
}

/* Each bad attribute: GS_ERR with the message, at its column. */
static void expect_error(fixture *f, const char *text, const char *want, uint32_t col) {
    gs_source *src = gs_source_from_string("m.mlir", text);
    gs_span sp = {src, 1, 1};
    gs_sharding *s = NULL;
    gs_diags d = {0};
    assert_int_equal(gs_sharding_parse_sdy(&f->a, &f->table, text, strlen(text), &s, NULL, &d, sp),
                     GS_ERR);
    assert_int_equal(d.n_errors, 1);
    if (!strstr(d.items[0].message, want)) fail_msg("%s: got '%s'", text, d.items[0].message);
    assert_int_equal(d.items[0].span.col, col);
    gs_diags_free(&d);
    gs_source_free(src);
}

static void test_errors(void **state) {
    fixture *f = *state;
    expect_error(f, "<@nomesh, [{}]>", "mesh @nomesh is not defined", 2);
    expect_error(f, "<@mesh, [{\"z\"}]>", "mesh axis 'z' does not exist", 11);
    expect_error(f, "<@mesh, [{\"x\"}, {\"x\"}]>", "mesh axis 'x' is used twice", 18);
    expect_error(f, "<@rev, [{\"x\":(1)3}]>", "does not fit axis 'x' of size 4", 10);
    expect_error(f, "<@mesh, [{\"x\"}p-1]>", "a priority must be >= 0", 16);
    expect_error(f, "<@mesh, [{\"x\"}] ", "expected '>' to close the sharding", 17);
    gs_mesh m;
    gs_diags d = {0};
    const char *bad = "<[\"x\"=2], device_ids=[0, 1, 2]>";
    assert_int_equal(gs_mesh_parse_sdy(&f->a, bad, strlen(bad), &m, NULL, &d, gs_span_none()),
                     GS_ERR);
    assert_non_null(strstr(d.items[0].message, "the mesh has 2 devices but device_ids lists 3"));
    gs_diags_free(&d);
    bad = "<[\"x\"=2], device_ids=[0, 0]>";
    assert_int_equal(gs_mesh_parse_sdy(&f->a, bad, strlen(bad), &m, NULL, &d, gs_span_none()),
                     GS_ERR);
    gs_diags_free(&d);
}

/* Shardy's text of `named` (gs_named_print_sdy). */
static const char *sdy_text(fixture *f, const gs_named *named) {
    gs_sb sb = {0};
    gs_named_print_sdy(&sb, named);
    char *t = gs_arena_strdup(&f->a, gs_sb_str(&sb));
    gs_sb_free(&sb);
    return t;
}

/* Shardy's text read back prints as written; an HLO sharding converts to the axes of a mesh
 * that denote exactly its devices (hand-derived), or to nothing. */
static void test_print_and_convert(void **state) {
    fixture *f = *state;
    static const char *const KEPT[] = {
        "<@mesh, [{\"x\", ?}, {\"y\"}p1]>",
        "<@mesh, [{\"y\":(1)2}, {?}p0], replicated={\"x\"}>",
        "<@mesh, [{}, {\"x\"}], unreduced={\"y\"}>",
        "<mesh<[\"z\"=8]>, [{\"z\"}]>",
        "<@rev, [{\"x\"}, {}]>",
    };
    for (size_t i = 0; i < sizeof KEPT / sizeof KEPT[0]; i++) {
        const gs_sharding *s;
        v2(f, KEPT[i], &s);
        assert_true(gs_named_is_sdy(s->named));
        assert_string_equal(sdy_text(f, s->named), KEPT[i]);
    }
    gs_sb sb = {0};
    gs_mesh_print_sdy(&sb, &f->meshes[1]);
    assert_string_equal(gs_sb_str(&sb), "<[\"x\"=4], device_ids=[3, 2, 1, 0]>");
    gs_sb_free(&sb);
    static const struct {
        const char *hlo; /* XLA sharding text on a rank-2 tensor */
        const char *sdy; /* its form on @mesh (x=2, y=4), or NULL */
    } CONV[] = {
        {"{replicated}", "<@mesh, [{}, {}]>"},
        {"{devices=[2,4]<=[8]}", "<@mesh, [{\"x\"}, {\"y\"}]>"},
        {"{devices=[4,2]<=[2,4]T(1,0)}", "<@mesh, [{\"y\"}, {\"x\"}]>"},
        {"{devices=[8,1]<=[8]}", "<@mesh, [{\"x\", \"y\"}, {}]>"},
        {"{devices=[8,1]<=[2,4]T(1,0)}", "<@mesh, [{\"y\", \"x\"}, {}]>"},
        {"{devices=[1,2,4]<=[8] last_tile_dim_replicate}", "<@mesh, [{}, {\"x\"}]>"},
        {"{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}", NULL},
        {"{devices=[2,4]0,1,2,3,4,5,7,6}", NULL},
        {"{maximal device=1}", NULL},
        {"{manual}", NULL},
    };
    for (size_t i = 0; i < sizeof CONV / sizeof CONV[0]; i++) {
        gs_sharding *s;
        gs_diags d = {0};
        assert_int_equal(
            gs_sharding_parse(&f->a, CONV[i].hlo, strlen(CONV[i].hlo), &s, &d, gs_span_none()),
            GS_OK);
        const gs_named *nm = NULL;
        assert_int_equal(gs_sharding_to_named(&f->a, s, 2, &f->meshes[0], "mesh", &nm), GS_OK);
        if (!CONV[i].sdy) {
            if (nm) fail_msg("%s: expected no Shardy form, got %s", CONV[i].hlo, sdy_text(f, nm));
            continue;
        }
        if (!nm) fail_msg("%s: expected %s, got none", CONV[i].hlo, CONV[i].sdy);
        assert_string_equal(sdy_text(f, nm), CONV[i].sdy);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meshes),
        cmocka_unit_test(test_conversion),
        cmocka_unit_test(test_named_kept),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_print_and_convert),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
