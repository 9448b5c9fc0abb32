/*
 * explain.c — where each sharding of a Shardy propagation came from (`gspmd propagate
 * --explain NAME` with --algorithm shardy). from_ir.c turns the engine's events into records:
 * the annotations a module came with, then every change of a value's sharding with the op it
 * went through and the value it came from. A query prints the chain of records back to an
 * annotation, then the value's own history, as GSPMD's explain does (src/propagate/explain.c).
 */
#include "internal.h"
#include "../internal.h"

#include <stdlib.h>
#include <string.h>

gs_sdy_explain *sdy_explain_new(void) {
    gs_sdy_explain *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    gs_arena_init(&x->a);
    gs_vec_init(&x->records, sizeof(sdy_record));
    return x;
}

bool sdy_explain_add(gs_sdy_explain *x, const char *value, const char *sh, const char *how,
                     int from) {
    sdy_record r = {gs_arena_strdup(&x->a, value), gs_arena_strdup(&x->a, sh),
                    gs_arena_strdup(&x->a, how), from};
    if (!r.value || !r.sh || !r.how || gs_vec_push(&x->records, &r) != GS_OK) return false;
    return gs_strmap_put(&x->last, r.value, (void *)(intptr_t)x->records.n) == GS_OK;
}

static void line(gs_sb *sb, const sdy_record *r) {
    gs_sb_printf(sb, "  '%s' %s  %s\n", r->value, r->sh, r->how);
}

gs_status sdy_explain_query(const gs_sdy_explain *x, const char *name, gs_sb *sb, gs_diags *d) {
    if (name && name[0] == '%') name++;
    intptr_t at = name ? (intptr_t)gs_strmap_get(&x->last, name) : 0;
    if (!at)
        return gs_error(d, gs_span_none(), "no instruction named '%s' has a Shardy sharding",
                        name ? name : "");
    const sdy_record *rs = x->records.data;
    const sdy_record *r = &rs[at - 1];
    gs_sb_printf(sb, "'%s': %s\nchain:\n", r->value, r->sh);
    int k = (int)at - 1;
    for (size_t hops = 0; k >= 0 && hops <= x->records.n; hops++) {
        line(sb, &rs[k]);
        k = rs[k].from;
    }
    int n = 0;
    for (size_t i = 0; i < x->records.n; i++) n += strcmp(rs[i].value, r->value) == 0;
    if (n > 1) {
        gs_sb_printf(sb, "history of '%s':\n", r->value);
        int j = 0;
        for (size_t i = 0; i < x->records.n; i++)
            if (strcmp(rs[i].value, r->value) == 0)
                gs_sb_printf(sb, "  %d. %s  %s\n", ++j, rs[i].sh, rs[i].how);
    }
    return sb->failed ? gs_error(d, gs_span_none(), "out of memory") : GS_OK;
}

void sdy_explain_free(gs_sdy_explain *x) {
    if (!x) return;
    gs_vec_free(&x->records);
    gs_strmap_free(&x->last);
    gs_arena_free(&x->a);
    free(x);
}
