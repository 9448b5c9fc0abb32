/*
 * test_compile.c — gs_compile, the pipeline as one library call (gspmd/compile.h): what each
 * option does, the pins on parameters the requests set, and that every input a stage would
 * reject is an error from the one call (located, never an assertion).
 */
#include "gspmd/compile.h"
#include "gspmd/text.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

/* A parsed module that keeps its source. */
typedef struct parsed {
    gs_source *src;
    gs_module *m;
} parsed;

static parsed parse(const char *text) {
    parsed p;
    p.src = gs_source_from_string("m.hlo", text);
    assert_non_null(p.src);
    p.m = gs_parse_module(p.src, NULL);
    assert_non_null(p.m);
    return p;
}

static void done(parsed *p) {
    gs_module_free(p->m);
    gs_source_free(p->src);
}

static const char *sharding_of(const gs_module *m, const char *name) {
    const gs_sharding *s = gs_instr_get_sharding(gs_module_find_instr(m, name));
    return s ? gs_sharding_to_string((gs_arena *)&m->arena, s) : "(none)";
}

/* The first error's message contains `want`; its line is `line` (0: no location). */
static void expect_error(const gs_diags *d, const char *want, uint32_t line) {
    assert_true(d->n_errors > 0);
    for (int i = 0; i < d->n; i++) {
        if (d->items[i].severity != GS_SEV_ERROR) continue;
        if (!strstr(d->items[i].message, want)) fail_msg("error '%s'", d->items[i].message);
        if (line) assert_int_equal(d->items[i].span.line, line);
        return;
    }
}

/* Propagation, pins and the program: t and u are pinned by their requests although the header
 * lets propagation change parameters (t's 5 rows split unevenly would otherwise replicate), v
 * is not; the 2-device program takes t's rows as 3 per device. */
static void test_pins_and_program(void **state) {
    (void)state;
    parsed p = parse("HloModule m, num_partitions=2, "
                     "allow_spmd_sharding_propagation_to_parameters={true}\n"
                     "ENTRY e {\n"
                     "  t = f32[5,4] parameter(0)\n"
                     "  u = f32[6,4] parameter(1)\n"
                     "  v = f32[5,4] parameter(2)\n"
                     "  s = f32[6,4] negate(u)\n"
                     "  x = f32[5,4] add(t, v)\n"
                     "  ROOT r = f32[5,4] negate(x)\n"
                     "}\n");
    gs_mesh mesh;
    gs_diags d = {0};
    assert_int_equal(gs_mesh_parse(&p.m->arena, "b=2", 3, &mesh, &d, gs_span_none()), GS_OK);
    gs_shard_request reqs[] = {{"t", "b,None"}, {"u", "b,None"}};
    gs_compile_options o;
    gs_compile_options_init(&o, 2);
    assert_true(o.propagate.is_spmd);
    o.mesh = &mesh;
    o.n_requests = 2;
    o.requests = reqs;
    gs_compiled c;
    assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_OK);
    assert_int_equal(c.n_set, 2);
    assert_string_equal(sharding_of(p.m, "t"), "{devices=[2,1]<=[2]}");
    assert_string_equal(sharding_of(p.m, "u"), "{devices=[2,1]<=[2]}");
    assert_string_equal(sharding_of(p.m, "v"), "{replicated}");
    assert_non_null(c.program);
    assert_int_equal(c.program->num_partitions, 2);
    const gs_instr *t = c.program->entry->params[0];
    assert_int_equal(t->shape->dims[0], 3);
    assert_null(c.info);
    gs_compiled_free(&c);
    assert_null(c.program);
    gs_diags_free(&d);
    done(&p);
}

#define SHARDED                                                                            \
    "HloModule m\n"                                                                          \
    "ENTRY e {\n"                                                                            \
    "  x = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}\n"                           \
    "  y = f32[8,4] negate(x)\n"                                                             \
    "  ROOT z = f32[8,4] add(x, y)\n"                                                        \
    "}\n"

/* no_propagate: y stays without a sharding (partitioned replicated); propagating gives it x's.
 * no_partition stops after propagation with provenance when asked. */
static void test_propagate_or_not(void **state) {
    (void)state;
    gs_compile_options o;
    gs_compiled c;
    gs_diags d = {0};
    parsed p = parse(SHARDED);
    gs_compile_options_init(&o, 2);
    o.no_propagate = true;
    assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_OK);
    assert_string_equal(sharding_of(p.m, "y"), "(none)");
    assert_int_equal(gs_module_find_instr(c.program, "y")->shape->dims[0], 8);
    gs_compiled_free(&c);
    done(&p);

    p = parse(SHARDED);
    gs_compile_options_init(&o, 2);
    assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_OK);
    assert_string_equal(sharding_of(p.m, "y"), "{devices=[2,1]<=[2]}");
    assert_int_equal(gs_module_find_instr(c.program, "y")->shape->dims[0], 4);
    gs_compiled_free(&c);
    done(&p);

    p = parse(SHARDED);
    gs_compile_options_init(&o, 0); /* the device count is not read without partitioning */
    o.no_partition = true;
    o.keep_provenance = true;
    assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_OK);
    assert_null(c.program);
    assert_non_null(c.info);
    gs_sb sb = {0};
    assert_int_equal(gs_propagate_explain(c.info, "y", &sb, &d), GS_OK);
    assert_non_null(strstr(gs_sb_str(&sb), "x"));
    gs_sb_free(&sb);
    gs_compiled_free(&c);
    assert_int_equal(d.n_errors, 0);
    gs_diags_free(&d);
    done(&p);
}

/* Each input a stage rejects is an error of the one call, at the instruction's line. */
static void test_errors(void **state) {
    (void)state;
    static const struct {
        const char *text;
        int64_t n;
        const char *want;
        uint32_t line;
    } cases[] = {
        {"HloModule m\nENTRY e {\n  x = f32[8,4] parameter(0)\n  ROOT y = f32[8,5] negate(x)\n}\n",
         2, "", 4},
        {"HloModule m\nENTRY e {\n  x = f32[8,4] parameter(0)\n  y = f32[8,?] negate(x)\n"
         "  ROOT z = f32[8,4] copy(y)\n}\n",
         2, "partitioning needs every dimension's size", 4},
        {"HloModule m\nENTRY e {\n  x = f32[6,4] parameter(0), sharding={devices=[3,1]<=[3]}\n"
         "  ROOT y = f32[6,4] negate(x)\n}\n",
         2, "spans 3 devices", 3},
        {SHARDED, 0, "the number of devices must be in 1..", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        parsed p = parse(cases[i].text);
        gs_compile_options o;
        gs_compile_options_init(&o, cases[i].n);
        gs_compiled c;
        gs_diags d = {0};
        assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_ERR);
        assert_null(c.program);
        expect_error(&d, cases[i].want, cases[i].line);
        gs_diags_free(&d);
        done(&p);
    }
    /* A request naming nothing, and requests on an already partitioned program. */
    parsed p = parse(SHARDED);
    gs_shard_request bad = {"nothing", "{replicated}"};
    gs_compile_options o;
    gs_compile_options_init(&o, 2);
    o.n_requests = 1;
    o.requests = &bad;
    gs_compiled c;
    gs_diags d = {0};
    assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_ERR);
    expect_error(&d, "shard request 'nothing={replicated}'", 0);
    gs_diags_free(&d);
    o.spmd_input = true;
    assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_ERR);
    expect_error(&d, "already partitioned", 0);
    gs_diags_free(&d);
    done(&p);
}

/* runnable: a program with an op the runtime cannot run is an error naming it; spmd_input
 * checks the program's collectives against the device count. */
static void test_runnable(void **state) {
    (void)state;
    parsed p = parse("HloModule m\nENTRY e {\n  tok = token[] after-all()\n"
                     "  inf = (f32[4], u32[], token[]) recv(tok), channel_id=1\n"
                     "  ROOT g = f32[4] get-tuple-element(inf), index=0\n}\n");
    gs_compile_options o;
    gs_compile_options_init(&o, 2);
    gs_compiled c;
    gs_diags d = {0};
    assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_OK);
    gs_compiled_free(&c);
    o.runnable = true;
    assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_ERR);
    expect_error(&d, "which the runtime cannot run", 0);
    gs_diags_free(&d);
    done(&p);

    p = parse("HloModule m, num_partitions=2\nENTRY e {\n  x = f32[4] parameter(0)\n"
              "  ROOT y = f32[4] collective-permute(x), channel_id=1,\n"
              "      source_target_pairs={{0,1},{1,0}}\n}\n");
    gs_compile_options_init(&o, 2);
    o.spmd_input = true;
    o.runnable = true;
    assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_OK);
    gs_compile_options_init(&o, 4);
    o.spmd_input = true;
    o.runnable = true;
    assert_int_equal(gs_compile(p.m, &o, &c, &d), GS_ERR);
    expect_error(&d, "num_partitions=2", 0);
    gs_diags_free(&d);
    done(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pins_and_program),
        cmocka_unit_test(test_propagate_or_not),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_runnable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
