/*
 * test_sharding.c — the sharding representation: parsing and XLA's canonical printing,
 * canonicalisation (iota detection, partial-tile group sorting, subgroup merging), value
 * equality and hashing, per-device queries with hand-computed offsets (uneven and partially
 * replicated), device groups in iota form, and the transforms checked against the expectations
 * of XLA's own hlo_sharding_util tests (ReshapeSharding, PropagateShardingThroughReshape,
 * MergeShardingIfCompatible, TransposeSharding, partial replication, named shardings).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gspmd/sharding.h"
#include "gspmd/text.h"

/* Parses text into a (asserting success). */
static gs_sharding *P(gs_arena *a, const char *text) {
    gs_diags d = {0};
    gs_sharding *s = NULL;
    if (gs_sharding_parse(a, text, strlen(text), &s, &d, gs_span_none()) != GS_OK) {
        fprintf(stderr, "parse of %s failed:\n", text);
        gs_diags_render(&d, stderr);
    }
    gs_diags_free(&d);
    assert_non_null(s);
    return s;
}

/* The canonical text of s (in a). */
static const char *S(gs_arena *a, const gs_sharding *s) {
    char *t = gs_sharding_to_string(a, s);
    assert_non_null(t);
    return t;
}

/* print(parse(text)) == want, printing is a fixed point, and the two compare equal. */
static void check_print(const char *text, const char *want) {
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *s = P(&a, text);
    const char *got = S(&a, s);
    if (strcmp(got, want) != 0) fprintf(stderr, "%s\n  got  %s\n  want %s\n", text, got, want);
    assert_string_equal(got, want);
    gs_sharding *t = P(&a, got);
    assert_string_equal(S(&a, t), want);
    assert_true(gs_sharding_equal(s, t));
    assert_true(gs_sharding_hash(s) == gs_sharding_hash(t));
    gs_arena_free(&a);
}

/* Asserts sharding s prints as want. */
static void expect(gs_arena *a, const gs_sharding *s, const char *want) {
    assert_non_null(s);
    const char *got = S(a, s);
    if (strcmp(got, want) != 0) fprintf(stderr, "got  %s\nwant %s\n", got, want);
    assert_string_equal(got, want);
}

/* Asserts s equals the sharding written want (as values). */
static void expect_eq(gs_arena *a, const gs_sharding *s, const char *want) {
    assert_non_null(s);
    gs_sharding *w = P(a, want);
    if (!gs_sharding_equal(s, w)) fprintf(stderr, "got  %s\nwant %s\n", S(a, s), S(a, w));
    assert_true(gs_sharding_equal(s, w));
}

static void test_print_canonical(void **state) {
    (void)state;
    check_print("{replicated}", "{replicated}");
    check_print("{manual}", "{manual}");
    check_print("{unknown}", "{unknown}");
    check_print("{unreduced}", "{unreduced}");
    check_print("{maximal device=3}", "{maximal device=3}");
    check_print("{devices=[2,1]0,1}", "{devices=[2,1]<=[2]}");
    check_print("{devices=[2,2]0,2,1,3}", "{devices=[2,2]<=[2,2]T(1,0)}");
    check_print("{devices=[2,2]3,1,2,0}", "{devices=[2,2]3,1,2,0}");
    check_print("{devices=[4,2,1]7,6,5,4,3,2,1,0}", "{devices=[4,2,1]7,6,5,4,3,2,1,0}");
    check_print("{devices=[2,1]1,2}", "{devices=[2,1]1,2}");
    check_print("{devices=[4,2]<=[2,4]T(1,0)}", "{devices=[4,2]<=[2,4]T(1,0)}");
    check_print("{devices=[2,2,4]<=[2,2,4]T(0,1,2) last_tile_dim_replicate}",
                "{devices=[2,2,4]<=[16] last_tile_dim_replicate}");
    check_print("{devices=[2]<=[2,1]T(1,0)}", "{devices=[2]<=[2]}");
    check_print("{devices=[1,8]<=[2,4]T(1,0)}", "{devices=[1,8]<=[2,4]T(1,0)}");
    check_print("{ devices=[8,1,4,1,1,1,1]<=[32]}", "{devices=[8,1,4,1,1,1,1]<=[32]}");
    check_print("{devices=[1,4] 0,1,2,3}", "{devices=[1,4]<=[4]}");
    check_print("{devices=[2,1,2,1]0,1,4,5 }", "{devices=[2,1,2,1]0,1,4,5}");
    /* Partial tiles: all-1 data dims replicate; a size-1 replication dim drops. */
    check_print("{devices=[1,1,4]<=[4] last_tile_dim_replicate}", "{replicated}");
    check_print("{devices=[2,1]<=[2] last_tile_dim_replicate}", "{devices=[2]<=[2]}");
    check_print("{devices=[4]<=[4] last_tile_dim_replicate}", "{replicated}");
    /* Replication groups are sorted (XLA's PartialTile). */
    check_print("{devices=[2,2]1,2,3,0 last_tile_dim_replicate}",
                "{devices=[2,2]1,2,0,3 last_tile_dim_replicate}");
    check_print("{devices=[1,2,2]1,0,3,2 last_tile_dim_replicate}",
                "{devices=[1,2,2]<=[4] last_tile_dim_replicate}");
    check_print("{devices=[2,1,8]<=[2,2,4]T(1,2,0) last_tile_dim_replicate}",
                "{devices=[2,1,8]<=[2,2,4]T(1,0,2) last_tile_dim_replicate}");
    check_print("{devices=[4,1,4]<=[2,2,4]T(2,1,0) last_tile_dim_replicate}",
                "{devices=[4,1,4]<=[4,4]T(1,0) last_tile_dim_replicate}");
    /* Subgroups: sorted manual < unreduced < replicated, merged, size-1 dropped. */
    check_print("{devices=[2,2]<=[4] last_tile_dims={replicated, manual}}",
                "{devices=[2,2]<=[2,2]T(1,0) last_tile_dims={manual, replicated}}");
    check_print("{devices=[2,2]<=[4] last_tile_dims={manual,replicated}}",
                "{devices=[2,2]<=[4] last_tile_dims={manual, replicated}}");
    check_print("{devices=[1,2,2]<=[4] last_tile_dims={manual}}",
                "{devices=[1,2,2]<=[4] last_tile_dims={manual}}");
    check_print("{devices=[1,1,4]<=[4] last_tile_dims={manual}}", "{manual}");
    check_print("{devices=[2,1,2]<=[4] last_tile_dims={manual}}",
                "{devices=[2,1,2]<=[4] last_tile_dims={manual}}");
    check_print("{devices=[2,2,1]<=[4] last_tile_dims={manual}}", "{devices=[2,2]<=[4]}");
    check_print("{devices=[2,1,2,2]<=[8] last_tile_dims={replicated, replicated}}",
                "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
    check_print("{devices=[2,1,1,2,2]<=[8] last_tile_dims={manual, replicated}}",
                "{devices=[2,1,1,2,2]<=[8] last_tile_dims={manual, replicated}}");
    check_print("{devices=[2,2,2,2]<=[2,2,2,2]T(0,2,1,3) last_tile_dims={unreduced,replicated}}",
                "{devices=[2,2,2,2]<=[2,2,2,2]T(0,2,1,3) last_tile_dims={unreduced, replicated}}");
    check_print("{devices=[2,2,2,2]<=[16] last_tile_dims={manual, replicated} shard_like 1}",
                "{devices=[2,2,2,2]<=[16] last_tile_dims={manual, replicated} shard_like 1}");
    /* Metadata and shard groups are kept. */
    check_print("{devices=[2]0,1 metadata={op_name=\"a\"}}",
                "{devices=[2]<=[2] metadata={op_name=\"a\"}}");
    check_print("{replicated metadata={op_name=\"rhs_sharding\"}}",
                "{replicated metadata={op_name=\"rhs_sharding\"}}");
    check_print("{manual metadata={{op_name=\"a\"}, {op_name=\"b\"}}}",
                "{manual metadata={{op_name=\"a\"}, {op_name=\"b\"}}}");
    /* Runs of spaces outside strings print as one, as HLO text reads them (fuzz_front); strings
     * keep theirs. */
    check_print("{replicated metadata={  op_name=\"a   b\"   \t source_file=x  }}",
                "{replicated metadata={op_name=\"a   b\" source_file=x}}");
    check_print("{unknown shard_as 0}", "{unknown shard_as 0}");
    check_print("{manual shard_as 1}", "{manual shard_as 1}");
    /* Tuples (comments between elements are skipped). */
    check_print("{{replicated},{manual}}", "{{replicated}, {manual}}");
    check_print("{}", "{}");
    check_print("{{replicated}, /*index=1*/{maximal device=0}}",
                "{{replicated}, {maximal device=0}}");
    check_print("{{devices=[2,1]0,1}, {maximal device=0}}",
                "{{devices=[2,1]<=[2]}, {maximal device=0}}");
    /* One device is replicated. */
    check_print("{devices=[1,1]<=[1]}", "{replicated}");
}

static void test_named(void **state) {
    (void)state;
    check_print("{mesh['x'=2,'y'=2] [{'x'}, {'y'}]}", "{mesh['x'=2,'y'=2] [{'x'}, {'y'}]}");
    check_print("{mesh['x'=2,'y'=2], [{'x'}, {}], replicated={'y'}}",
                "{mesh['x'=2,'y'=2] [{'x'}, {}], replicated={'y'}}");
    check_print("{mesh['a'=2,'b'=4,'c'=3,'d'=8], [{'b', 'a'}, {'c', 'd', ?}]}",
                "{mesh['a'=2,'b'=4,'c'=3,'d'=8] [{'b', 'a'}, {'c', 'd', ?}]}");
    check_print("{mesh['x'=2,'y'=2], device_ids=(0,2,1,3), [{'x'}]}",
                "{mesh['x'=2,'y'=2], device_ids=([2,2]T(1,0)) [{'x'}]}");
    check_print("{mesh['a'=2,'b'=4], replicated}", "{mesh['a'=2,'b'=4] replicated}");
    check_print("{maximal_mesh[device_id=5]}", "{maximal_mesh[device_id=5]}");
    check_print("{mesh['x'=2], [{}], unreduced=max{'x'}}",
                "{mesh['x'=2] [{}], unreduced=max{'x'}}");
    check_print("{mesh['a'=2,'b'=4], [{'a', ?}], metadata={{op_name=\"foo\"}}}",
                "{mesh['a'=2,'b'=4] [{'a', ?}], metadata={{op_name=\"foo\"}}}");
    gs_arena a;
    gs_arena_init(&a);
    /* Named shardings equal the tiled ones they denote (XLA's V3ToV2Sharding). */
    expect_eq(&a, P(&a, "{mesh['x'=2,'y'=2] [{'x'}, {}], replicated={'y'}}"),
              "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    expect_eq(&a, P(&a, "{mesh['x'=4] [{'x':(2)2}, {'x':(1)2}]}"), "{devices=[2,2]<=[2,2]T(1,0)}");
    expect_eq(&a, P(&a, "{mesh['x'=8] [{'x':(1)2, 'x':(4)2}, {}]}"),
              "{devices=[4,1,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}");
    expect_eq(&a, P(&a, "{mesh['x'=2,'y'=2,'z'=2] [{'z'}, {}, {'y'}, {}, {'x'}]}"),
              "{devices=[2,1,2,1,2]<=[2,2,2]T(2,1,0)}");
    expect_eq(&a,
              P(&a, "{mesh['a'=2,'b'=4,'c'=3,'d'=8], [{'a'}], replicated={'c'}, "
                    "unreduced={'d':(4)2}, manual={'b':(2)2}}"),
              "{devices=[2,2,2,24]<=[2,2,2,12,2]T(0,2,4,1,3) last_tile_dims={manual, "
              "unreduced, replicated}}");
    expect_eq(&a, P(&a, "{mesh['a'=2,'b'=4], manual}"), "{manual}");
    expect_eq(&a, P(&a, "{maximal_mesh[device_id=5]}"), "{maximal device=5}");
    gs_arena_free(&a);
}

static void test_equality(void **state) {
    (void)state;
    gs_arena a;
    gs_arena_init(&a);
    static const char *const same[][2] = {
        {"{devices=[2,2]0,1,2,3}", "{devices=[2,2]<=[4]}"},
        {"{devices=[4,2]<=[2,4]T(1,0)}", "{devices=[4,2]0,4,1,5,2,6,3,7}"},
        {"{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}",
         "{devices=[2,2,2]0,4,2,6,1,5,3,7 last_tile_dim_replicate}"},
        {"{devices=[2,2]1,0,3,2 last_tile_dim_replicate}",
         "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
        {"{devices=[2,1]0,1 metadata={op_name=\"a\"}}", "{devices=[2,1]<=[2]}"},
        {"{devices=[1,1,2,2]<=[4] last_tile_dims={replicated,manual}}",
         "{devices=[1,1,2,2]0,2,1,3 last_tile_dims={manual, replicated}}"},
        {"{devices=[1,1,8]<=[8] last_tile_dim_replicate}", "{replicated}"},
        {"{{devices=[4]0,1,2,3}, {replicated}}", "{{devices=[4]<=[4]},{replicated}}"},
        {"{devices=[2,2,4]<=[2,2,4]T(0,1,2) last_tile_dim_replicate}",
         "{devices=[2,2,4]<=[16] last_tile_dim_replicate}"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        gs_sharding *x = P(&a, same[i][0]), *y = P(&a, same[i][1]);
        if (!gs_sharding_equal(x, y)) fprintf(stderr, "%s != %s\n", same[i][0], same[i][1]);
        assert_true(gs_sharding_equal(x, y));
        assert_true(gs_sharding_hash(x) == gs_sharding_hash(y));
    }
    static const char *const differ[][2] = {
        {"{devices=[2,2]<=[4]}", "{devices=[2,2]<=[2,2]T(1,0)}"},
        {"{devices=[2,2]<=[4]}", "{devices=[4,1]<=[4]}"},
        {"{devices=[2,2]<=[4] last_tile_dim_replicate}", "{devices=[2,2]<=[4]}"},
        {"{devices=[2,2]<=[4] last_tile_dims={manual}}",
         "{devices=[2,2]<=[4] last_tile_dim_replicate}"},
        {"{maximal device=0}", "{maximal device=1}"},
        {"{replicated}", "{manual}"},
        {"{unknown shard_as 0}", "{unknown shard_like 0}"},
        {"{unknown shard_as 0}", "{unknown}"},
        {"{{replicated}}", "{{replicated}, {replicated}}"},
        {"{devices=[2,2]3,1,2,0}", "{devices=[2,2]3,1,0,2}"},
    };
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++)
        assert_false(gs_sharding_equal(P(&a, differ[i][0]), P(&a, differ[i][1])));
    gs_arena_free(&a);
}

/* Expected layout of one device on a shape. */
typedef struct want_shard {
    int64_t device;
    int64_t tile[2], offset[2], size[2], valid[2];
} want_shard;

static void check_shards(const char *text, int rank, const int64_t *dims, int n,
                         const want_shard *w) {
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *s = P(&a, text);
    for (int i = 0; i < n; i++) {
        gs_shard_dim sd[2];
        int64_t tile[2] = {0, 0};
        assert_true(gs_sharding_device_shard(s, rank, dims, w[i].device, sd));
        assert_true(gs_sharding_tile_index(s, w[i].device, tile));
        for (int k = 0; k < rank; k++) {
            assert_int_equal(tile[k], w[i].tile[k]);
            assert_int_equal(sd[k].offset, w[i].offset[k]);
            assert_int_equal(sd[k].size, w[i].size[k]);
            assert_int_equal(sd[k].valid, w[i].valid[k]);
        }
    }
    gs_arena_free(&a);
}

static void test_device_shards(void **state) {
    (void)state;
    /* devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate on f32[5,7]: the device at tile
     * index (a,b,r) is 4r+2b+a; shards are ceil(5/2)=3 by ceil(7/2)=4. */
    int64_t d57[2] = {5, 7};
    static const want_shard w1[] = {
        {0, {0, 0}, {0, 0}, {3, 4}, {3, 4}}, {1, {1, 0}, {3, 0}, {3, 4}, {2, 4}},
        {2, {0, 1}, {0, 4}, {3, 4}, {3, 3}}, {3, {1, 1}, {3, 4}, {3, 4}, {2, 3}},
        {4, {0, 0}, {0, 0}, {3, 4}, {3, 4}}, {5, {1, 0}, {3, 0}, {3, 4}, {2, 4}},
        {6, {0, 1}, {0, 4}, {3, 4}, {3, 3}}, {7, {1, 1}, {3, 4}, {3, 4}, {2, 3}},
    };
    check_shards("{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}", 2, d57, 8, w1);
    /* Uneven: 4 tiles over 5 elements: sizes 2, the last device holds no data. */
    int64_t d5[1] = {5};
    static const want_shard w2[] = {
        {0, {0}, {0}, {2}, {2}},
        {1, {1}, {2}, {2}, {2}},
        {2, {2}, {4}, {2}, {1}},
        {3, {3}, {5}, {2}, {0}},
    };
    check_shards("{devices=[4]<=[4]}", 1, d5, 4, w2);
    /* Explicit order, 8 tiles over 3 elements. */
    int64_t d3[1] = {3};
    static const want_shard w3[] = {
        {7, {0}, {0}, {1}, {1}},
        {5, {2}, {2}, {1}, {1}},
        {4, {3}, {3}, {1}, {0}},
        {0, {7}, {3}, {1}, {0}},
    };
    check_shards("{devices=[8]7,6,5,4,3,2,1,0}", 1, d3, 4, w3);
    /* Partial replication with an explicit order: {devices=[2,1,2]0,2,1,3 ...} on [6,4]. */
    int64_t d64[2] = {6, 4};
    static const want_shard w4[] = {
        {0, {0, 0}, {0, 0}, {3, 4}, {3, 4}},
        {2, {0, 0}, {0, 0}, {3, 4}, {3, 4}},
        {1, {1, 0}, {3, 0}, {3, 4}, {3, 4}},
        {3, {1, 0}, {3, 0}, {3, 4}, {3, 4}},
    };
    check_shards("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}", 2, d64, 4, w4);
    /* Replicated and maximal: the whole array. */
    static const want_shard w5[] = {{3, {0, 0}, {0, 0}, {5, 7}, {5, 7}}};
    check_shards("{replicated}", 2, d57, 1, w5);
    check_shards("{maximal device=3}", 2, d57, 1, w5);
}

static void test_queries(void **state) {
    (void)state;
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *s = P(&a, "{devices=[2,3,2]<=[2,2,3]T(2,0,1) last_tile_dim_replicate}");
    assert_int_equal(s->data_rank, 2);
    assert_int_equal(gs_sharding_tiles_in_dim(s, 0), 2);
    assert_int_equal(gs_sharding_tiles_in_dim(s, 1), 3);
    assert_int_equal(gs_sharding_tiles_in_dim(s, 5), 1);
    assert_int_equal(gs_sharding_num_tiles(s), 6);
    assert_int_equal(gs_sharding_num_devices(s), 12);
    assert_int_equal(gs_sharding_replication_dim(s), 2);
    assert_int_equal(gs_sharding_manual_dim(s), -1);
    /* Every device's tile index maps back to it, via the full index. */
    for (int64_t d = 0; d < 12; d++) {
        int64_t pos = gs_tile_position(&s->tiles, d);
        assert_true(pos >= 0);
        assert_int_equal(gs_tile_device_at(&s->tiles, pos), d);
        int64_t full[3] = {pos / 6, (pos / 2) % 3, pos % 2};
        assert_int_equal(gs_sharding_device_for_tile(s, 3, full), d);
    }
    /* A data-rank index gives the first (smallest) device of the replication group. */
    int64_t idx[2] = {1, 2};
    int64_t first = gs_sharding_device_for_tile(s, 2, idx);
    int64_t back[2];
    assert_true(gs_sharding_tile_index(s, first, back));
    assert_int_equal(back[0], 1);
    assert_int_equal(back[1], 2);
    int64_t full[3] = {1, 2, 1};
    assert_true(gs_sharding_device_for_tile(s, 3, full) > first);
    assert_false(gs_sharding_tile_index(s, 12, back));
    assert_false(gs_sharding_tile_index(s, -1, back));
    int64_t bad[2] = {2, 0};
    assert_int_equal(gs_sharding_device_for_tile(s, 2, bad), -1);
    /* Explicit lists with ids that are not 0..n-1. */
    gs_sharding *e = P(&a, "{devices=[2,2]1,3,5,7}");
    assert_false(gs_sharding_tile_index(e, 0, back));
    assert_true(gs_sharding_tile_index(e, 5, back));
    assert_int_equal(back[0], 1);
    assert_int_equal(back[1], 0);
    int64_t dims[2] = {10, 7}, sd[2];
    gs_sharding_shard_dims(s, 2, dims, sd);
    assert_int_equal(sd[0], 5);
    assert_int_equal(sd[1], 3);
    /* Kinds. */
    assert_true(gs_sharding_is_tile_maximal(P(&a, "{maximal device=1}")));
    assert_true(gs_sharding_is_tile_maximal(P(&a, "{replicated}")));
    assert_false(gs_sharding_is_tile_maximal(s));
    assert_true(gs_sharding_is_replicated(P(&a, "{{replicated}, {replicated}}")));
    assert_true(gs_sharding_is_manual(P(&a, "{{manual}, {manual}}")));
    assert_false(gs_sharding_is_manual(P(&a, "{{manual}, {replicated}}")));
    gs_arena_free(&a);
}

/* Prints replica groups as HLO text (through the IR's printer). */
static const char *groups_text(gs_arena *a, const gs_replica_groups *g) {
    gs_attr at = {.key = GS_ATTR_REPLICA_GROUPS, .name = "replica_groups"};
    at.u.groups = (gs_replica_groups *)g;
    gs_sb sb = {0};
    gs_print_attr_value(&sb, &at);
    char *t = gs_arena_strdup(a, gs_sb_str(&sb));
    gs_sb_free(&sb);
    return t;
}

static void test_device_groups(void **state) {
    (void)state;
    gs_arena a;
    gs_arena_init(&a);
    gs_replica_groups *g;
    gs_sharding *s = P(&a, "{devices=[2,2,2]<=[8] last_tile_dim_replicate}");
    assert_int_equal(gs_sharding_replica_groups(&a, s, &g), GS_OK);
    assert_string_equal(groups_text(&a, g), "[4,2]<=[8]");
    s = P(&a, "{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}");
    assert_int_equal(gs_sharding_replica_groups(&a, s, &g), GS_OK);
    assert_string_equal(groups_text(&a, g), "[4,2]<=[2,2,2]T(2,1,0)");
    assert_int_equal(gs_replica_groups_device(g, 1, 0), 2);
    assert_int_equal(gs_replica_groups_device(g, 1, 1), 6);
    /* Along dim 0 of [4,2]: devices differing only in dim 0. */
    s = P(&a, "{devices=[4,2]<=[8]}");
    int d0 = 0;
    assert_int_equal(gs_sharding_groups_along(&a, s, 1, &d0, &g), GS_OK);
    assert_string_equal(groups_text(&a, g), "[2,4]<=[4,2]T(1,0)");
    /* XLA's GetManualSubgroupSharding device groups (hlo_sharding_util_test). */
    int man = 2;
    s = P(&a, "{devices=[1,2,2]0,1,2,3 last_tile_dims={manual}}");
    assert_int_equal(gs_sharding_group_by_dims(&a, s, 1, &man, &g), GS_OK);
    assert_string_equal(groups_text(&a, g), "[2,2]<=[2,2]T(1,0)");
    s = P(&a, "{devices=[1,2,2,2]<=[8] last_tile_dims={replicated, manual}}");
    assert_int_equal(gs_sharding_manual_dim(s), 2);
    assert_int_equal(gs_sharding_group_by_dims(&a, s, 1, &man, &g), GS_OK);
    assert_string_equal(groups_text(&a, g), "[2,4]<=[4,2]T(1,0)");
    s = P(&a, "{devices=[1,2,2,2]<=[8] last_tile_dims={manual, replicated}}");
    assert_int_equal(gs_sharding_group_by_dims(&a, s, 1, &man, &g), GS_OK);
    assert_string_equal(groups_text(&a, g), "[2,4]<=[2,2,2]T(1,0,2)");
    /* Explicit assignments give explicit groups. */
    s = P(&a, "{devices=[2,2]3,1,2,0 last_tile_dim_replicate}");
    assert_int_equal(gs_sharding_replica_groups(&a, s, &g), GS_OK);
    assert_string_equal(groups_text(&a, g), "{{1,3},{0,2}}");
    /* No replication: one group per device. */
    s = P(&a, "{devices=[2,2]<=[4]}");
    assert_int_equal(gs_sharding_replica_groups(&a, s, &g), GS_OK);
    assert_string_equal(groups_text(&a, g), "[4,1]<=[4]");
    gs_arena_free(&a);
}

static void test_tile_transpose(void **state) {
    (void)state;
    gs_arena a;
    gs_arena_init(&a);
    gs_tile_assignment t, u;
    int64_t dims[3] = {2, 3, 4};
    assert_int_equal(gs_tile_iota(&a, 3, dims, 0, NULL, NULL, &t), GS_OK);
    int perm[3] = {2, 0, 1};
    assert_int_equal(gs_tile_transpose(&a, &t, perm, &u), GS_OK);
    assert_true(u.iota);
    gs_sb sb = {0};
    gs_tile_print(&sb, &u);
    assert_string_equal(gs_sb_str(&sb), "[4,2,3]<=[6,4]T(1,0)");
    gs_sb_free(&sb);
    /* [2,3] over reshape [3,2] has no refinement: materialised, then recognised as iota. */
    int64_t d23[2] = {2, 3}, r32[2] = {3, 2};
    int p10[2] = {1, 0};
    assert_int_equal(gs_tile_iota(&a, 2, d23, 2, r32, p10, &t), GS_OK);
    assert_int_equal(gs_tile_transpose(&a, &t, p10, &u), GS_OK);
    sb = (gs_sb){0};
    gs_tile_print(&sb, &u);
    assert_string_equal(gs_sb_str(&sb), "[3,2]<=[6]");
    gs_sb_free(&sb);
    gs_arena_free(&a);
}

static void test_transpose(void **state) {
    (void)state;
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *r;
    int p[4] = {3, 0, 1, 2};
    assert_int_equal(gs_sharding_transpose(&a, P(&a, "{devices=[1,2,1,2]<=[4]}"), 4, p, &r), GS_OK);
    expect_eq(&a, r, "{devices=[2,1,2,1]<=[2,2]T(1,0)}");
    int p2[2] = {1, 0};
    assert_int_equal(gs_sharding_transpose(&a,
                                           P(&a, "{devices=[2,4,2]<=[16] "
                                                 "last_tile_dim_replicate}"),
                                           2, p2, &r),
                     GS_OK);
    expect(&a, r, "{devices=[4,2,2]<=[2,4,2]T(1,0,2) last_tile_dim_replicate}");
    assert_int_equal(gs_sharding_transpose(&a, P(&a, "{replicated}"), 2, p2, &r), GS_OK);
    expect(&a, r, "{replicated}");
    /* Named: {}, {a}, {}, {b} transposed by (3,2,1,0) is {b}, {}, {a}, {}. */
    int p3[4] = {3, 2, 1, 0};
    assert_int_equal(gs_sharding_transpose(&a,
                                           P(&a, "{mesh['a'=2,'b'=2] [{}, {'a'}, {}, "
                                                 "{'b'}]}"),
                                           4, p3, &r),
                     GS_OK);
    expect_eq(&a, r, "{mesh['a'=2,'b'=2] [{'b'}, {}, {'a'}, {}]}");
    gs_arena_free(&a);
}

/* ReshapeSharding(src -> dst, sharding) against XLA's expectation (NULL: no sharding). */
static void check_reshape(int sr, const int64_t *sd, int dr, const int64_t *dd, const char *in,
                          const char *want) {
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *r;
    assert_int_equal(gs_sharding_reshape(&a, P(&a, in), sr, sd, dr, dd, &r), GS_OK);
    if (!want) {
        if (r) fprintf(stderr, "%s: expected none, got %s\n", in, S(&a, r));
        assert_null(r);
    } else {
        if (!r) fprintf(stderr, "%s: expected %s, got none\n", in, want);
        expect_eq(&a, r, want);
    }
    gs_arena_free(&a);
}

#define DIMS(...)                                                                                  \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]) { __VA_ARGS__ }

static void test_reshape(void **state) {
    (void)state;
    /* The expectations of XLA's hlo_sharding_util_test ReshapeSharding* cases. */
    check_reshape(DIMS(1, 2, 16), DIMS(2, 16), "{devices=[3,2,2]<=[12]}",
                  "{devices=[2,2,3]<=[3,2,2]T(1,2,0) last_tile_dim_replicate}");
    check_reshape(DIMS(2, 1, 16), DIMS(2, 16), "{devices=[2,3,2]<=[12]}",
                  "{devices=[2,2,3]<=[2,3,2]T(0,2,1) last_tile_dim_replicate}");
    check_reshape(DIMS(2, 1, 16), DIMS(32), "{devices=[2,3,2]<=[12]}",
                  "{devices=[4,3]<=[2,3,2]T(0,2,1) last_tile_dim_replicate}");
    check_reshape(DIMS(1, 32), DIMS(2, 16), "{devices=[3,4]<=[12]}",
                  "{devices=[2,2,3]<=[3,4]T(1,0) last_tile_dim_replicate}");
    check_reshape(DIMS(1, 1, 32), DIMS(1, 1, 2, 16), "{devices=[2,3,4]<=[24]}",
                  "{devices=[2,3,2,2]<=[24]}");
    check_reshape(DIMS(2, 3, 5), DIMS(3, 5, 2), "{maximal device=7}", "{maximal device=7}");
    check_reshape(DIMS(2, 3, 5), DIMS(3, 5, 2), "{devices=[1,2,1]<=[2]}", NULL);
    check_reshape(DIMS(4, 5, 7), DIMS(20, 7), "{devices=[2,1,1]<=[2]}", "{devices=[2,1]<=[2]}");
    check_reshape(DIMS(16, 7), DIMS(4, 4, 7), "{devices=[2,1]<=[2]}", "{devices=[2,1,1]<=[2]}");
    check_reshape(DIMS(16, 7), DIMS(4, 4, 7), "{devices=[16,1]<=[16]}", "{devices=[4,4,1]<=[16]}");
    check_reshape(DIMS(36), DIMS(6, 6), "{devices=[4]<=[4]}",
                  "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    check_reshape(DIMS(16, 4, 7), DIMS(4, 16, 7), "{devices=[2,1,1]<=[2]}",
                  "{devices=[2,1,1]<=[2]}");
    check_reshape(DIMS(16, 7, 5, 3), DIMS(4, 15, 2, 14), "{devices=[2,1,1,1]<=[2]}",
                  "{devices=[2,1,1,1]<=[2]}");
    check_reshape(DIMS(3, 1, 5, 7), DIMS(3, 5, 1, 7), "{devices=[1,1,2,1]<=[2]}",
                  "{devices=[1,2,1,1]<=[2]}");
    check_reshape(DIMS(8, 16), DIMS(8, 16, 1), "{devices=[2,1]<=[2]}", "{devices=[2,1,1]<=[2]}");
    check_reshape(DIMS(7, 1, 1), DIMS(7, 1, 1), "{devices=[2,1,1]<=[2]}", "{devices=[2,1,1]<=[2]}");
    check_reshape(DIMS(1, 1, 1), 0, NULL, "{devices=[2,1,1]<=[2]}", NULL);
    check_reshape(DIMS(64, 1, 1), DIMS(64, 1), "{devices=[4,1,1]<=[4]}", "{devices=[4,1]<=[4]}");
    check_reshape(DIMS(64, 1), DIMS(64, 1, 1), "{devices=[4,1]<=[4]}", "{devices=[4,1,1]<=[4]}");
    check_reshape(DIMS(64, 1, 1), DIMS(64, 1), "{devices=[4,2,8]<=[64]}",
                  "{devices=[4,2,8]<=[64] last_tile_dim_replicate}");
    check_reshape(DIMS(64, 1), DIMS(64, 1, 1), "{devices=[4,2]<=[8]}", "{devices=[4,2,1]<=[8]}");
    check_reshape(DIMS(4, 2, 1), DIMS(4, 2), "{devices=[4,2,4]<=[32]}",
                  "{devices=[4,2,4]<=[32] last_tile_dim_replicate}");
    check_reshape(DIMS(1, 1, 64), DIMS(1, 64), "{devices=[1,1,4]<=[4]}", "{devices=[1,4]<=[4]}");
    check_reshape(DIMS(1, 64), DIMS(1, 1, 64), "{devices=[1,4]<=[4]}", "{devices=[1,1,4]<=[4]}");
    check_reshape(DIMS(1, 1, 64), DIMS(1, 64), "{devices=[2,1,1]<=[2]}", "{devices=[2,1]<=[2]}");
    check_reshape(DIMS(1, 64), DIMS(1, 1, 64), "{devices=[2,1]<=[2]}", "{devices=[2,1,1]<=[2]}");
    check_reshape(DIMS(6, 2, 5), DIMS(4, 3, 5), "{devices=[2,1,5]<=[10]}",
                  "{devices=[2,1,5]<=[10]}");
    check_reshape(DIMS(2, 3, 5), DIMS(3, 10), "{devices=[1,1,5]<=[5]}", NULL);
    check_reshape(DIMS(2, 3, 5, 7, 11, 13, 17, 19), DIMS(3, 2, 55, 91, 19, 17),
                  "{devices=[1,1,5,1,1,13,1,1]<=[65]}",
                  "{devices=[1,1,5,1,1,1,13]<=[65] last_tile_dim_replicate}");
    check_reshape(DIMS(4), DIMS(2, 2), "{devices=[8]<=[8]}", NULL);
    check_reshape(DIMS(2, 2), DIMS(4), "{devices=[2,4]<=[8]}",
                  "{devices=[4,2]<=[8] last_tile_dim_replicate}");
}

static void check_reshape_partial(int sr, const int64_t *sd, int dr, const int64_t *dd,
                                  const char *in, const char *want) {
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *r;
    assert_int_equal(gs_sharding_reshape_partial(&a, P(&a, in), sr, sd, dr, dd, &r), GS_OK);
    expect_eq(&a, r, want);
    gs_arena_free(&a);
}

static void test_reshape_partial(void **state) {
    (void)state;
    /* XLA's PropagateReshapeSharding* expectations. */
    check_reshape_partial(DIMS(6, 4), DIMS(2, 2, 3, 2), "{devices=[6,1]<=[6]}",
                          "{devices=[2,1,1,1,3]<=[6] last_tile_dim_replicate}");
    check_reshape_partial(DIMS(6, 4), DIMS(4, 6), "{devices=[6,1]<=[6]}",
                          "{devices=[2,1,3]<=[6] last_tile_dim_replicate}");
    check_reshape_partial(DIMS(4, 6, 5), DIMS(2, 2, 2, 5, 3), "{devices=[2,6,1]<=[12]}",
                          "{devices=[2,1,2,1,1,3]<=[12] last_tile_dim_replicate}");
    check_reshape_partial(DIMS(14, 16), DIMS(2, 7, 4, 4), "{devices=[4,8]<=[32]}",
                          "{devices=[1,1,4,2,4]<=[4,8]T(1,0) last_tile_dim_replicate}");
    check_reshape_partial(DIMS(2, 2, 14, 16), DIMS(4, 2, 7, 4, 4), "{devices=[2,2,4,8]<=[128]}",
                          "{devices=[4,1,1,4,2,4]<=[2,2,4,8]T(0,1,3,2) "
                          "last_tile_dim_replicate}");
    /* When the whole reshape works, the result is ReshapeSharding's. */
    check_reshape_partial(DIMS(16, 7), DIMS(4, 4, 7), "{devices=[16,1]<=[16]}",
                          "{devices=[4,4,1]<=[16]}");
}

static void test_partial_replication(void **state) {
    (void)state;
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *r;
    int64_t d1[1] = {1};
    assert_int_equal(gs_sharding_replicate_dims(&a, P(&a, "{devices=[2,3,5]<=[30]}"), 1, d1, &r),
                     GS_OK);
    expect(&a, r, "{devices=[2,1,5,3]<=[2,3,5]T(0,2,1) last_tile_dim_replicate}");
    /* XLA's named-sharding expectations. */
    const char *mesh5 = "{mesh['a'=2,'b'=3,'c'=5,'d'=7,'e'=11] ";
    char src[256], want[256];
    snprintf(src, sizeof src, "%s[{'a'}, {'b'}, {'c'}, {'d'}, {'e'}]}", mesh5);
    snprintf(want, sizeof want, "%s[{'a'}, {}, {'c'}, {}, {'e'}]}", mesh5);
    int64_t d31[2] = {3, 1};
    assert_int_equal(gs_sharding_replicate_dims(&a, P(&a, src), 2, d31, &r), GS_OK);
    expect_eq(&a, r, want);
    /* Remove the (now unsharded) dims 1 and 3. */
    gs_sharding *rm;
    int64_t d13[2] = {1, 3};
    assert_int_equal(gs_sharding_remove_dims(&a, r, 2, d13, &rm), GS_OK);
    snprintf(want, sizeof want, "%s[{'a'}, {'c'}, {'e'}]}", mesh5);
    expect_eq(&a, rm, want);
    /* Reduce = replicate + remove. */
    assert_int_equal(gs_sharding_reduce_dims(&a, P(&a, src), 2, d13, &rm), GS_OK);
    expect_eq(&a, rm, want);
    /* Replicating every sharded dim is {replicated}. */
    int64_t all[2] = {0, 1};
    assert_int_equal(gs_sharding_replicate_dims(&a, P(&a, "{devices=[2,2]<=[4]}"), 2, all, &r),
                     GS_OK);
    expect(&a, r, "{replicated}");
    /* Already partial: the replicated dims join the replication group (sorted). */
    assert_int_equal(gs_sharding_replicate_dims(&a,
                                                P(&a, "{devices=[2,2,2]<=[8] "
                                                      "last_tile_dim_replicate}"),
                                                1, d1, &r),
                     GS_OK);
    expect(&a, r, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
    int64_t keep0 = 0;
    assert_int_equal(gs_sharding_replicate_except(&a, P(&a, "{devices=[2,2]<=[4]}"), 1, &keep0, &r),
                     GS_OK);
    expect(&a, r, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    /* Manual subgroups stay. */
    assert_int_equal(gs_sharding_replicate_dims(&a,
                                                P(&a, "{devices=[2,2,2]<=[8] "
                                                      "last_tile_dims={manual}}"),
                                                1, all, &r),
                     GS_OK);
    expect(&a, r, "{devices=[1,2,2,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}");
    /* Broadcast: XLA's AddShapeDimensions, and an operand dim moved into place. */
    int64_t bd[3] = {0, 1, 4};
    assert_int_equal(gs_sharding_broadcast(&a,
                                           P(&a, "{devices=[2,3,5,11]<=[330] "
                                                 "last_tile_dim_replicate}"),
                                           5, 3, bd, &r),
                     GS_OK);
    expect(&a, r, "{devices=[2,3,1,1,5,11]<=[330] last_tile_dim_replicate}");
    int64_t bd2[2] = {2, 0};
    assert_int_equal(gs_sharding_broadcast(&a, P(&a, "{devices=[2,4]<=[8]}"), 3, 2, bd2, &r),
                     GS_OK);
    expect(&a, r, "{devices=[4,1,2]<=[2,4]T(1,0)}");
    gs_arena_free(&a);
}

/* MergeShardingIfCompatible(to_merge, &dst) with minimum tiles dst.NumTiles()+1. */
static void check_merge(const char *to_merge, const char *dst, const char *want) {
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *m = P(&a, to_merge), *d = P(&a, dst), *r;
    assert_int_equal(gs_sharding_merge_compatible(&a, m, gs_sharding_num_tiles(d) + 1, d, &r),
                     GS_OK);
    if (!want) {
        if (r) fprintf(stderr, "expected no merge, got %s\n", S(&a, r));
        assert_null(r);
    } else {
        if (!r) fprintf(stderr, "expected %s, got no merge\n", want);
        expect_eq(&a, r, want);
    }
    gs_arena_free(&a);
}

static void test_merge(void **state) {
    (void)state;
    /* XLA's MergeShardingIfCompatible1..8 and MergeManualSubgroupSharding. */
    check_merge("{devices=[1,4,2,16]<=[16,8]T(1,0) last_tile_dim_replicate}",
                "{devices=[4,1,1,32]<=[128] last_tile_dim_replicate}",
                "{devices=[4,4,2,4]<=[4,4,8]T(0,2,1) last_tile_dim_replicate}");
    check_merge("{devices=[1,2,4,16]<=[16,8]T(1,0) last_tile_dim_replicate}",
                "{devices=[4,1,1,32]<=[128] last_tile_dim_replicate}",
                "{devices=[4,2,4,4]<=[4,4,8]T(0,2,1) last_tile_dim_replicate}");
    check_merge("{devices=[4,2,1,16]<=[16,8]T(1,0) last_tile_dim_replicate}",
                "{devices=[1,1,4,32]<=[128] last_tile_dim_replicate}",
                "{devices=[4,2,4,4]<=[16,8]T(1,0) last_tile_dim_replicate}");
    check_merge("{devices=[1,4,2,16]<=[16,8]T(1,0) last_tile_dim_replicate}",
                "{devices=[4,1,1,32]<=[4,32]T(1,0) last_tile_dim_replicate}",
                "{devices=[4,4,2,4]<=[4,32]T(1,0) last_tile_dim_replicate}");
    check_merge("{devices=[1,4,2,16]<=[16,8]T(1,0) last_tile_dim_replicate}",
                "{devices=[4,1,1,32]<=[32,4]T(1,0) last_tile_dim_replicate}", NULL);
    check_merge("{devices=[1,4,2,16]<=[128] last_tile_dim_replicate}",
                "{devices=[4,1,1,32]<=[128] last_tile_dim_replicate}", NULL);
    check_merge("{devices=[2,1,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}",
                "{devices=[1,2,1,4]<=[8] last_tile_dim_replicate}",
                "{devices=[2,2,2]<=[2,2,2]T(2,0,1)}");
    check_merge("{devices=[2,1,4]<=[8] last_tile_dim_replicate}",
                "{devices=[1,4,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}",
                "{devices=[2,4]<=[2,2,2]T(0,2,1)}");
    check_merge("{devices=[16,4]<=[64] last_tile_dims={manual, replicated}}",
                "{devices=[16,4]<=[64] last_tile_dims={manual, replicated}}", NULL);
    /* A replicated dst takes to_merge; a maximal to_merge never merges. */
    check_merge("{devices=[2,2]<=[4]}", "{replicated}", "{devices=[2,2]<=[4]}");
    check_merge("{maximal device=0}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", NULL);
    /* Arbitrary device orders go through the element-wise method. */
    check_merge("{devices=[2,1,2]0,3,1,2 last_tile_dim_replicate}",
                "{devices=[1,2,2]0,1,3,2 last_tile_dim_replicate}", "{devices=[2,2]0,3,1,2}");
}

static void test_merge_and_specificity(void **state) {
    (void)state;
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *rep = P(&a, "{replicated}"), *max = P(&a, "{maximal device=0}");
    gs_sharding *t2 = P(&a, "{devices=[2,1]<=[2]}"), *t4 = P(&a, "{devices=[2,2]<=[4]}");
    gs_sharding *man = P(&a, "{manual}");
    assert_true(gs_sharding_more_specific(t4, t2));
    assert_false(gs_sharding_more_specific(t2, t4));
    assert_true(gs_sharding_more_specific(t2, rep));
    assert_true(gs_sharding_more_specific(max, rep));
    assert_false(gs_sharding_more_specific(rep, max));
    assert_false(gs_sharding_more_specific(rep, rep));
    assert_true(gs_sharding_more_specific(man, rep));
    assert_false(gs_sharding_more_specific(man, t2));
    assert_false(gs_sharding_more_specific(t2, man));
    gs_sharding *tu1 = P(&a, "{{replicated}, {devices=[2,1]<=[2]}}");
    gs_sharding *tu2 = P(&a, "{{replicated}, {replicated}}");
    assert_true(gs_sharding_more_specific(tu1, tu2));
    assert_false(gs_sharding_more_specific(tu2, tu1));
    /* MergeSharding: partial shardings combine, else the more specific one wins. */
    gs_sharding *out;
    bool changed;
    assert_int_equal(gs_sharding_merge(&a, P(&a, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
                                       P(&a, "{devices=[1,2,2]<=[2,2]T(1,0) "
                                             "last_tile_dim_replicate}"),
                                       true, &out, &changed),
                     GS_OK);
    assert_true(changed);
    expect(&a, out, "{devices=[2,2]<=[4]}");
    /* Rows {0,1},{2,3} and columns {0,1},{2,3} leave no device for tile (0,1). */
    gs_sharding *m;
    assert_int_equal(gs_sharding_merge_compatible(&a,
                                                  P(&a, "{devices=[2,1,2]<=[4] "
                                                        "last_tile_dim_replicate}"),
                                                  3,
                                                  P(&a, "{devices=[1,2,2]<=[4] "
                                                        "last_tile_dim_replicate}"),
                                                  &m),
                     GS_OK);
    assert_null(m);
    assert_int_equal(gs_sharding_merge(&a, rep, t2, true, &out, &changed), GS_OK);
    assert_true(changed);
    assert_true(out == t2);
    assert_int_equal(gs_sharding_merge(&a, t4, t2, true, &out, &changed), GS_OK);
    assert_false(changed);
    assert_int_equal(gs_sharding_merge(&a, tu2, tu1, false, &out, &changed), GS_OK);
    assert_true(changed);
    assert_int_equal(out->n_tuple, 2);
    gs_arena_free(&a);
}

static void test_partition_spec(void **state) {
    (void)state;
    gs_arena a;
    gs_arena_init(&a);
    gs_mesh m;
    gs_diags d = {0};
    const char *mt = "data=4,model=2";
    assert_int_equal(gs_mesh_parse(&a, mt, strlen(mt), &m, &d, gs_span_none()), GS_OK);
    assert_int_equal(m.n_devices, 8);
    static const struct {
        const char *spec;
        int rank;
        const char *want;
    } cases[] = {
        {"data,model", 2, "{devices=[4,2]<=[8]}"},
        {"model,data", 2, "{devices=[2,4]<=[4,2]T(1,0)}"},
        {"(data,model),None", 2, "{devices=[8,1]<=[8]}"},
        {"(model,data),None", 2, "{devices=[8,1]<=[4,2]T(1,0)}"},
        {"None,model", 2, "{devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}"},
        {"data", 2, "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"},
        {"data,", 3, "{devices=[4,1,1,2]<=[8] last_tile_dim_replicate}"},
        {"", 2, "{replicated}"},
        {"None,None", 2, "{replicated}"},
        {"P('data', None)", 2, "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"},
        {"_, (data)", 2, "{devices=[1,4,2]<=[8] last_tile_dim_replicate}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gs_sharding *s;
        if (gs_sharding_from_spec(&a, &m, cases[i].spec, strlen(cases[i].spec), cases[i].rank, &s,
                                  &d, gs_span_none()) != GS_OK)
            gs_diags_render(&d, stderr);
        expect(&a, s, cases[i].want);
    }
    /* An explicit device order. */
    const char *mo = "x=2,y=2:0,2,1,3";
    assert_int_equal(gs_mesh_parse(&a, mo, strlen(mo), &m, &d, gs_span_none()), GS_OK);
    gs_sharding *s;
    assert_int_equal(gs_sharding_from_spec(&a, &m, "x,y", 3, 2, &s, &d, gs_span_none()), GS_OK);
    expect(&a, s, "{devices=[2,2]<=[2,2]T(1,0)}");
    gs_sb sb = {0};
    gs_mesh_print(&sb, &m);
    assert_string_equal(gs_sb_str(&sb), "x=2,y=2:<=[2,2]T(1,0)");
    gs_sb_free(&sb);
    /* Found by tests/fuzz/fuzz_front: quoted axis names that are not words printed bare, so the
     * printed mesh did not parse back. They print quoted (with " when they hold a '), in the
     * mesh and in named shardings. */
    const char *mq = "'a b'=2,\"it's\"=2,c.d=1";
    assert_int_equal(gs_mesh_parse(&a, mq, strlen(mq), &m, &d, gs_span_none()), GS_OK);
    gs_mesh_print(&sb, &m);
    assert_string_equal(gs_sb_str(&sb), "'a b'=2,\"it's\"=2,c.d=1");
    gs_sb_free(&sb);
    const char *nq = "{mesh['a b'=2,\"it's\"=2] [{\"it's\"}, {'a b'}]}";
    assert_int_equal(gs_sharding_parse(&a, nq, strlen(nq), &s, &d, gs_span_none()), GS_OK);
    assert_string_equal(gs_sharding_to_string(&a, s), nq);
    /* 65,536 devices stay iota. */
    const char *mb = "a=256,b=256";
    assert_int_equal(gs_mesh_parse(&a, mb, strlen(mb), &m, &d, gs_span_none()), GS_OK);
    assert_int_equal(gs_sharding_from_spec(&a, &m, "b,None", 6, 2, &s, &d, gs_span_none()), GS_OK);
    expect(&a, s, "{devices=[256,1,256]<=[256,256]T(1,0) last_tile_dim_replicate}");
    assert_int_equal(d.n, 0);
    gs_diags_free(&d);
    gs_arena_free(&a);
}

static const char *MODULE =
    "HloModule m\n\n"
    "ENTRY e {\n"
    "  data_0 = f32[8,4] parameter(0)\n"
    "  data_1 = f32[8,4] parameter(1)\n"
    "  w = f32[4,6] parameter(2), sharding={replicated}\n"
    "  add = f32[8,4] add(data_0, data_1)\n"
    "  ROOT dot = f32[8,6] dot(add, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "}\n";

/* The canonical text of an instruction's sharding (in m's arena), or NULL. */
static const char *attr_text(gs_module *m, const char *name) {
    gs_instr *in = gs_module_find_instr(m, name);
    assert_non_null(in);
    const gs_sharding *s = gs_instr_get_sharding(in);
    return s ? gs_sharding_to_string(&m->arena, s) : NULL;
}

static void test_apply_to_module(void **state) {
    (void)state;
    gs_source *src = gs_source_from_string("m.hlo", MODULE);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    assert_non_null(m);
    gs_mesh mesh;
    assert_int_equal(gs_mesh_parse(&m->arena, "batch=2,model=2", 15, &mesh, &d, gs_span_none()),
                     GS_OK);
    gs_shard_request reqs[] = {
        {"data_*", "batch,None"},
        {"%w", "None,model"},
        {"dot", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"},
    };
    int n_set = 0;
    assert_int_equal(gs_module_apply_shardings(m, &mesh, 3, reqs, &n_set, &d), GS_OK);
    assert_int_equal(n_set, 4);
    assert_string_equal(attr_text(m, "data_0"), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    assert_string_equal(attr_text(m, "data_1"), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    assert_string_equal(attr_text(m, "w"),
                        "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
    assert_string_equal(attr_text(m, "dot"), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    assert_null(attr_text(m, "add"));
    const gs_sharding *got = gs_instr_get_sharding(gs_module_find_instr(m, "w"));
    expect_eq(&m->arena, got, "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
    assert_null(gs_instr_get_sharding(gs_module_find_instr(m, "add")));
    /* The printed module carries the new attributes and parses back. */
    char *text = gs_module_to_string(m);
    assert_non_null(strstr(text, "sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}"));
    gs_source *src2 = gs_source_from_string("m2.hlo", text);
    gs_module *m2 = gs_parse_module(src2, &d);
    assert_non_null(m2);
    char *text2 = gs_module_to_string(m2);
    assert_string_equal(text, text2);
    free(text);
    free(text2);
    gs_module_free(m2);
    gs_source_free(src2);
    /* Errors name the request. */
    gs_shard_request bad1 = {"nothing*", "batch"};
    assert_int_equal(gs_module_apply_shardings(m, &mesh, 1, &bad1, NULL, &d), GS_ERR);
    assert_string_equal(d.items[d.n - 1].message,
                        "shard request 'nothing*=batch': no instruction matches 'nothing*'");
    gs_shard_request bad2 = {"add", "batch,model,None"};
    assert_int_equal(gs_module_apply_shardings(m, &mesh, 1, &bad2, NULL, &d), GS_ERR);
    assert_string_equal(d.items[d.n - 1].message,
                        "shard request 'add=batch,model,None': the PartitionSpec has 3 entries "
                        "but the tensor has rank 2");
    gs_shard_request bad3 = {"add", "{devices=[4]<=[4]}"};
    assert_int_equal(gs_module_apply_shardings(m, &mesh, 1, &bad3, NULL, &d), GS_ERR);
    assert_string_equal(d.items[d.n - 1].message,
                        "shard request 'add={devices=[4]<=[4]}': the sharding has 1 data dims "
                        "but 'add' has rank 2");
    gs_shard_request bad4 = {"add", "batch"};
    assert_int_equal(gs_module_apply_shardings(m, NULL, 1, &bad4, NULL, &d), GS_ERR);
    assert_string_equal(d.items[d.n - 1].message,
                        "shard request 'add=batch': a PartitionSpec needs a mesh (--mesh "
                        "NAME=SIZE,...)");
    gs_shard_request bad5 = {"add", "{devices=[2,2]<=[4]"};
    assert_int_equal(gs_module_apply_shardings(m, NULL, 1, &bad5, NULL, &d), GS_ERR);
    assert_string_equal(d.items[d.n - 1].message,
                        "shard request 'add={devices=[2,2]<=[4]': unterminated sharding: "
                        "expected '}'");
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
    /* A module that says num_partitions checks the device count. */
    src = gs_source_from_string("n.hlo", "HloModule n, num_partitions=4\n\nENTRY e {\n"
                                         "  ROOT p = f32[8] parameter(0)\n}\n");
    m = gs_parse_module(src, &d);
    assert_non_null(m);
    gs_shard_request ok4 = {"p", "{devices=[4]<=[4]}"}, bad8 = {"p", "{devices=[8]<=[8]}"};
    assert_int_equal(gs_module_apply_shardings(m, NULL, 1, &ok4, NULL, &d), GS_OK);
    assert_int_equal(gs_module_apply_shardings(m, NULL, 1, &bad8, NULL, &d), GS_ERR);
    assert_string_equal(d.items[d.n - 1].message,
                        "shard request 'p={devices=[8]<=[8]}': the sharding of %p spans 8 devices, "
                        "but the program is partitioned for 4 devices");
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

/* Queries on a 65,536-device iota sharding never materialise it (and agree with each other). */
static void test_large_iota(void **state) {
    (void)state;
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *s = P(&a, "{devices=[256,1,256]<=[256,256]T(1,0) last_tile_dim_replicate}");
    assert_true(s->tiles.iota);
    int64_t dims[2] = {1000, 3};
    for (int64_t d = 0; d < 65536; d += 4099) {
        int64_t idx[2];
        assert_true(gs_sharding_tile_index(s, d, idx));
        assert_int_equal(idx[0], d % 256);
        gs_shard_dim sd[2];
        assert_true(gs_sharding_device_shard(s, 2, dims, d, sd));
        assert_int_equal(sd[0].size, 4);
        assert_int_equal(sd[0].offset, (d % 256) * 4 < 1000 ? (d % 256) * 4 : 1000);
    }
    gs_sharding *t;
    int perm[2] = {1, 0};
    assert_int_equal(gs_sharding_transpose(&a, s, 2, perm, &t), GS_OK);
    expect(&a, t, "{devices=[1,256,256]<=[256,256]T(1,0) last_tile_dim_replicate}");
    size_t before = a.total;
    gs_replica_groups *g;
    assert_int_equal(gs_sharding_replica_groups(&a, s, &g), GS_OK);
    assert_true(g->is_iota);
    assert_true(a.total - before < 4096);
    gs_arena_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_print_canonical),
        cmocka_unit_test(test_named),
        cmocka_unit_test(test_equality),
        cmocka_unit_test(test_device_shards),
        cmocka_unit_test(test_queries),
        cmocka_unit_test(test_device_groups),
        cmocka_unit_test(test_tile_transpose),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_reshape_partial),
        cmocka_unit_test(test_partial_replication),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_and_specificity),
        cmocka_unit_test(test_partition_spec),
        cmocka_unit_test(test_apply_to_module),
        cmocka_unit_test(test_large_iota),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
