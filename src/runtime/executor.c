/*
 * executor.c — runs one SPMD module on this process's devices: one thread per local device,
 * each running the reference interpreter with its partition id and the communicator behind its
 * collectives. The first device to fail aborts the communicator, so every other device stops
 * at its next collective instead of waiting; the failing device's error is reported first.
 *
 * OpenBLAS runs single-threaded while several device threads share the machine, so device
 * threads and BLAS threads never oversubscribe the cores.
 */
#include "internal.h"
#include "base/sysalloc.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS's own shutdown of its worker threads (they are started again when a later product
 * asks for more than one). Not in its header; weak, so a BLAS without it links and skips it. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

void gs_blas_single_thread(void) {
    openblas_set_num_threads(1);
    /* An idle OpenBLAS worker spins, yielding, for about 2^28 cycles (0.1 s) before it sleeps,
     * and a fresh process's workers start spinning at load: on a machine with as many cores as
     * devices they took the cores from the device threads while the arguments were made. */
    if (blas_thread_shutdown_) blas_thread_shutdown_();
}

typedef struct device_run {
    const gs_module *m;
    gs_comm *comm;
    int device;               /* global device number */
    gs_value *const *args;    /* this device's arguments */
    gs_value *result;         /* its result */
    gs_diags diags;           /* its errors */
    gs_status status;
    uint64_t seed;
    pthread_mutex_t *order_mu; /* guards *first_failure */
    int *first_failure;        /* the first device to fail, or -1 */
    const gs_work_sharing *sharing; /* the process's shared work, or NULL */
    bool async;                     /* give the device a helper for its -start collectives */
} device_run;

/* Does m hold -start collectives a helper thread can run (async.c)? */
static bool has_async_starts(const gs_module *m) {
    for (int i = 0; i < m->n_comps; i++) {
        const gs_computation *c = m->comps[i];
        for (int k = 0; k < c->n_instrs; k++)
            if (gs_async_start_op(c->instrs[k]->op)) return true;
    }
    return false;
}

static void *device_main(void *arg) {
    device_run *r = arg;
    int N = r->comm->n_devices;
    int R = r->m->replica_count > 0 && N % r->m->replica_count == 0 ? (int)r->m->replica_count : 1;
    int P = N / R;
    char label[32];
    snprintf(label, sizeof label, "device %d", r->device);
    gs_device_ctx ctx = {r->comm, r->device, r->m, NULL};
    /* Asynchronous collectives need a helper thread; without one, -starts run at once. */
    if (r->async) ctx.async = gs_async_new(&ctx);
    gs_collectives coll = {gs_collective_execute, &ctx, NULL,
                           ctx.async ? gs_collective_finish : NULL};
    gs_interp_env env = {r->device % P, r->device / P, N, &coll, r->seed, label, r->sharing, 0,
                         gs_trace_observer(r->comm->trace, r->device - r->comm->first_device)};
    r->status = gs_interp_eval(r->m, &env, r->args, r->m->entry->n_params, &r->result, &r->diags);
    if (r->status != GS_OK) {
        pthread_mutex_lock(r->order_mu);
        if (*r->first_failure < 0) *r->first_failure = r->device;
        pthread_mutex_unlock(r->order_mu);
        r->comm->ops->abort(r->comm, r->device);
    }
    gs_async_free(ctx.async); /* after the abort: a helper waiting for others then stops */
    return NULL;
}

void gs_append_diags(gs_diags *to, const gs_diags *from) {
    for (int i = 0; i < from->n; i++) {
        const gs_diag *g = &from->items[i];
        if (g->severity == GS_SEV_ERROR)
            gs_error(to, g->span, "%s", g->message ? g->message : "out of memory");
        else
            gs_note(to, g->span, "%s", g->message ? g->message : "");
    }
}

gs_status gs_run_spmd(const gs_module *m, gs_comm *comm, gs_value **const *args,
                      gs_value ***results, uint64_t seed, gs_diags *d) {
    int n = comm->local_devices;
    device_run *runs = gs_sys_calloc((size_t)n, sizeof *runs);
    pthread_t *threads = gs_sys_calloc((size_t)n, sizeof *threads);
    gs_value **res = gs_sys_calloc((size_t)n, sizeof *res);
    if (!runs || !threads || !res) {
        free(runs);
        free(threads);
        free(res);
        return gs_error(d, gs_span_none(), "out of memory");
    }
    if (comm->n_devices > 1) gs_blas_single_thread();
    /* Replicas' dots and convolutions computed once (share.c); without memory for it, each
     * device computes its own. */
    gs_share *share = comm->share_work && n > 1 ? gs_share_new() : NULL;
    gs_work_sharing sharing = {gs_share_begin, gs_share_end, share};
    bool async = comm->async_collectives && comm->n_devices > 1 && has_async_starts(m);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int first_failure = -1;
    for (int i = 0; i < n; i++) {
        runs[i].m = m;
        runs[i].comm = comm;
        runs[i].device = comm->first_device + i;
        runs[i].args = args[i];
        runs[i].seed = seed;
        runs[i].order_mu = &mu;
        runs[i].first_failure = &first_failure;
        runs[i].sharing = share ? &sharing : NULL;
        runs[i].async = async;
    }
    int started = 0;
    gs_status st = GS_OK;
    if (n == 1) {
        device_main(&runs[0]);
        started = 0;
    } else {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 16u << 20);
        for (int i = 0; i < n; i++) {
            if (pthread_create(&threads[i], &attr, device_main, &runs[i]) != 0) {
                st = gs_error(d, gs_span_none(), "cannot start the thread of device %d", runs[i].device);
                comm->ops->abort(comm, runs[i].device);
                break;
            }
            started++;
        }
        pthread_attr_destroy(&attr);
        for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    }
    comm->work_reused += gs_share_reused(share);
    gs_share_free(share);
    /* Report the device that failed first, then a note for the ones it stopped. */
    int n_failed = 0;
    for (int i = 0; i < n; i++)
        if (runs[i].status != GS_OK && (n == 1 || i < started || st == GS_OK)) n_failed++;
    if (n_failed > 0) {
        st = GS_ERR;
        int first = first_failure - comm->first_device;
        if (first >= 0 && first < n) gs_append_diags(d, &runs[first].diags);
        int stopped = 0;
        for (int i = 0; i < n; i++) {
            if (i == first || runs[i].status == GS_OK) continue;
            if (first < 0 || first >= n) gs_append_diags(d, &runs[i].diags);
            else stopped++;
        }
        if (stopped > 0)
            gs_note(d, gs_span_none(), "%d other device%s stopped because device %d failed", stopped,
                    stopped == 1 ? "" : "s", first_failure);
    }
    for (int i = 0; i < n; i++) {
        res[i] = runs[i].result;
        gs_diags_free(&runs[i].diags);
        if (st != GS_OK) {
            gs_value_free(res[i]);
            res[i] = NULL;
        }
    }
    free(runs);
    free(threads);
    if (st != GS_OK) {
        free(res);
        return st;
    }
    *results = res;
    return GS_OK;
}

/* Gathers output leaf l (of n_leaves; tmpl: its root-shape template) of the k local devices
 * (their leaves in mine) to device 0, into leaf l of each of the n results there. ins, dins and
 * pad are k-entry scratch arrays. */
static gs_status gather_leaf(gs_comm *comm, int l, int n_leaves, const gs_value *tmpl,
                             gs_value **const *mine, gs_value **results, const void **ins,
                             const void **dins, char **pad, gs_diags *d) {
    int n = comm->n_devices, k = comm->local_devices;
    bool root = comm->first_device == 0;
    gs_status st = GS_OK;
    size_t bytes = gs_value_bytes(tmpl), db = sizeof(int64_t) * GS_MAX_RANK;
    for (int i = 0; st == GS_OK && i < k; i++) {
        const gs_value *v = mine[i][l];
        if (v->type != tmpl->type || v->rank != tmpl->rank || gs_value_bytes(v) > bytes) {
            st = gs_error(d, gs_span_none(),
                          "output leaf %d of device %d is not of its "
                          "shape",
                          l, comm->first_device + i);
            break;
        }
        ins[i] = v->data;
        dins[i] = v->dims;
        if (gs_value_bytes(v) < bytes) {
            if (!(pad[i] = gs_sys_calloc(1, bytes + 1))) {
                st = gs_error(d, gs_span_none(), "out of memory");
                break;
            }
            memcpy(pad[i], v->data, gs_value_bytes(v));
            ins[i] = pad[i];
        }
    }
    char *buf = root && st == GS_OK ? gs_sys_malloc(bytes * (size_t)n + 1) : NULL;
    int64_t *dbuf = root && st == GS_OK ? gs_sys_malloc(db * (size_t)n) : NULL;
    if (st == GS_OK && root && (!buf || !dbuf)) st = gs_error(d, gs_span_none(), "out of memory");
    if (st == GS_OK) st = comm->ops->gather_root(comm, ins, (int64_t)bytes, buf, d);
    if (st == GS_OK) st = comm->ops->gather_root(comm, dins, (int64_t)db, (char *)dbuf, d);
    for (int i = 0; st == GS_OK && root && i < n; i++) {
        gs_value **leaves = NULL;
        int nl = 0;
        if (gs_value_leaves(results[i], &leaves, &nl) != GS_OK || nl != n_leaves) {
            st = gs_error(d, gs_span_none(), "internal: result leaves differ");
        } else {
            gs_value *lv = leaves[l];
            const int64_t *dims = dbuf + (size_t)i * GS_MAX_RANK;
            int64_t ne = 1;
            for (int j = 0; j < lv->rank; j++) ne *= dims[j];
            if (ne < 0 || ne > lv->n) {
                st = gs_error(d, gs_span_none(),
                              "output leaf %d of device %d is not of its "
                              "shape",
                              l, i);
            } else { /* the leaf's buffer holds the bound: keep it, with the actual dims */
                memcpy(lv->dims, dims, sizeof(int64_t) * (size_t)lv->rank);
                lv->n = ne;
                memcpy(lv->data, buf + (size_t)i * bytes, gs_value_bytes(lv));
            }
        }
        free(leaves);
    }
    free(buf);
    free(dbuf);
    for (int i = 0; pad && i < k; i++) {
        free(pad[i]);
        pad[i] = NULL;
    }
    return st;
}

gs_status gs_gather_results(gs_comm *comm, const gs_module *m, gs_value *const *local,
                            gs_value ***all, gs_diags *d) {
    int n = comm->n_devices;
    *all = NULL;
    if (comm->local_devices == n) {
        gs_value **out = gs_sys_calloc((size_t)n, sizeof *out);
        if (!out) return gs_error(d, gs_span_none(), "out of memory");
        for (int i = 0; i < n; i++) out[i] = gs_value_ref(local[i]);
        *all = out;
        return GS_OK;
    }
    /* Gather every array leaf to device 0, leaf by leaf. The leaves' shapes are the entry
     * root's, the same on every device. */
    int k = comm->local_devices;
    bool root = comm->first_device == 0;
    gs_value ***mine = gs_sys_calloc((size_t)k, sizeof *mine);
    int n_leaves = 0;
    gs_status st = mine ? GS_OK : gs_error(d, gs_span_none(), "out of memory");
    for (int i = 0; st == GS_OK && i < k; i++)
        if (gs_value_leaves(local[i], &mine[i], &n_leaves) != GS_OK) st = gs_error(d, gs_span_none(), "out of memory");
    gs_value **results = root ? gs_sys_calloc((size_t)n, sizeof *results) : NULL;
    if (st == GS_OK && root && !results) st = gs_error(d, gs_span_none(), "out of memory");
    for (int i = 0; st == GS_OK && root && i < n; i++) {
        results[i] = gs_value_from_shape(m->entry->root->shape);
        if (!results[i]) st = gs_error(d, gs_span_none(), "out of memory");
    }
    /* Every leaf travels at its shape's size (a value with dynamic dims holds fewer elements:
     * padded), with its dims, so that rank 0 rebuilds each device's value as it was. */
    gs_value *tmpl = st == GS_OK ? gs_value_from_shape(m->entry->root->shape) : NULL;
    gs_value **tl = NULL;
    int ntl = 0;
    if (st == GS_OK && (!tmpl || gs_value_leaves(tmpl, &tl, &ntl) != GS_OK))
        st = gs_error(d, gs_span_none(), "out of memory");
    if (st == GS_OK && ntl != n_leaves)
        st = gs_error(d, gs_span_none(), "the outputs do not have the program's root shape");
    const void **ins = gs_sys_calloc((size_t)k, sizeof *ins);
    const void **dins = gs_sys_calloc((size_t)k, sizeof *dins);
    char **pad = gs_sys_calloc((size_t)k, sizeof *pad);
    if (st == GS_OK && (!ins || !dins || !pad)) st = gs_error(d, gs_span_none(), "out of memory");
    for (int l = 0; st == GS_OK && l < n_leaves; l++)
        st = gather_leaf(comm, l, n_leaves, tl[l], mine, results, ins, dins, pad, d);
    free(ins);
    free(dins);
    free(pad);
    free(tl);
    gs_value_free(tmpl);
    for (int i = 0; mine && i < k; i++) free(mine[i]);
    free(mine);
    if (st != GS_OK) {
        for (int i = 0; results && i < n; i++) gs_value_free(results[i]);
        free(results);
        return st;
    }
    *all = results;
    return GS_OK;
}
