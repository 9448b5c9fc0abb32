/*
 * explain.c — where an instruction's sharding came from. During the pass every change of a
 * sharding is recorded as a step (the sharding, the instruction it came from and that
 * instruction's step at the time, the rule, the direction, the aggressiveness level); here the
 * steps are followed back from the instruction's last one to an annotation, one line per hop,
 * followed by the instruction's own history when its sharding changed more than once.
 */
#include "internal.h"

#include <string.h>

static const char *dir_text(int dir) {
    switch (dir) {
    case GS_PROP_DIR_ANNOTATION: return "annotation";
    case GS_PROP_DIR_FORWARD: return "forward";
    case GS_PROP_DIR_BACKWARD: return "backward";
    case GS_PROP_DIR_GROUP: return "shard group";
    case GS_PROP_DIR_CALL: return "computation";
    case GS_PROP_DIR_REFINE: return "refined";
    default: return "fixup";
    }
}

/* A sharding as text, long tuples shortened to their first elements. */
static void print_sharding(gs_sb *sb, const gs_sharding *s) {
    gs_sb t = {0};
    gs_sharding_print(&t, s);
    const char *text = gs_sb_str(&t);
    size_t len = strlen(text);
    if (len <= 160 || s->kind != GS_SHARDING_TUPLE) {
        gs_sb_puts(sb, text);
    } else {
        size_t cut = 120;
        while (cut > 0 && text[cut] != ',') cut--;
        gs_sb_putn(sb, text, cut);
        gs_sb_printf(sb, ", ... (%d elements)}", s->n_tuple);
    }
    gs_sb_free(&t);
}

/* One step as text: `{sharding}  forward from 'b' by dot at aggressiveness 1`. */
static void print_step(gs_sb *sb, const gs_prop_step *st) {
    print_sharding(sb, st->sharding);
    gs_sb_printf(sb, "  %s", dir_text(st->dir));
    if (st->dir == GS_PROP_DIR_ANNOTATION && !st->from) {
        gs_sb_printf(sb, " (%s)", st->rule);
        return;
    }
    if (st->from) gs_sb_printf(sb, " from '%s'", st->from->name);
    gs_sb_printf(sb, " by %s", st->rule);
    if (st->level >= 0)
        gs_sb_printf(sb, " at aggressiveness %d", st->level);
    else
        gs_sb_puts(sb, " (before or after the levels)");
}

void gs_prop_explain(const gs_prop_ctx *c, const gs_instr *in, gs_sb *sb) {
    const gs_prop_node *n = GS_PROP_NODE(in);
    const gs_sharding *final = n->alias ? GS_PROP_SHARDING(gs_prop_operand(in, 0)) : n->sh;
    gs_sb_printf(sb, "'%s': ", in->name);
    if (!final) {
        gs_sb_puts(sb, "no sharding");
        if (n->n_steps == 0) gs_sb_puts(sb, " (no annotation reaches it)");
        gs_sb_putc(sb, '\n');
    } else {
        print_sharding(sb, final);
        gs_sb_putc(sb, '\n');
    }
    if (n->alias) {
        gs_sb_printf(sb, "  a Sharding custom-call that only names a shard group: it stands for "
                         "its operand '%s'\n",
                     gs_prop_operand(in, 0)->name);
        n = GS_PROP_NODE(gs_prop_operand(in, 0));
    }
    if (n->n_steps == 0) return;
    gs_sb_puts(sb, "chain:\n");
    const gs_instr *cur = n->in;
    int step = n->n_steps - 1;
    for (int hops = 0; cur && step >= 0 && hops < 4096; hops++) {
        const gs_prop_node *cn = GS_PROP_NODE(cur);
        if (step >= cn->n_steps) break;
        const gs_prop_step *st = &cn->steps[step];
        gs_sb_printf(sb, "  '%s' ", cur->name);
        print_step(sb, st);
        gs_sb_putc(sb, '\n');
        if (!st->from || st->dir == GS_PROP_DIR_ANNOTATION) break;
        cur = st->from;
        step = st->from_step;
    }
    if (n->n_steps > 1) {
        gs_sb_printf(sb, "history of '%s':\n", n->in->name);
        for (int i = 0; i < n->n_steps; i++) {
            gs_sb_printf(sb, "  %d. ", i + 1);
            print_step(sb, &n->steps[i]);
            gs_sb_putc(sb, '\n');
        }
    }
    (void)c;
}
