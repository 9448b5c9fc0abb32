/*
 * sharded.c — one run of a partitioned program on global values: the inputs sliced per device by
 * their shardings (gs_value_shard, src/interp/shard.c), the program run on every device, the
 * outputs reassembled (gs_value_unshard). The path every sharded run takes.
 */
#include "internal.h"
#include "base/sysalloc.h"
#include "gspmd/partition.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ one partitioned run */

gs_status gs_run_sharded(const gs_module *m, const gs_module *p, gs_comm *comm,
                         gs_value *const *args, int n_args, uint64_t seed, gs_value **out,
                         gs_diags *d) {
    *out = NULL;
    if (n_args != m->entry->n_params)
        return gs_error(d, gs_span_none(), "%d arguments for %d parameters", n_args,
                        m->entry->n_params);
    int n = comm->n_devices, local = comm->local_devices;
    gs_arena a;
    gs_arena_init(&a);
    gs_status st = gs_check_collectives(p, n, d);
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
    if (st == GS_OK) st = gs_run_spmd(p, comm, (gs_value **const *)dev, &results, seed, d);
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
    gs_arena_free(&a);
    return st;
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
