/*
 * embed.c — gspmd as a library: parse a module, compile it for 4 devices with a mesh and
 * PartitionSpecs (verify, shard, propagate, partition: gs_compile), run it on 4 device
 * threads and verify the result against the single-device reference interpreter. Everything here is the public API (gspmd/gspmd.h).
 *
 *   cc embed.c $(pkg-config --cflags --libs gspmd) -o embed && ./embed
 *   (or with CMake: find_package(gspmd) and target_link_libraries(embed gspmd::gspmd))
 */
#include <gspmd/gspmd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A Megatron MLP block: y = x + tanh(x w1) w2, batch over `data`, hidden over `model`. */
static const char *MODULE =
    "HloModule mlp\n"
    "ENTRY main {\n"
    "  x = f32[8,16] parameter(0)\n"
    "  w1 = f32[16,32] parameter(1)\n"
    "  w2 = f32[32,16] parameter(2)\n"
    "  h = f32[8,32] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  t = f32[8,32] tanh(h)\n"
    "  y = f32[8,16] dot(t, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT out = f32[8,16] add(x, y)\n"
    "}\n";

int main(void) {
    printf("gspmd %s\n", GSPMD_VERSION_STRING);
    int rc = 1;
    gs_diags d = {0};
    gs_source *src = gs_source_from_string("mlp.hlo", MODULE);
    gs_module *m = gs_parse_module(src, &d);
    gs_compiled compiled = {0};
    const gs_module *p = NULL;
    gs_value **args = NULL, *got = NULL;
    gs_leaf_check *checks = NULL;
    int n_args = 0, n_checks = 0;
    bool all_ok = false;
    if (!m) goto done;

    /* jax.sharding.Mesh(devices, ("data", "model")) of 2 x 2 and three PartitionSpecs; then
     * propagation gives every instruction a sharding and partitioning makes one SPMD program
     * for 4 devices: gs_compile does the whole pipeline and every check on the way. */
    gs_mesh mesh;
    const char *mesh_text = "data=2,model=2";
    if (gs_mesh_parse(&m->arena, mesh_text, strlen(mesh_text), &mesh, &d, gs_span_none()) != GS_OK)
        goto done;
    gs_shard_request reqs[] = {{"x", "data,None"}, {"w1", "None,model"}, {"w2", "model,None"}};
    gs_compile_options o;
    gs_compile_options_init(&o, 4);
    o.mesh = &mesh;
    o.n_requests = 3;
    o.requests = reqs;
    if (gs_compile(m, &o, &compiled, &d) != GS_OK) goto done;
    p = compiled.program;

    /* Seeded random global inputs, run on 4 device threads, compare with the reference. */
    if (gs_interp_make_args(m, NULL, 42, &args, &n_args, &d) != GS_OK) goto done;
    if (gs_run_partitioned(m, p, 4, args, n_args, 42, 30, &got, &d) != GS_OK) goto done;
    if (gs_verify_outputs(m, args, n_args, 42, 4, got, &checks, &n_checks, &all_ok, &d) != GS_OK)
        goto done;
    for (int i = 0; i < n_checks; i++)
        printf("out%d: error %.3g (limit %g) %s\n", i, checks[i].error, checks[i].limit,
               checks[i].ok ? "ok" : "DIFFERS");
    gs_cost c;
    gs_cost_module(p, &c);
    printf("per-device FLOPs %.0f; partitioned program on 4 devices %s the reference\n", c.flops,
           all_ok ? "matches" : "does NOT match");
    rc = all_ok ? 0 : 1;
done:
    gs_diags_render(&d, stderr);
    free(checks);
    gs_value_free(got);
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    gs_diags_free(&d);
    gs_compiled_free(&compiled);
    gs_module_free(m);
    gs_source_free(src);
    return rc;
}
