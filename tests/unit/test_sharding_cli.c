/*
 * test_sharding_cli.c — `gspmd show-sharding` and the shared --mesh / --shard options, run
 * in-process (the test links the CLI library) with stdout and stderr captured:
 * exit codes (0 ok, 1 bad input with `error:`, 2 usage), the exact terminal grid, the JSON
 * layout, SVG output, PartitionSpecs over a mesh, and applying --shard requests to a module.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gspmd/text.h"

/* Output of one in-process run. */
typedef struct run_result {
    int rc;    /* exit code */
    char *out; /* stdout (malloc'd) */
    char *err; /* stderr (malloc'd) */
} run_result;

static char *slurp(FILE *f) {
    fflush(f);
    long n = ftell(f);
    char *buf = malloc((size_t)n + 1);
    rewind(f);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    return buf;
}

/* Runs gs_cli_show_sharding (argv NULL-terminated) capturing its output. */
static run_result run(const char *const *args) {
    char *argv[32];
    int argc = 0;
    argv[argc++] = "show-sharding";
    for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    FILE *fo = tmpfile(), *fe = tmpfile();
    fflush(stdout);
    fflush(stderr);
    int so = dup(STDOUT_FILENO), se = dup(STDERR_FILENO);
    dup2(fileno(fo), STDOUT_FILENO);
    dup2(fileno(fe), STDERR_FILENO);
    run_result r;
    r.rc = gs_cli_show_sharding(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, STDOUT_FILENO);
    dup2(se, STDERR_FILENO);
    close(so);
    close(se);
    fseek(fo, 0, SEEK_END);
    fseek(fe, 0, SEEK_END);
    r.out = slurp(fo);
    r.err = slurp(fe);
    fclose(fo);
    fclose(fe);
    return r;
}

static void done(run_result *r) {
    free(r->out);
    free(r->err);
}

#define RUN(...) run((const char *const[]){__VA_ARGS__, NULL})

static void test_usage_and_errors(void **state) {
    (void)state;
    run_result r = RUN("--help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "usage: gspmd show-sharding SHARDING --shape SHAPE"));
    done(&r);
    r = run((const char *const[]){NULL});
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "missing SHARDING"));
    done(&r);
    r = RUN("{replicated}");
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "missing --shape SHAPE"));
    done(&r);
    r = RUN("{replicated}", "--shape", "f32[2]", "--bogus");
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "unknown option '--bogus'"));
    done(&r);
    r = RUN("{replicated}", "--shape", "f32[2]", "--devices", "0");
    assert_int_equal(r.rc, 2);
    done(&r);
    /* Bad input: a located error with the argument and a caret. */
    r = RUN("{devices=[2,2]0,1,2}", "--shape", "f32[4,4]");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.err, "SHARDING:1:15: error: devices=[2,2] needs 4 device ids, found 3\n"
                               "{devices=[2,2]0,1,2}\n"
                               "              ^\n");
    assert_string_equal(r.out, "");
    done(&r);
    r = RUN("{devices=[2,2]<=[4]}", "--shape", "f32[5]");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.err, "error: the sharding has 2 data dims but the shape f32[5] has "
                               "rank 1\n");
    done(&r);
    r = RUN("{replicated}", "--shape", "f33[5]");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "--shape:1:1: error: unknown element type 'f33'"));
    done(&r);
    r = RUN("{replicated}", "--shape", "f32[5,x]");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "--shape:1:7: error: expected a dimension size, found 'x'"));
    done(&r);
    r = RUN("data", "--shape", "f32[5]");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "error: expected XLA sharding text '{...}', or a "
                                  "PartitionSpec with --mesh"));
    done(&r);
    r = RUN("data,data", "--mesh", "data=2", "--shape", "f32[4,4]");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "SHARDING:1:6: error: mesh axis 'data' is used twice in the "
                                  "PartitionSpec"));
    done(&r);
    r = RUN("data", "--mesh", "data=2,data=2", "--shape", "f32[4,4]");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "--mesh:1:8: error: mesh axis 'data' is defined twice"));
    done(&r);
    r = RUN("{devices=[4]<=[4]}", "--mesh", "data=2", "--shape", "f32[4]");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.err, "error: the sharding uses 4 devices but the mesh has 2\n");
    done(&r);
    r = RUN("{devices=[4]<=[4]}", "--devices", "8", "--shape", "f32[4]");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.err, "error: the sharding uses 4 devices but --devices says 8\n");
    done(&r);
    r = RUN("{{replicated}}", "--shape", "f32[4]");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "error: show-sharding draws one array"));
    done(&r);
}

static void test_grid(void **state) {
    (void)state;
    run_result r = RUN("{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}", "--shape",
                       "f32[5,7]", "--no-color");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out,
                        "{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}  f32[5,7]\n"
                        "┌─────┬─────┐\n"
                        "│ 0,4 │ 2,6 │ 0:3\n"
                        "├─────┼─────┤\n"
                        "│ 1,5 │ 3,7 │ 3:5\n"
                        "└─────┴─────┘\n"
                        "  0:4   4:7\n");
    done(&r);
    r = RUN("{devices=[4]<=[4]}", "--shape", "[5]");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "{devices=[4]<=[4]}  f32[5]\n"
                               "┌─────┬─────┬─────┬─────┐\n"
                               "│  0  │  1  │  2  │  3  │\n"
                               "└─────┴─────┴─────┴─────┘\n"
                               "  0:2   2:4   4:5   5:5\n");
    done(&r);
    /* Rank 3: one grid per leading tile. */
    r = RUN("{devices=[2,1,2,2]<=[8] last_tile_dim_replicate}", "--shape", "bf16[4,3,10]");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "[0:2, :, :]\n"));
    assert_non_null(strstr(r.out, "[2:4, :, :]\n"));
    assert_non_null(strstr(r.out, "│ 4,5 │ 6,7 │ 0:3\n"));
    done(&r);
    /* PartitionSpec over a mesh; colour on request. */
    r = RUN("data,None", "--mesh", "data=2,model=4", "--shape", "f32[6,4]", "--color");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}  f32[6,4]"));
    assert_non_null(strstr(r.out, "\x1b[48;5;"));
    assert_non_null(strstr(r.out, "0-3"));
    assert_non_null(strstr(r.out, "4-7"));
    done(&r);
    r = RUN("{replicated}", "--shape", "f32[3]", "--devices", "8", "--no-color");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "│ 0-7 │"));
    done(&r);
}

static void test_json_and_svg(void **state) {
    (void)state;
    run_result r = RUN("{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}", "--shape",
                       "f32[5,7]", "--json");
    assert_int_equal(r.rc, 0);
    cJSON *j = cJSON_Parse(r.out);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "sharding")->valuestring,
                        "{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}");
    assert_string_equal(cJSON_GetObjectItem(j, "shape")->valuestring, "f32[5,7]");
    assert_int_equal(cJSON_GetObjectItem(j, "num_devices")->valueint, 8);
    cJSON *devs = cJSON_GetObjectItem(j, "devices");
    assert_int_equal(cJSON_GetArraySize(devs), 8);
    cJSON *d5 = cJSON_GetArrayItem(devs, 5);
    assert_int_equal(cJSON_GetObjectItem(d5, "device")->valueint, 5);
    char *t = cJSON_PrintUnformatted(d5);
    assert_string_equal(t, "{\"device\":5,\"tile\":[1,0],\"offset\":[3,0],\"shard_shape\":[3,4],"
                           "\"valid\":[2,4]}");
    free(t);
    cJSON_Delete(j);
    done(&r);
    char path[] = "/tmp/gspmd_svg_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    r = RUN("{devices=[2,2]<=[4]}", "--shape", "f32[4,4]", "--svg", path, "--no-color");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "┌"));
    FILE *f = fopen(path, "r");
    char buf[256] = "";
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_true(strncmp(buf, "<svg ", 5) == 0);
    unlink(path);
    done(&r);
    r = RUN("{devices=[2,2]<=[4]}", "--shape", "f32[4,4]", "--svg", "/nonexistent/dir/x.svg");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "error: cannot write '/nonexistent/dir/x.svg'"));
    done(&r);
}

static const char *MODULE = "HloModule m\n\n"
                            "ENTRY e {\n"
                            "  data_0 = f32[8,4] parameter(0)\n"
                            "  data_1 = f32[8,4] parameter(1)\n"
                            "  ROOT add = f32[8,4] add(data_0, data_1)\n"
                            "}\n";

static void test_shard_options(void **state) {
    (void)state;
    char *argv[] = {"cmd",   "--mesh",  "batch=2,model=2",          "--shard=data_*=batch,None",
                    "x.hlo", "--shard", "add={devices=[1,4]<=[4]}", "--shard",
                    "bad",   NULL};
    int argc = 9;
    gs_cli_shardings o = {0};
    int i = 1;
    assert_int_equal(gs_cli_sharding_option(argc, argv, &i, &o), 1);
    assert_int_equal(i, 2);
    i = 3;
    assert_int_equal(gs_cli_sharding_option(argc, argv, &i, &o), 1);
    i = 4;
    assert_int_equal(gs_cli_sharding_option(argc, argv, &i, &o), 0);
    i = 5;
    assert_int_equal(gs_cli_sharding_option(argc, argv, &i, &o), 1);
    assert_int_equal(i, 6);
    assert_string_equal(o.mesh, "batch=2,model=2");
    assert_int_equal(o.n, 2);
    i = 7;
    FILE *fe = tmpfile();
    int se = dup(STDERR_FILENO);
    dup2(fileno(fe), STDERR_FILENO);
    int bad = gs_cli_sharding_option(argc, argv, &i, &o);
    dup2(se, STDERR_FILENO);
    close(se);
    fclose(fe);
    assert_int_equal(bad, -1);
    gs_source *src = gs_source_from_string("m.hlo", MODULE);
    gs_module *m = gs_parse_module(src, NULL);
    assert_non_null(m);
    gs_compile_options co;
    gs_compile_options_init(&co, 4);
    co.no_propagate = true;
    co.no_partition = true;
    gs_mesh mesh;
    assert_int_equal(gs_cli_sharding_requests(&o, &m->arena, &mesh, &co), 0);
    assert_int_equal(co.n_requests, 2);
    assert_string_equal(co.requests[0].pattern, "data_*");
    assert_string_equal(co.requests[0].spec, "batch,None");
    gs_compiled out;
    assert_int_equal(gs_compile(m, &co, &out, NULL), GS_OK);
    assert_int_equal(out.n_set, 3);
    gs_compiled_free(&out);
    assert_string_equal(
        gs_sharding_to_string(&m->arena, gs_instr_get_sharding(gs_module_find_instr(m, "data_1"))),
                        "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
    assert_string_equal(
        gs_sharding_to_string(&m->arena, gs_instr_get_sharding(gs_module_find_instr(m, "add"))),
                        "{devices=[1,4]<=[4]}");
    gs_cli_shardings_free(&o);
    gs_module_free(m);
    gs_source_free(src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_and_errors),
        cmocka_unit_test(test_grid),
        cmocka_unit_test(test_json_and_svg),
        cmocka_unit_test(test_shard_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
