/*
 * apply.c — attaching shardings to a module by instruction name: the library side of the
 * command line's `--shard NAME=SPEC`. NAME is an instruction name or a glob (fnmatch), SPEC a
 * PartitionSpec over the mesh (`batch,None`) or XLA sharding text (`{devices=[2,1]<=[2]}`).
 *
 * A request sets the parsed sharding as the instruction's `sharding` attribute
 * (gs_instr_set_sharding), replacing the attribute or inserting it at its canonical position.
 */
#include "internal.h"

#include <fnmatch.h>
#include <string.h>


/* Re-emits the diagnostics of a failed parse of one request, prefixed with the request. */
static gs_status request_error(gs_diags *d, const gs_shard_request *r, gs_diags *inner) {
    for (int i = 0; i < inner->n; i++)
        gs_error(d, gs_span_none(), "shard request '%s=%s': %s", r->pattern, r->spec,
                 inner->items[i].message ? inner->items[i].message : "out of memory");
    if (inner->n == 0)
        gs_error(d, gs_span_none(), "shard request '%s=%s': out of memory", r->pattern, r->spec);
    gs_diags_free(inner);
    return GS_ERR;
}

/* Whether s fits the devices of m (when it says num_partitions > 1); else the error, prefixed
 * with the request. */
static gs_status check_devices(gs_diags *d, const gs_shard_request *r, const gs_module *m,
                               const gs_instr *in, const gs_sharding *s) {
    if (m->num_partitions <= 1) return GS_OK;
    gs_diags inner = {0};
    if (gs_sharding_check_devices(s, in, m->num_partitions, &inner) != GS_OK)
        return request_error(d, r, &inner);
    gs_diags_free(&inner);
    return GS_OK;
}

/* Whether sharding s fits shape (data rank, tuple leaves); else an error naming both. */
static gs_status check_fits(gs_diags *d, const gs_shard_request *r, const gs_instr *in,
                            const gs_sharding *s) {
    const gs_shape *sh = in->shape;
    if (s->kind == GS_SHARDING_TUPLE) {
        int leaves = gs_shape_n_leaves(sh);
        if (!gs_shape_is_tuple(sh))
            return gs_error(d, gs_span_none(),
                            "shard request '%s=%s': '%s' is not a tuple but "
                            "the sharding is",
                            r->pattern, r->spec, in->name);
        if (s->n_tuple != leaves && !(leaves == 0 && s->n_tuple == 1))
            return gs_error(d, gs_span_none(),
                            "shard request '%s=%s': the tuple sharding has "
                            "%d elements but '%s' has %d leaves",
                            r->pattern, r->spec, s->n_tuple, in->name, leaves);
        return GS_OK;
    }
    if (s->kind == GS_SHARDING_TILED) {
        if (!gs_shape_is_array(sh))
            return gs_error(d, gs_span_none(), "shard request '%s=%s': '%s' is not an array",
                            r->pattern, r->spec, in->name);
        if (s->data_rank != sh->rank)
            return gs_error(d, gs_span_none(),
                            "shard request '%s=%s': the sharding has %d data "
                            "dims but '%s' has rank %d",
                            r->pattern, r->spec, s->data_rank, in->name, sh->rank);
    }
    return GS_OK;
}

gs_status gs_module_apply_shardings(gs_module *m, const gs_mesh *mesh, int n,
                                    const gs_shard_request *reqs, int *n_set, gs_diags *d) {
    gs_arena *a = &m->arena;
    int total = 0;
    for (int k = 0; k < n; k++) {
        const gs_shard_request *r = &reqs[k];
        const char *pat = r->pattern[0] == '%' ? r->pattern + 1 : r->pattern;
        const char *spec = r->spec;
        while (*spec == ' ' || *spec == '\t') spec++;
        bool raw = *spec == '{';
        gs_sharding *fixed = NULL;
        if (raw) {
            gs_diags inner = {0};
            if (gs_sharding_parse(a, spec, strlen(spec), &fixed, &inner, gs_span_none()) != GS_OK)
                return request_error(d, r, &inner);
            gs_diags_free(&inner);
        } else if (!mesh) {
            return gs_error(d, gs_span_none(),
                            "shard request '%s=%s': a PartitionSpec needs a "
                            "mesh (--mesh NAME=SIZE,...)",
                            r->pattern, r->spec);
        }
        int matched = 0;
        for (int c = 0; c < m->n_comps; c++) {
            gs_computation *comp = m->comps[c];
            for (int i = 0; i < comp->n_instrs; i++) {
                gs_instr *in = comp->instrs[i];
                if (fnmatch(pat, in->name, 0) != 0) continue;
                matched++;
                gs_sharding *s = fixed;
                if (!raw) {
                    if (!gs_shape_is_array(in->shape))
                        return gs_error(d, gs_span_none(),
                                        "shard request '%s=%s': '%s' is not "
                                        "an array; give it an XLA sharding {...}",
                                        r->pattern, r->spec, in->name);
                    gs_diags inner = {0};
                    if (gs_sharding_from_spec(a, mesh, spec, strlen(spec), in->shape->rank, &s,
                                              &inner, gs_span_none()) != GS_OK)
                        return request_error(d, r, &inner);
                    gs_diags_free(&inner);
                }
                if (check_fits(d, r, in, s) != GS_OK || check_devices(d, r, m, in, s) != GS_OK)
                    return GS_ERR;
                if (gs_instr_set_sharding(m, in, s) != GS_OK)
                    return gs_error(d, gs_span_none(), "out of memory");
                total++;
            }
        }
        if (matched == 0)
            return gs_error(d, gs_span_none(),
                            "shard request '%s=%s': no instruction matches "
                            "'%s'",
                            r->pattern, r->spec, pat);
    }
    if (n_set) *n_set = total;
    return GS_OK;
}

