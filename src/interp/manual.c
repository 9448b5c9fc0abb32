/*
 * manual.c — manual regions (shard_map) of an unpartitioned module in the reference interpreter.
 *
 * A manual region computes on per-device values, so the single-device interpreter gives it the
 * meaning it has on N devices: SPMDFullToShardShape cuts its operand into the parts its operand's
 * sharding gives each device, held together as a bundle (gs_value.devices = N, tuple[d] device
 * d's part); every instruction with a bundle operand runs once per device, with partition-id d,
 * on that device's parts; SPMDShardToFullShape reassembles the global value from the parts by its
 * own sharding (replicas must agree bitwise). A module whose regions are written this way can
 * then be run whole, and a partitioned program verified against it. Collectives inside a region
 * need the multi-device runtime and are reported as such.
 */
#include "kernels.h"
#include "base/sysalloc.h"
#include "gspmd/sharding.h"

#include <stdlib.h>
#include <string.h>

static bool is_target(const gs_instr *in, const char *target) {
    if (in->op != GS_OP_CUSTOM_CALL) return false;
    const char *t = gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET);
    return t && strcmp(t, target) == 0;
}

bool gs_manual_is_enter(const gs_instr *in) { return is_target(in, "SPMDFullToShardShape"); }
bool gs_manual_is_exit(const gs_instr *in) { return is_target(in, "SPMDShardToFullShape"); }

int gs_bundle_devices(gs_value *const *ops, int n) {
    for (int k = 0; k < n; k++)
        if (ops[k] && ops[k]->devices > 0) return ops[k]->devices;
    return 0;
}

int gs_manual_id_devices(const gs_eval *ev, const gs_instr *in) {
    if (in->op != GS_OP_PARTITION_ID || ev->env->manual_devices <= 1) return 0;
    const gs_sharding *s = gs_instr_get_sharding(in);
    return s && gs_sharding_is_manual(s) ? (int)ev->env->manual_devices : 0;
}

/* A bundle of n per-device values (takes over the references). */
static gs_value *bundle(int n, gs_value **parts) {
    gs_value *b = gs_value_new_tuple(n, parts);
    if (b) b->devices = n;
    return b;
}

/* The bundle of n devices' parts of op under s: device d's part of op itself, or, when op is
 * a bundle (inside a partially manual region), of d's own value. */
static gs_status cut(gs_eval *ev, const gs_instr *in, gs_value *op, const gs_sharding *s, int n,
                     gs_value **out) {
    gs_value **parts = gs_sys_calloc((size_t)n, sizeof *parts);
    gs_status st = parts ? GS_OK : gs_eval_oom(ev, in);
    for (int d = 0; st == GS_OK && d < n; d++) {
        if (gs_value_shard(op->devices > 0 ? op->tuple[d] : op, s, d, &parts[d], ev->d) != GS_OK)
            st = gs_eval_error(ev, in, "cannot cut the operand into device %d's part", d);
        else if (!gs_value_matches(parts[d], in->shape))
            st = gs_eval_error(ev, in,
                               "device %d's part of the operand does not have the region's shape",
                               d);
    }
    if (st != GS_OK) {
        for (int d = 0; parts && d < n; d++) gs_value_free(parts[d]);
        free(parts);
        return st;
    }
    *out = bundle(n, parts);
    free(parts);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

gs_status gs_manual_enter(gs_eval *ev, const gs_instr *in, gs_value *op, gs_value **out) {
    const gs_sharding *own = gs_instr_get_sharding(in);
    if (own && !gs_sharding_is_manual(own) && gs_sharding_manual_dim(own) < 0 &&
        gs_value_matches(op, in->shape)) {
        /* a region with no manual axes (Shardy's manual_axes={}): every device holds the whole
         * value, so its edges are identities */
        *out = gs_value_ref(op);
        return GS_OK;
    }
    const gs_sharding *s = gs_instr_get_sharding(in->operands[0]);
    if (op->devices > 0) {
        /* Nested manual computations: inside a partially manual region device d holds its
         * manual group's value, of which the operand's tiles (along the dims the group still
         * splits) give d a part. Inside a fully manual one nothing is left to split. */
        if (!s || s->kind != GS_SHARDING_TILED || gs_sharding_manual_dim(s) < 0 ||
            s->tiles.n != op->devices)
            return gs_eval_error(ev, in,
                                 "a manual region inside a fully manual region: its operand must "
                                 "be partially manual (a manual subgroup) over the region's "
                                 "devices");
        return cut(ev, in, op, s, op->devices, out);
    }
    gs_arena a;
    gs_arena_init(&a);
    if (!s) s = gs_sharding_replicated(&a);
    int64_t n = s->kind == GS_SHARDING_TILED ? s->tiles.n
                : ev->m->num_partitions > 1  ? ev->m->num_partitions
                                             : 1;
    gs_status st = cut(ev, in, op, s, (int)n, out);
    gs_arena_free(&a);
    return st;
}

gs_status gs_manual_exit(gs_eval *ev, const gs_instr *in, gs_value *op, gs_value **out) {
    const gs_sharding *s = gs_instr_get_sharding(in);
    if (!s) return gs_eval_error(ev, in, "SPMDShardToFullShape needs the sharding of its result");
    if (s->kind == GS_SHARDING_TILED && s->tiles.n != op->devices)
        return gs_eval_error(ev, in,
                             "the region runs on %d devices, its result's sharding spans "
                             "%lld",
                             op->devices, (long long)s->tiles.n);
    /* Out of some of the manual axes of a partially manual value: device d holds its manual
     * group's value, of which its own part is its tile (along the dims the operand's sharding
     * splits); the parts reassemble by the result's sharding. */
    const gs_sharding *os = gs_instr_get_sharding(in->operands[0]);
    gs_value **own = NULL;
    if (os && os->kind == GS_SHARDING_TILED && gs_sharding_manual_dim(os) >= 0 &&
        os->tiles.n == op->devices) {
        own = gs_sys_calloc((size_t)op->devices, sizeof *own);
        if (!own) return gs_eval_oom(ev, in);
        for (int d = 0; d < op->devices; d++)
            if (gs_value_shard(op->tuple[d], os, d, &own[d], ev->d) != GS_OK) {
                for (int k = 0; k < d; k++) gs_value_free(own[k]);
                free(own);
                return gs_eval_error(ev, in, "cannot cut device %d's part of the operand", d);
            }
    }
    gs_status st = gs_value_unshard(own ? own : op->tuple, op->devices, s, in->shape, out, ev->d);
    for (int d = 0; own && d < op->devices; d++) gs_value_free(own[d]);
    free(own);
    if (st != GS_OK) return gs_eval_error(ev, in, "cannot reassemble the region's result");
    return GS_OK;
}

gs_status gs_per_device(gs_eval *ev, const gs_instr *in, int n_dev, gs_value *const *ops,
                        gs_value *const *bops, gs_value **out, gs_value **bout,
                        gs_per_device_fn fn) {
    int n = in->n_operands;
    gs_value **p = gs_sys_calloc((size_t)(2 * n + 1), sizeof *p);
    gs_value **res = gs_sys_calloc((size_t)n_dev, sizeof *res), **bres = NULL;
    if (bops) bres = gs_sys_calloc((size_t)n_dev, sizeof *bres);
    gs_status st = p && res && (bres || !bops) ? GS_OK : gs_eval_oom(ev, in);
    const gs_interp_env *saved = ev->env;
    /* Every device draws from its own stream of random numbers, in step with the others (the
     * runtime seeds each device's alike): each starts where the reference's stream stands. */
    uint64_t rng_start = ev->rng_state;
    for (int d = 0; st == GS_OK && d < n_dev; d++) {
        ev->rng_state = rng_start;
        for (int k = 0; k < n && st == GS_OK; k++) {
            const gs_value *vs[2] = {ops[k], bops ? bops[k] : NULL};
            for (int j = 0; j < 2 && vs[j]; j++) {
                if (vs[j]->devices > 0 && vs[j]->devices != n_dev)
                    st = gs_eval_error(ev, in, "operands from manual regions of %d and %d devices",
                                       vs[j]->devices, n_dev);
                else
                    p[j * n + k] = vs[j]->devices > 0 ? vs[j]->tuple[d] : (gs_value *)vs[j];
            }
        }
        if (st != GS_OK) break;
        gs_interp_env env = *saved;
        env.partition_id = d;
        env.num_partitions = n_dev;
        env.manual_devices = 0; /* already on device d */
        ev->env = &env;
        st = fn(ev, in, p, bops ? p + n : NULL, &res[d], bops ? &bres[d] : NULL);
        ev->env = saved;
    }
    if (st == GS_OK) {
        *out = bundle(n_dev, res);
        if (bops) *bout = bundle(n_dev, bres);
        if (!*out || (bops && !*bout)) {
            gs_value_free(*out);
            if (bops) gs_value_free(*bout);
            *out = NULL;
            if (bops) *bout = NULL;
            st = gs_eval_oom(ev, in);
        }
    } else {
        for (int d = 0; res && d < n_dev; d++) gs_value_free(res[d]);
        for (int d = 0; bres && d < n_dev; d++) gs_value_free(bres[d]);
    }
    free(p);
    free(res);
    free(bres);
    return st;
}

gs_status gs_eval_predicate(gs_eval *ev, const gs_instr *in, const gs_value *p, bool *go) {
    if (p->devices > 0) {
        bool first = false;
        for (int d = 0; d < p->n_tuple; d++) {
            bool g;
            if (gs_eval_predicate(ev, in, p->tuple[d], &g) != GS_OK) return GS_ERR;
            if (d > 0 && g != first)
                return gs_eval_error(ev, in,
                                     "the devices of a manual region disagree on the loop "
                                     "condition (device 0: %s, device %d: %s)",
                                     first ? "true" : "false", d, g ? "true" : "false");
            first = g;
        }
        *go = first;
        return GS_OK;
    }
    if (p->type != GS_PRED || p->n != 1)
        return gs_eval_error(ev, in, "the loop condition is not a pred[] scalar");
    *go = ((unsigned char *)p->data)[0] != 0;
    return GS_OK;
}
