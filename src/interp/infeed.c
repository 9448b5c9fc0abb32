/*
 * infeed.c — what `infeed` reads in a run: the host's queue, made up deterministically.
 *
 * A run has no host feeding it, so it makes up the host's queue: the k-th value an evaluation
 * reads from it (whichever infeed reads it, as XLA's infeeds read one queue in program order;
 * a loop's infeed reads a new entry each iteration) is drawn as entry parameters are
 * (gs_random_draw), keyed by the run's seed, k and the leaf. Neither names nor devices enter
 * the key, so a partitioned program (whose instructions the partitioner renames), the same
 * program read back from another text form, and the reference read the same global values,
 * which is what lets --verify compare them.
 *
 * Where an infeed's sharding (as the partitioner leaves it on a device's program: h_control.c)
 * says what part a device reads, a device of a multi-device run reads that part: a tiled leaf
 * its tile of the global value (global dims = its dims times the tiles), a manual leaf values of
 * its own (the key then holds the device), any other leaf the whole value. The reference of a
 * program for N devices (manual_devices) reads a manual leaf as a bundle of the N devices'
 * values.
 */
#include "kernels.h"
#include "base/sysalloc.h"
#include "gspmd/sharding.h"

#include <stdlib.h>
#include <string.h>

/* The stream of leaf `leaf` of the queue's entry `count` (device -1: the one every device
 * shares). */
static uint64_t feed_seed(uint64_t run_seed, int64_t count, int leaf, int64_t device) {
    uint64_t k = run_seed * 0x9e3779b97f4a7c15ull ^ 0x1f3dull;
    k = k * 31 + (uint64_t)count;
    k = k * 31 + (uint64_t)leaf;
    return k * 31 + (uint64_t)(device + 1);
}

/* Leaf v (an array of the instruction's leaf shape) as device `device` reads it, of the global
 * value of stream `seed`: by leaf sharding s (NULL: whole) when `local`, else whole. */
static gs_status fill_leaf(gs_eval *ev, const gs_instr *in, gs_value *v, const gs_sharding *s,
                           bool local, int64_t device, uint64_t seed) {
    int r = v->rank;
    int64_t gdims[GS_MAX_RANK];
    gs_shard_dim sd[GS_MAX_RANK];
    for (int k = 0; k < r; k++) {
        gdims[k] = v->dims[k];
        sd[k] = (gs_shard_dim){0, v->dims[k], v->dims[k]};
    }
    if (local && s && s->kind == GS_SHARDING_TILED) {
        if (s->data_rank != r)
            return gs_eval_error(ev, in, "infeed: a leaf's sharding has rank %d, the leaf %d",
                                 s->data_rank, r);
        for (int k = 0; k < r; k++) gdims[k] = v->dims[k] * s->tiles.dims[k];
        bool holds;
        if (gs_shard_box(s, r, gdims, device, sd, &holds, ev->d) != GS_OK)
            return gs_eval_error(ev, in, "infeed: device %lld holds no part of its value",
                                 (long long)device);
    }
    gs_random_draw_box(v, seed, gdims, sd, 1);
    return GS_OK;
}

/* What every leaf of one run of an infeed shares. */
typedef struct feed {
    const gs_instr *in;
    const gs_sharding *sh; /* the infeed's sharding, or NULL */
    bool device_run;       /* a device of a multi-device run (not the reference) */
    int64_t device, n_manual;
    uint64_t seed;
    int64_t count;         /* the queue's entry this infeed reads */
} feed;

/* Fills the leaves under *slot (the next is leaf *leaf, depth first, tokens counted). */
static gs_status fill(gs_eval *ev, const feed *f, gs_value **slot, int *leaf) {
    gs_value *v = *slot;
    if (v->type == GS_TUPLE) {
        for (int i = 0; i < v->n_tuple; i++)
            if (fill(ev, f, &v->tuple[i], leaf) != GS_OK) return GS_ERR;
        return GS_OK;
    }
    int l = (*leaf)++;
    if (v->type == GS_TOKEN) return GS_OK;
    const gs_sharding *ls = f->sh ? gs_sharding_leaf(f->sh, f->in->shape, l) : NULL;
    bool manual = ls && gs_sharding_is_manual(ls);
    if (!manual || f->device_run || f->n_manual <= 1)
        return fill_leaf(ev, f->in, v, ls, f->device_run, f->device,
                         feed_seed(f->seed, f->count, l, manual ? f->device : -1));
    /* the reference of a manual leaf: a bundle of each device's own values */
    gs_value **parts = gs_sys_calloc((size_t)f->n_manual, sizeof *parts);
    gs_status st = parts ? GS_OK : gs_eval_oom(ev, f->in);
    for (int64_t d = 0; st == GS_OK && d < f->n_manual; d++) {
        parts[d] = gs_value_copy(v);
        st = parts[d] ? fill_leaf(ev, f->in, parts[d], NULL, false, d,
                                  feed_seed(f->seed, f->count, l, d))
                      : gs_eval_oom(ev, f->in);
    }
    gs_value *b = st == GS_OK ? gs_value_new_tuple((int)f->n_manual, parts) : NULL; /* takes them */
    if (st == GS_OK && !b) st = gs_eval_oom(ev, f->in);
    if (!b)
        for (int64_t d = 0; parts && d < f->n_manual; d++) gs_value_free(parts[d]);
    free(parts);
    if (b) {
        b->devices = (int)f->n_manual;
        gs_value_free(v);
        *slot = b;
    }
    return st;
}

gs_status gs_eval_infeed(gs_eval *ev, const gs_instr *in, gs_value **out) {
    const gs_shape *s = in->shape;
    if (s->type != GS_TUPLE || s->n_tuple != 2 || s->tuple[1]->type != GS_TOKEN)
        return gs_eval_error(ev, in, "infeed's shape must be (data, token)");
    const gs_interp_env *env = ev->env;
    feed f = {in,
              gs_instr_get_sharding(in),
              env && env->num_partitions > 1 && env->manual_devices <= 1,
              env ? env->partition_id : 0,
              env ? env->manual_devices : 0,
              env ? env->rng_seed : 0,
              ev->feeds_read++};
    gs_value *v = gs_value_from_shape(s);
    if (!v) return gs_eval_oom(ev, in);
    int leaf = 0;
    if (fill(ev, &f, &v, &leaf) != GS_OK) {
        gs_value_free(v);
        return GS_ERR;
    }
    *out = v;
    return GS_OK;
}
