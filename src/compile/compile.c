/*
 * compile.c — the pipeline as one call (gspmd/compile.h): verify, check sizes, apply the
 * requested shardings and pin the parameters they set, fill elided constants, propagate,
 * partition, and check that the runtime can run the result. The CLI commands, the benchmarks
 * and embedders call this instead of writing the sequence (and its checks) again.
 */
#include "gspmd/compile.h"
#include "gspmd/interp.h"
#include "gspmd/runtime.h"

#include <stdlib.h>
#include <string.h>

void gs_compile_options_init(gs_compile_options *o, int64_t num_partitions) {
    memset(o, 0, sizeof *o);
    o->num_partitions = num_partitions;
    o->propagate.is_spmd = true;
    /* Shardy's propagation as JAX runs it: user priorities, op priorities, aggressive. */
    o->sdy.strategy = GS_SDY_AGGRESSIVE;
    o->sdy.op_priority = true;
    o->sdy.user_priority = true;
    o->sdy.pipeline = true;
}

void gs_compiled_free(gs_compiled *c) {
    if (!c) return;
    gs_propagate_info_free(c->info);
    gs_module_free(c->program);
    memset(c, 0, sizeof *c);
}

/* Applies the requests; sets pinned[i] for each entry parameter whose sharding they changed. */
static gs_status apply_requests(gs_module *m, const gs_compile_options *o, bool *pinned,
                                int *n_set, gs_diags *d) {
    const gs_computation *e = m->entry;
    int np = e ? e->n_params : 0;
    const gs_attr **before = calloc((size_t)np + 1, sizeof *before);
    if (!before) return gs_error(d, gs_span_none(), "out of memory");
    for (int i = 0; i < np; i++) before[i] = gs_instr_attr(e->params[i], GS_ATTR_SHARDING);
    gs_status st = gs_module_apply_shardings(m, o->mesh, o->n_requests, o->requests, n_set, d);
    for (int i = 0; st == GS_OK && i < np; i++)
        pinned[i] = gs_instr_attr(e->params[i], GS_ATTR_SHARDING) != before[i];
    free(before);
    return st;
}

/* The ops of p the runtime cannot run, each a located error. */
static gs_status check_runnable(const gs_module *p, gs_diags *d) {
    gs_status st = GS_OK;
    for (int ci = 0; ci < p->n_comps; ci++)
        for (int i = 0; i < p->comps[ci]->n_instrs; i++) {
            const gs_instr *in = p->comps[ci]->instrs[i];
            if (!gs_interp_supports(in->op))
                st = gs_error(d, in->span,
                              "the program uses '%s' (%%%s), which the runtime cannot run",
                              gs_op_name(in->op), in->name);
        }
    return st;
}

/* An already partitioned program: what running it needs. */
static gs_status check_spmd_input(const gs_module *m, const gs_compile_options *o, gs_diags *d) {
    if (o->n_requests > 0)
        return gs_error(d, gs_span_none(),
                        "shardings were requested for a program that is already partitioned");
    if (!o->runnable) return GS_OK;
    if (gs_module_check_bounded(m, "running", d) != GS_OK) return GS_ERR;
    if (check_runnable(m, d) != GS_OK) return GS_ERR;
    return gs_check_collectives(m, (int)o->num_partitions, d);
}

bool gs_compile_uses_shardy(const gs_module *m, gs_propagation_algorithm a) {
    if (a != GS_PROPAGATE_AUTO) return a == GS_PROPAGATE_SHARDY;
    /* Shardy's for a module that carries Shardy's shardings (it declares sdy.mesh), as JAX
     * would propagate it; GSPMD's otherwise. */
    return m->meshes && m->meshes->n > 0;
}

gs_status gs_compile(gs_module *m, const gs_compile_options *o, gs_compiled *out, gs_diags *d) {
    memset(out, 0, sizeof *out);
    if ((!o->no_partition || o->spmd_input) &&
        (o->num_partitions < 1 || o->num_partitions > (1 << 30)))
        return gs_error(d, gs_span_none(), "the number of devices must be in 1..%d, not %lld",
                        1 << 30, (long long)o->num_partitions);
    if (gs_module_verify(m, d) != GS_OK) return GS_ERR;
    if (o->spmd_input) return check_spmd_input(m, o, d);
    if (!o->no_partition && gs_module_check_bounded(m, "partitioning", d) != GS_OK) return GS_ERR;
    int np = m->entry ? m->entry->n_params : 0;
    bool *pinned = calloc((size_t)np + 1, sizeof *pinned);
    if (!pinned) return gs_error(d, gs_span_none(), "out of memory");
    gs_status st = GS_OK;
    if (o->n_requests > 0) st = apply_requests(m, o, pinned, &out->n_set, d);
    /* Before partitioning, so the program's copies of the constants hold the same values. */
    if (st == GS_OK && o->fill_elided)
        st = gs_module_fill_elided(m, o->seed, &out->n_filled, d);
    if (st == GS_OK && !o->no_propagate && gs_compile_uses_shardy(m, o->algorithm)) {
        st = gs_sdy_propagate_ex(m, &o->sdy, o->keep_provenance ? &out->info : NULL, d);
    } else if (st == GS_OK && !o->no_propagate) {
        gs_propagate_options po = o->propagate;
        po.n_pinned_params = np;
        po.pinned_params = pinned;
        st = gs_propagate_ex(m, &po, o->keep_provenance ? &out->info : NULL, d);
    }
    free(pinned);
    if (st == GS_OK && !o->no_partition) {
        gs_partition_options po = o->partition;
        po.num_partitions = o->num_partitions;
        st = gs_partition(m, &po, &out->program, &out->stats, d);
    }
    if (st == GS_OK && out->program && o->runnable) st = check_runnable(out->program, d);
    if (st != GS_OK) gs_compiled_free(out);
    return st;
}
