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
#include <pthread.h>
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

/* One local device's arguments, made on its own thread in two phases: first the parts it
 * owns (drawn or sliced), then the parts a replica owns, shared: a device's interpreter never
 * writes into an argument (it reuses a buffer only when it holds the sole reference). */
typedef struct device_args {
    const gs_module *m;
    const gs_arg_source *src;
    const gs_sharding *const *shardings; /* per parameter */
    int n_args, local, k;                /* arguments; local devices; this one's index */
    int64_t device;                      /* its global number */
    const int *owner;                    /* [i * local + k]: the local device making that part */
    gs_value ***dev;                     /* every local device's arguments */
    bool copies;                         /* this phase: take the replicas' parts */
    gs_diags diags;
    gs_status status;
} device_args;

static void *make_device_args(void *arg) {
    device_args *a = arg;
    for (int i = 0; a->status == GS_OK && i < a->n_args; i++) {
        int o = a->owner[i * a->local + a->k];
        if ((o != a->k) != a->copies) continue;
        if (a->copies) {
            a->dev[a->k][i] = gs_value_ref(a->dev[o][i]); /* read-only: never donated */
        } else if (gs_arg_source_part(a->src, i, a->shardings[i], a->device, &a->dev[a->k][i],
                                      &a->diags) != GS_OK) {
            a->status = gs_error(&a->diags, a->m->entry->params[i]->span,
                                 "cannot slice parameter %%%s", a->m->entry->params[i]->name);
        }
    }
    return NULL;
}

/* Runs make_device_args for every local device: one thread each (the first on this one, and
 * any whose thread cannot start). `started` is scratch, `local` entries. */
static void each_device(device_args *runs, int local, pthread_t *threads, bool *started) {
    for (int k = 1; k < local; k++)
        started[k] = pthread_create(&threads[k], NULL, make_device_args, &runs[k]) == 0;
    for (int k = 0; k < local; k++)
        if (k == 0 || !started[k]) make_device_args(&runs[k]);
    for (int k = 1; k < local; k++)
        if (started[k]) pthread_join(threads[k], NULL);
}

typedef struct param_size {
    int64_t bytes;
    int param;
} param_size;

/* qsort order: larger parameters first, then by number. */
static int larger_first(const void *x, const void *y) {
    const param_size *a = x, *b = y;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return (a->param > b->param) - (a->param < b->param);
}

/* Every local device's arguments (dev[k], n_args each), made by one thread per device; a part
 * several local devices hold alike (replicas) is made once and shared. */
static gs_status make_local_args(const gs_module *m, const gs_arg_source *src,
                                 const gs_sharding *const *shardings, int n_args, gs_comm *comm,
                                 gs_value ***dev, gs_diags *d) {
    int local = comm->local_devices;
    size_t nl = (size_t)(local ? local : 1);
    device_args *runs = gs_sys_calloc(nl, sizeof *runs);
    pthread_t *threads = gs_sys_calloc(nl, sizeof *threads);
    int *owner = gs_sys_calloc((size_t)(n_args ? n_args : 1) * nl, sizeof *owner);
    int64_t(*keys)[GS_MAX_RANK + 1] = gs_sys_calloc(nl, sizeof *keys);
    int *key_len = gs_sys_calloc(nl, sizeof *key_len);
    bool *started = gs_sys_calloc(nl, sizeof *started);
    gs_status st = runs && threads && owner && keys && key_len && started
                       ? GS_OK
                       : gs_error(d, gs_span_none(), "out of memory");
    /* A part several holders share goes to the least loaded of them, largest parameter
     * first, so that drawing or reading spreads over the device threads (device 0 made every
     * replicated weight before). A part's load is its parameter's bytes per distinct part. */
    param_size *order = gs_sys_calloc((size_t)(n_args ? n_args : 1), sizeof *order);
    int64_t *load = gs_sys_calloc(nl, sizeof *load);
    if (st == GS_OK && (!order || !load)) st = gs_error(d, gs_span_none(), "out of memory");
    for (int i = 0; st == GS_OK && i < n_args; i++)
        order[i] = (param_size){gs_shape_bytes(m->entry->params[i]->shape), i};
    if (st == GS_OK) qsort(order, (size_t)n_args, sizeof *order, larger_first);
    for (int t = 0; st == GS_OK && t < n_args; t++) {
        int i = order[t].param, parts = 0, *o = &owner[i * local];
        for (int k = 0; k < local; k++) { /* o[k]: the first holder of k's part, for now */
            o[k] = k;
            key_len[k] = gs_arg_source_part_key(src, i, shardings[i], comm->first_device + k,
                                                keys[k]);
            for (int j = 0; j < k && key_len[k] > 0 && o[k] == k; j++)
                if (o[j] == j && key_len[j] == key_len[k] &&
                    memcmp(keys[j], keys[k], sizeof(int64_t) * (size_t)key_len[k]) == 0)
                    o[k] = j;
            parts += o[k] == k;
        }
        int64_t bytes = order[t].bytes / parts;
        for (int r = local - 1; r >= 0; r--) { /* groups by first holder, from the last */
            if (o[r] != r) continue;
            int best = r;
            for (int k = r + 1; k < local; k++)
                if (o[k] == r && load[k] < load[best]) best = k;
            load[best] += bytes;
            for (int k = r; k < local; k++)
                if (o[k] == r) o[k] = best;
        }
    }
    free(order);
    free(load);
    for (int k = 0; st == GS_OK && k < local; k++)
        runs[k] = (device_args){m,     src, shardings, n_args, local, k, comm->first_device + k,
                                owner, dev, false,     {0},    GS_OK};
    for (int phase = 0; st == GS_OK && phase < 2; phase++) {
        for (int k = 0; k < local; k++) runs[k].copies = phase == 1;
        each_device(runs, local, threads, started);
        for (int k = 0; k < local && st == GS_OK; k++)
            if (runs[k].status != GS_OK) {
                gs_append_diags(d, &runs[k].diags);
                st = GS_ERR;
            }
    }
    for (int k = 0; runs && k < local; k++) gs_diags_free(&runs[k].diags);
    free(runs);
    free(threads);
    free(owner);
    free(keys);
    free(key_len);
    free(started);
    return st;
}

gs_status gs_run_sharded_steps(const gs_module *m, const gs_module *p, gs_comm *comm,
                               const gs_arg_source *args, uint64_t seed, int steps,
                               double *step_s, const gs_step_progress *progress,
                               gs_value **out, gs_diags *d) {
    *out = NULL;
    int n_args = gs_arg_source_count(args);
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
    }
    const gs_sharding **shardings = gs_arena_alloc(&a, sizeof *shardings * (size_t)(n_args + 1));
    if (st == GS_OK && !shardings) st = gs_error(d, gs_span_none(), "out of memory");
    for (int i = 0; st == GS_OK && i < n_args; i++)
        if (!(shardings[i] = gs_partition_param_sharding(&a, m, i)))
            st = gs_error(d, gs_span_none(), "out of memory");
    if (st == GS_OK && n > 1) gs_blas_single_thread(); /* before the arguments are made */
    if (st == GS_OK) st = make_local_args(m, args, shardings, n_args, comm, dev, d);
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
    if (n_args != m->entry->n_params)
        return gs_error(d, gs_span_none(), "%d arguments for %d parameters", n_args,
                        m->entry->n_params);
    gs_arg_source *src = gs_arg_source_of(m, args);
    if (!src) return gs_error(d, gs_span_none(), "out of memory");
    gs_status st = gs_run_sharded_steps(m, p, comm, src, seed, 1, NULL, NULL, out, d);
    gs_arg_source_free(src);
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
