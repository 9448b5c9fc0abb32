/*
 * sharded.c — runs of a partitioned program on global values: the inputs sliced per device by
 * their shardings (gs_value_shard, src/interp/shard.c), the program run on every device (step
 * after step, the state the module aliases staying on the devices), the outputs reassembled
 * (gs_value_unshard). The path every sharded run takes.
 */
#include "internal.h"
#include "base/sysalloc.h"
#include "gspmd/partition.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ one partitioned run */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Step k's results become step k+1's arguments on each local device (gs_step_arguments on the
 * device's parts: an aliased output's part is its parameter's part, the shardings being equal,
 * which is checked before the first step). */
static gs_status feed(const gs_module *m, gs_value ***dev, gs_value **results, int local,
                      int n_args, gs_diags *d) {
    for (int k = 0; k < local; k++) {
        gs_value **next = malloc(sizeof *next * (size_t)(n_args ? n_args : 1));
        if (!next) return gs_error(d, gs_span_none(), "out of memory");
        if (gs_step_arguments(m, dev[k], n_args, results[k], next, d) != GS_OK) {
            free(next);
            return GS_ERR;
        }
        for (int i = 0; i < n_args; i++) gs_value_free(dev[k][i]);
        free(dev[k]);
        dev[k] = next;
    }
    return GS_OK;
}

/* Whether each aliased output is sharded as its parameter (else a located error). */
static gs_status aliases_sharded_alike(gs_arena *a, const gs_module *m, const int *out_param,
                                       int n_out, gs_diags *d) {
    const gs_sharding *rs = gs_partition_root_sharding(a, m);
    if (!rs) return gs_error(d, gs_span_none(), "out of memory");
    for (int i = 0; i < n_out; i++) {
        int j = out_param[i];
        if (j < 0) continue;
        const gs_sharding *os = gs_sharding_leaf(rs, m->entry->root->shape,
                                                 m->entry->root->op == GS_OP_TUPLE ? i : 0);
        const gs_sharding *ps = gs_partition_param_sharding(a, m, j);
        if (!os || !ps) return gs_error(d, gs_span_none(), "out of memory");
        const gs_instr *root = m->entry->root;
        const gs_shape *osh = root->op == GS_OP_TUPLE ? root->operands[i]->shape : root->shape;
        if (!gs_shape_equal(osh, m->entry->params[j]->shape))
            return gs_error(d, m->entry->params[j]->span,
                            "--steps: output %d updates parameter %%%s but has another shape: "
                            "it cannot be the next step's argument",
                            i, m->entry->params[j]->name);
        if (!gs_sharding_equal(os, ps))
            return gs_error(d, m->entry->params[j]->span,
                            "--steps: output %d updates parameter %%%s but is sharded %s, not "
                            "%s as the parameter: the state cannot stay on the devices",
                            i, m->entry->params[j]->name, gs_sharding_to_string(a, os),
                            gs_sharding_to_string(a, ps));
    }
    return GS_OK;
}

gs_status gs_run_sharded_steps(const gs_module *m, const gs_module *p, gs_comm *comm,
                               gs_value *const *args, int n_args, uint64_t seed, int steps,
                               double *step_s, const gs_step_progress *progress,
                               gs_value **out, gs_diags *d) {
    *out = NULL;
    if (n_args != m->entry->n_params)
        return gs_error(d, gs_span_none(), "%d arguments for %d parameters", n_args,
                        m->entry->n_params);
    if (steps < 1) return gs_error(d, gs_span_none(), "steps must be at least 1, not %d", steps);
    int n = comm->n_devices, local = comm->local_devices;
    const gs_instr *root = m->entry->root;
    int n_out = root->op == GS_OP_TUPLE ? root->n_operands : 1;
    int *out_param = gs_sys_calloc((size_t)n_out, sizeof *out_param);
    gs_arena a;
    gs_arena_init(&a);
    gs_status st = out_param ? gs_check_collectives(p, n, d)
                             : gs_error(d, gs_span_none(), "out of memory");
    if (st == GS_OK && steps > 1) st = gs_module_output_aliases(m, out_param, n_out, d);
    if (st == GS_OK && steps > 1) st = aliases_sharded_alike(&a, m, out_param, n_out, d);
    gs_value ***dev = gs_sys_calloc((size_t)(local ? local : 1), sizeof *dev);
    if (!dev) st = gs_error(d, gs_span_none(), "out of memory");
    for (int k = 0; st == GS_OK && k < local; k++) {
        dev[k] = gs_sys_calloc((size_t)(n_args ? n_args : 1), sizeof **dev);
        if (!dev[k]) st = gs_error(d, gs_span_none(), "out of memory");
        for (int i = 0; st == GS_OK && i < n_args; i++) {
            const gs_sharding *s = gs_partition_param_sharding(&a, m, i);
            if (!s) st = gs_error(d, gs_span_none(), "out of memory");
            else if (gs_value_shard(args[i], s, comm->first_device + k, &dev[k][i], d) != GS_OK)
                st = gs_error(d, m->entry->params[i]->span, "cannot slice parameter %%%s",
                              m->entry->params[i]->name);
        }
    }
    gs_value **results = NULL, **all = NULL;
    for (int step = 0; st == GS_OK && step < steps; step++) {
        if (results) {
            st = feed(m, dev, results, local, n_args, d);
            for (int k = 0; k < local; k++) gs_value_free(results[k]);
            free(results);
            results = NULL;
            if (st != GS_OK) break;
        }
        double t0 = now_s();
        st = gs_run_spmd(p, comm, (gs_value **const *)dev, &results, seed, d);
        if (step_s) step_s[step] = now_s() - t0;
        if (st == GS_OK && progress && step_s) progress->step_done(progress->ctx, step, steps, step_s);
    }
    if (st == GS_OK) st = gs_gather_results(comm, p, results, &all, d);
    if (st == GS_OK && all) {
        const gs_sharding *rs = gs_partition_root_sharding(&a, m);
        st = rs ? gs_value_unshard(all, n, rs, m->entry->root->shape, out, d)
                : gs_error(d, gs_span_none(), "out of memory");
    }
    for (int k = 0; all && k < n; k++) gs_value_free(all[k]);
    free(all);
    for (int k = 0; results && k < local; k++) gs_value_free(results[k]);
    free(results);
    for (int k = 0; dev && k < local; k++) {
        for (int i = 0; dev[k] && i < n_args; i++) gs_value_free(dev[k][i]);
        free(dev[k]);
    }
    free(dev);
    free(out_param);
    gs_arena_free(&a);
    return st;
}

gs_status gs_run_sharded(const gs_module *m, const gs_module *p, gs_comm *comm,
                         gs_value *const *args, int n_args, uint64_t seed, gs_value **out,
                         gs_diags *d) {
    return gs_run_sharded_steps(m, p, comm, args, n_args, seed, 1, NULL, NULL, out, d);
}

gs_status gs_run_partitioned(const gs_module *m, const gs_module *p, int n_devices,
                             gs_value *const *args, int n_args, uint64_t seed, double timeout_s,
                             gs_value **out, gs_diags *d) {
    *out = NULL;
    gs_comm *comm = gs_comm_threads_new(n_devices, timeout_s > 0 ? timeout_s : 60);
    if (!comm) return gs_error(d, gs_span_none(), "out of memory");
    gs_status st = gs_run_sharded(m, p, comm, args, n_args, seed, out, d);
    comm->ops->free(comm);
    return st;
}
