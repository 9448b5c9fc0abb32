/*
 * bundle.c — collectives between the devices of a manual value in the reference interpreter.
 *
 * An unpartitioned module with manual shardings (shard_map regions, manual parameters) holds a
 * manual value as a bundle of per-device values (gs_value.devices). A collective on such values
 * is run here by the runtime itself: one thread per device on a threads communicator, each
 * executing the instruction with its part (gs_collective_execute), so the reference gives a
 * collective exactly the meaning the partitioned program's devices give it.
 */
#include "internal.h"
#include "base/sysalloc.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct bundle_run {
    gs_device_ctx ctx;
    const gs_instr *in;
    gs_value **ops; /* this device's operands */
    int n_ops;
    gs_value *result;
    gs_diags diags;
    gs_status status;
} bundle_run;

static void *bundle_main(void *arg) {
    bundle_run *r = arg;
    r->status = gs_collective_execute(&r->ctx, r->in, r->ops, r->n_ops, &r->result, &r->diags);
    if (r->status != GS_OK) r->ctx.comm->ops->abort(r->ctx.comm, r->ctx.device);
    return NULL;
}

gs_status gs_collective_execute_bundle(void *ctx, const gs_instr *in, gs_value *const *ops,
                                       int n_ops, int n, gs_value **out, gs_diags *d) {
    const gs_module *m = ctx;
    *out = NULL;
    gs_comm *comm = gs_comm_threads_new(n, 60);
    bundle_run *runs = gs_sys_calloc((size_t)n, sizeof *runs);
    pthread_t *threads = gs_sys_calloc((size_t)n, sizeof *threads);
    gs_value **res = gs_sys_calloc((size_t)n, sizeof *res);
    gs_value **opv = gs_sys_calloc((size_t)n * (size_t)(n_ops ? n_ops : 1), sizeof *opv);
    gs_status st = comm && runs && threads && res && opv ? GS_OK
                                                         : gs_error(d, in->span, "out of memory");
    for (int k = 0; st == GS_OK && k < n_ops; k++)
        if (ops[k]->devices > 0 && ops[k]->devices != n)
            st = gs_error(d, in->span, "%s: operands of %d and %d devices", in->name,
                          ops[k]->devices, n);
    int started = 0;
    for (int dev = 0; st == GS_OK && dev < n; dev++) {
        bundle_run *r = &runs[dev];
        r->ctx = (gs_device_ctx){comm, dev, m, NULL};
        r->in = in;
        r->ops = opv + (size_t)dev * (size_t)(n_ops ? n_ops : 1);
        r->n_ops = n_ops;
        for (int k = 0; k < n_ops; k++)
            r->ops[k] = ops[k]->devices > 0 ? ops[k]->tuple[dev] : ops[k];
    }
    for (int dev = 0; st == GS_OK && dev < n; dev++) {
        if (pthread_create(&threads[dev], NULL, bundle_main, &runs[dev]) != 0) {
            st = gs_error(d, in->span, "cannot start a thread for device %d", dev);
            comm->ops->abort(comm, dev);
            break;
        }
        started++;
    }
    for (int dev = 0; dev < started; dev++) pthread_join(threads[dev], NULL);
    for (int dev = 0; dev < started && st == GS_OK; dev++) {
        if (runs[dev].status != GS_OK) {
            for (int i = 0; i < runs[dev].diags.n; i++)
                gs_error(d, runs[dev].diags.items[i].span, "%s",
                         runs[dev].diags.items[i].message ? runs[dev].diags.items[i].message
                                                          : "out of memory");
            st = GS_ERR;
        }
    }
    for (int dev = 0; dev < n && runs; dev++) {
        if (st == GS_OK) res[dev] = runs[dev].result;
        else gs_value_free(runs[dev].result);
        gs_diags_free(&runs[dev].diags);
    }
    if (st == GS_OK) {
        *out = gs_value_new_tuple(n, res);
        if (*out) (*out)->devices = n;
        else st = gs_error(d, in->span, "out of memory");
    }
    if (comm) comm->ops->free(comm);
    free(runs);
    free(threads);
    free(res);
    free(opv);
    return st;
}
