/*
 * test_propagate.c — the propagation pass through its API: shardings reaching every instruction,
 * options (SPMD mode, propagation to the entry's outputs and parameters, module header
 * defaults), determinism, bad input with exact located messages, `explain` output, the sharding
 * arithmetic the pass adds (carrying tiles along dims, XLA's documented example), and fault
 * injection: every allocation of the module arena during the pass may fail, giving a clean
 * "out of memory" error, never a crash or a leak.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gspmd/propagate.h"
#include "gspmd/sharding.h"
#include "gspmd/text.h"
#include "propagate/internal.h"

/* A parsed module with the source it points into. */
typedef struct loaded {
    gs_source *src;
    gs_module *m;
} loaded;

static loaded load(const char *text) {
    loaded l;
    l.src = gs_source_from_string("t.hlo", text);
    gs_diags d = {0};
    l.m = gs_parse_module(l.src, &d);
    if (!l.m) gs_diags_render(&d, stderr);
    assert_non_null(l.m);
    gs_diags_free(&d);
    return l;
}

static void unload(loaded *l) {
    gs_module_free(l->m);
    gs_source_free(l->src);
}

/* The canonical text of an instruction's sharding ("none" without one), in a static buffer. */
static const char *sharding_of(const gs_module *m, const char *name) {
    static char buf[512];
    gs_instr *in = gs_module_find_instr(m, name);
    assert_non_null(in);
    const gs_sharding *s = gs_instr_get_sharding(in);
    if (!s) return "none";
    gs_sb sb = {0};
    gs_sharding_print(&sb, s);
    snprintf(buf, sizeof buf, "%s", gs_sb_str(&sb));
    gs_sb_free(&sb);
    return buf;
}

static const char *CHAIN =
    "HloModule m\n"
    "\n"
    "ENTRY %e {\n"
    "  %p = f32[8,16] parameter(0), sharding={devices=[2,1]<=[2]}\n"
    "  %q = f32[16,4] parameter(1)\n"
    "  %a = f32[8,16] negate(%p)\n"
    "  %d = f32[8,4] dot(%a, %q), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %t = f32[4,8] transpose(%d), dimensions={1,0}\n"
    "  ROOT %r = f32[4,8] copy(%t)\n"
    "}\n";

static void test_forward_chain(void **state) {
    (void)state;
    loaded l = load(CHAIN);
    gs_diags d = {0};
    assert_int_equal(gs_propagate(l.m, NULL, &d), GS_OK);
    assert_int_equal(d.n_errors, 0);
    assert_string_equal(sharding_of(l.m, "a"), "{devices=[2,1]<=[2]}");
    assert_string_equal(sharding_of(l.m, "d"), "{devices=[2,1]<=[2]}");
    assert_string_equal(sharding_of(l.m, "t"), "{devices=[1,2]<=[2]}");
    /* The entry root is closed to propagation by default; so are parameters. */
    assert_string_equal(sharding_of(l.m, "r"), "none");
    assert_string_equal(sharding_of(l.m, "q"), "none");
    gs_diags_free(&d);
    unload(&l);
}

static void test_output_and_parameters(void **state) {
    (void)state;
    loaded l = load(CHAIN);
    gs_diags d = {0};
    gs_propagate_options o;
    memset(&o, 0, sizeof o);
    bool yes = true;
    o.is_spmd = true;
    o.n_to_output = 1;
    o.to_output = &yes;
    o.n_to_parameters = 1;
    o.to_parameters = &yes;
    assert_int_equal(gs_propagate(l.m, &o, &d), GS_OK);
    assert_string_equal(sharding_of(l.m, "r"), "{devices=[1,2]<=[2]}");
    assert_string_equal(sharding_of(l.m, "q"), "{replicated}");
    gs_diags_free(&d);
    unload(&l);
}

static void test_header_defaults(void **state) {
    (void)state;
    loaded l = load("HloModule m, allow_spmd_sharding_propagation_to_output={true}\n"
                    "\n"
                    "ENTRY %e {\n"
                    "  %p = f32[8] parameter(0), sharding={devices=[2]<=[2]}\n"
                    "  ROOT %r = f32[8] negate(%p)\n"
                    "}\n");
    gs_diags d = {0};
    gs_propagate_options o;
    memset(&o, 0, sizeof o);
    o.is_spmd = true;
    assert_int_equal(gs_propagate(l.m, &o, &d), GS_OK);
    assert_string_equal(sharding_of(l.m, "r"), "{devices=[2]<=[2]}");
    gs_diags_free(&d);
    unload(&l);
}

static void test_deterministic(void **state) {
    (void)state;
    char *first = NULL;
    for (int run = 0; run < 3; run++) {
        loaded l = load(CHAIN);
        gs_diags d = {0};
        gs_propagate_options o;
        memset(&o, 0, sizeof o);
        o.is_spmd = true;
        assert_int_equal(gs_propagate(l.m, &o, &d), GS_OK);
        char *text = gs_module_to_string(l.m);
        assert_non_null(text);
        if (!first)
            first = text;
        else {
            assert_string_equal(first, text);
            free(text);
        }
        gs_diags_free(&d);
        unload(&l);
    }
    free(first);
}

/* One bad module and the exact error the pass gives (line and column of its span). */
typedef struct bad_case {
    const char *text;    /* the module */
    bool spmd;           /* run in SPMD mode */
    const char *message; /* the error */
    uint32_t line;       /* where it points */
} bad_case;

static void test_bad_input(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"HloModule m\n\nENTRY %e {\n"
         "  %p = f32[8,4] parameter(0), sharding={devices=[2,1,1]<=[2]}\n"
         "  ROOT %r = f32[8,4] negate(%p)\n}\n",
         false, "the sharding of 'p' has 3 tile dims but the instruction has rank 2", 4},
        {"HloModule m, num_partitions=8\n\nENTRY %e {\n"
         "  %p = f32[8,4] parameter(0), sharding={devices=[2,2]<=[4]}\n"
         "  ROOT %r = f32[8,4] negate(%p)\n}\n",
         false, "the sharding of %p spans 4 devices, but the program is partitioned for 8 devices",
         4},
        {"HloModule m, num_partitions=2\n\nENTRY %e {\n"
         "  %p = f32[8,4] parameter(0), sharding={maximal device=3}\n"
         "  ROOT %r = f32[8,4] negate(%p)\n}\n",
         false,
         "the sharding of %p puts it on device 3, but the program is partitioned for 2 devices", 4},
        {"HloModule m\n\nENTRY %e {\n"
         "  %p = (f32[8], f32[4]) parameter(0), sharding={{replicated}}\n"
         "  ROOT %r = f32[8] get-tuple-element(%p), index=0\n}\n",
         false, "the tuple sharding of 'p' has 1 elements but its shape has 2 leaves", 4},
        {"HloModule m\n\nENTRY %e {\n"
         "  %p = f32[8,4] parameter(0)\n"
         "  %x = f32[8,4] negate(%p)\n"
         "  %xs = f32[8,4] custom-call(%x), custom_call_target=\"Sharding\", "
         "sharding={unknown shard_as 1}\n"
         "  %q = f32[4,8] parameter(1)\n"
         "  %y = f32[4,8] negate(%q)\n"
         "  %ys = f32[4,8] custom-call(%y), custom_call_target=\"Sharding\", "
         "sharding={unknown shard_as 1}\n"
         "  ROOT %t = (f32[8,4], f32[4,8]) tuple(%xs, %ys)\n}\n",
         true,
         "'x' (f32[8,4]) is in shard_as group 1 with 'y' of shape f32[4,8]: members of a group "
         "must have the same dims",
         5},
        {"HloModule m\n\nENTRY %e {\n"
         "  %p = f32[8,4] parameter(0)\n"
         "  %a = f32[8,4] custom-call(%p), custom_call_target=\"Sharding\"\n"
         "  ROOT %r = f32[8,4] negate(%a)\n}\n",
         true, "the Sharding custom-call 'a' has no sharding attribute", 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        loaded l = load(cases[i].text);
        gs_diags d = {0};
        gs_propagate_options o;
        memset(&o, 0, sizeof o);
        o.is_spmd = cases[i].spmd;
        assert_int_equal(gs_propagate(l.m, &o, &d), GS_ERR);
        assert_true(d.n_errors >= 1);
        if (strcmp(d.items[0].message, cases[i].message) != 0)
            fprintf(stderr, "case %zu:\n  got:  %s\n  want: %s\n", i, d.items[0].message,
                    cases[i].message);
        assert_string_equal(d.items[0].message, cases[i].message);
        assert_int_equal(d.items[0].span.line, cases[i].line);
        gs_diags_free(&d);
        unload(&l);
    }
}

static void test_bad_vectors(void **state) {
    (void)state;
    loaded l = load(CHAIN);
    gs_diags d = {0};
    gs_propagate_options o;
    memset(&o, 0, sizeof o);
    bool v[3] = {true, false, true};
    o.n_to_parameters = 3;
    o.to_parameters = v;
    assert_int_equal(gs_propagate(l.m, &o, &d), GS_ERR);
    assert_string_equal(d.items[0].message,
                        "--propagate-to-parameters has 3 values but the entry computation has 2 "
                        "parameters");
    gs_diags_free(&d);
    unload(&l);
}

/* A loop and its body root annotated differently: XLA's resolution (the loop's wins, here the
 * first related instruction found), with a warning naming both. */
static void test_conflicting_loop_annotations(void **state) {
    (void)state;
    loaded l = load("HloModule m\n\n"
                    "%c {\n  %cp = f32[8] parameter(0)\n  ROOT %t = pred[] constant(false)\n}\n\n"
                    "%b {\n  %bp = f32[8] parameter(0)\n"
                    "  ROOT %br = f32[8] negate(%bp), sharding={devices=[2]<=[2]}\n}\n\n"
                    "ENTRY %e {\n  %p = f32[8] parameter(0)\n"
                    "  %w = f32[8] while(%p), condition=%c, body=%b, sharding={replicated}\n"
                    "  ROOT %r = f32[8] copy(%w)\n}\n");
    gs_diags d = {0};
    gs_propagate_options o;
    memset(&o, 0, sizeof o);
    o.is_spmd = true;
    assert_int_equal(gs_propagate(l.m, &o, &d), GS_OK);
    assert_int_equal(d.n_errors, 0);
    assert_true(d.n >= 1);
    assert_int_equal(d.items[0].severity, GS_SEV_WARNING);
    assert_string_equal(d.items[0].message,
                        "the sharding of 'br' conflicts with that of 'w', which must be the same; "
                        "using the latter's (as XLA does)");
    assert_string_equal(sharding_of(l.m, "br"), "{replicated}");
    assert_string_equal(sharding_of(l.m, "bp"), "{replicated}");
    gs_diags_free(&d);
    unload(&l);
}

static void test_explain(void **state) {
    (void)state;
    loaded l = load(CHAIN);
    gs_diags d = {0};
    gs_propagate_info *info = NULL;
    assert_int_equal(gs_propagate_ex(l.m, NULL, &info, &d), GS_OK);
    assert_non_null(info);
    gs_sb sb = {0};
    assert_int_equal(gs_propagate_explain(info, "%t", &sb, &d), GS_OK);
    assert_string_equal(
        gs_sb_str(&sb),
        "'t': {devices=[1,2]<=[2]}\n"
        "chain:\n"
        "  't' {devices=[1,2]<=[2]}  forward from 'd' by transpose at aggressiveness 1\n"
        "  'd' {devices=[2,1]<=[2]}  forward from 'a' by dot at aggressiveness 1\n"
        "  'a' {devices=[2,1]<=[2]}  forward from 'p' by elementwise at aggressiveness 0\n"
        "  'p' {devices=[2,1]<=[2]}  annotation (sharding attribute)\n");
    gs_sb_free(&sb);
    gs_sb sb2 = {0};
    assert_int_equal(gs_propagate_explain(info, "r", &sb2, &d), GS_OK);
    assert_string_equal(gs_sb_str(&sb2), "'r': no sharding (no annotation reaches it)\n");
    gs_sb_free(&sb2);
    assert_int_equal(gs_propagate_explain(info, "nope", &sb2, &d), GS_ERR);
    assert_string_equal(d.items[d.n - 1].message, "no instruction named 'nope'");
    gs_sb_free(&sb2);
    gs_propagate_info_free(info);
    gs_diags_free(&d);
    unload(&l);
}

/* XLA's documented example of PropagateShardingAlongDimsAndReplicateOthers. */
static void test_along_dims(void **state) {
    (void)state;
    gs_prop_ctx c;
    memset(&c, 0, sizeof c);
    gs_arena a;
    gs_arena_init(&a);
    c.a = &a;
    const char *text = "{devices=[2,3,5,7,11]<=[2310]}";
    gs_sharding *s;
    gs_diags d = {0};
    assert_int_equal(gs_sharding_parse(&a, text, strlen(text), &s, &d, gs_span_none()), GS_OK);
    int64_t src[3] = {2, 4, 1}, tgt[3] = {2, 1, 3};
    const gs_sharding *r = gs_prop_along_dims(&c, s, 3, src, tgt, 5);
    assert_non_null(r);
    char *got = gs_sharding_to_string(&a, r);
    assert_string_equal(got,
                        "{devices=[1,11,5,3,1,14]<=[2,3,5,7,11]T(4,2,1,0,3) "
                        "last_tile_dim_replicate}");
    /* Dropping a dim keeps the others' tiles; a sharded dropped dim has no sharding. */
    int64_t s2t[3] = {1, -1, 0}, t2s[2] = {2, 0};
    const char *t3 = "{devices=[2,1,3]<=[6]}";
    assert_int_equal(gs_sharding_parse(&a, t3, strlen(t3), &s, &d, gs_span_none()), GS_OK);
    r = gs_prop_transpose_collapsed(&c, s, 3, s2t, 2, t2s);
    assert_non_null(r);
    assert_string_equal(gs_sharding_to_string(&a, r), "{devices=[3,2]<=[2,3]T(1,0)}");
    const char *t4 = "{devices=[2,2,3]<=[12]}";
    assert_int_equal(gs_sharding_parse(&a, t4, strlen(t4), &s, &d, gs_span_none()), GS_OK);
    assert_null(gs_prop_transpose_collapsed(&c, s, 3, s2t, 2, t2s));
    assert_false(c.oom);
    gs_diags_free(&d);
    gs_arena_free(&a);
}

/* Large device counts stay in iota form and cost nothing more. */
static void test_many_devices(void **state) {
    (void)state;
    loaded l = load("HloModule m\n\nENTRY %e {\n"
                    "  %p = f32[65536,256] parameter(0), sharding={devices=[256,256]<=[65536]}\n"
                    "  %a = f32[65536,256] negate(%p)\n"
                    "  %t = f32[256,65536] transpose(%a), dimensions={1,0}\n"
                    "  %r = f32[256,256,256] reshape(%t)\n"
                    "  ROOT %c = f32[256,256,256] copy(%r)\n}\n");
    gs_diags d = {0};
    gs_propagate_options o;
    memset(&o, 0, sizeof o);
    o.is_spmd = true;
    assert_int_equal(gs_propagate(l.m, &o, &d), GS_OK);
    assert_string_equal(sharding_of(l.m, "t"), "{devices=[256,256]<=[256,256]T(1,0)}");
    assert_string_equal(sharding_of(l.m, "r"), "{devices=[256,256,1]<=[256,256]T(1,0)}");
    gs_diags_free(&d);
    unload(&l);
}

static const char *RICH =
    "HloModule m\n"
    "\n"
    "%cond {\n"
    "  %cp = (s32[], f32[8,4]) parameter(0)\n"
    "  %i = s32[] get-tuple-element(%cp), index=0\n"
    "  %n = s32[] constant(4)\n"
    "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n"
    "}\n"
    "\n"
    "%body {\n"
    "  %bp = (s32[], f32[8,4]) parameter(0)\n"
    "  %i = s32[] get-tuple-element(%bp), index=0\n"
    "  %x = f32[8,4] get-tuple-element(%bp), index=1\n"
    "  %y = f32[8,4] negate(%x)\n"
    "  ROOT %br = (s32[], f32[8,4]) tuple(%i, %y)\n"
    "}\n"
    "\n"
    "ENTRY %e {\n"
    "  %p = f32[8,4] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
    "  %q = f32[8,4] parameter(1)\n"
    "  %s = f32[8,4] custom-call(%q), custom_call_target=\"Sharding\", "
    "backend_config=\"unspecified_dims=[0]\", sharding={devices=[1,2,2]<=[4] "
    "last_tile_dim_replicate}\n"
    "  %a = f32[8,4] add(%p, %s)\n"
    "  %z = s32[] constant(0)\n"
    "  %init = (s32[], f32[8,4]) tuple(%z, %a)\n"
    "  %w = (s32[], f32[8,4]) while(%init), condition=%cond, body=%body\n"
    "  ROOT %r = f32[8,4] get-tuple-element(%w), index=1\n"
    "}\n";

/* Every allocation from the module arena during the pass may fail: a clean error. */
static void test_fault_injection(void **state) {
    (void)state;
    int ok = 0, failed = 0;
    for (long k = 1; k < 4000; k++) {
        loaded l = load(RICH);
        gs_diags d = {0};
        gs_propagate_options o;
        memset(&o, 0, sizeof o);
        o.is_spmd = true;
        o.record_provenance = true;
        l.m->arena.fail_at = l.m->arena.n_allocs + k;
        gs_status st = gs_propagate(l.m, &o, &d);
        if (st == GS_OK) {
            ok++;
        } else {
            failed++;
            assert_true(d.n_errors >= 1);
            assert_non_null(strstr(d.items[d.n - 1].message, "out of memory"));
        }
        bool done = st == GS_OK && !l.m->arena.failed;
        gs_diags_free(&d);
        unload(&l);
        if (done) break;
    }
    assert_true(failed > 10);
    assert_true(ok >= 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_chain),   cmocka_unit_test(test_output_and_parameters),
        cmocka_unit_test(test_header_defaults), cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_bad_input),       cmocka_unit_test(test_bad_vectors),
        cmocka_unit_test(test_explain),         cmocka_unit_test(test_along_dims),
        cmocka_unit_test(test_conflicting_loop_annotations),
        cmocka_unit_test(test_many_devices),    cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
