/*
 * sdy.c — Shardy's passes by their sdy_opt names (gspmd/sdy.h) and the sdy_opt driver: parse
 * a pass flag, run the passes in order, print the module in MLIR's form.
 *
 * -sdy-populate-op-sharding-rules attaches each op's factor rule, which the printer writes as
 * `sdy.sharding_rule` (gs_mlir_print_options.sharding_rules): the IR has no place for MLIR's
 * discardable attributes, and the rule is a function of the op, so it is built where it is
 * printed. The propagation passes are names only until Shardy's propagation exists.
 */
#include "gspmd/sdy.h"

#include "gspmd/text.h"

#include <string.h>

/* sdy_opt's flags, by gs_sdy_pass_kind. */
static const char *const PASS_NAMES[GS_SDY_N_PASSES] = {
    "sdy-populate-op-sharding-rules", "sdy-basic-propagate",         "sdy-aggressive-propagate",
    "sdy-op-priority-propagate",      "sdy-user-priority-propagate", "sdy-propagation-pipeline",
    "sdy-add-data-flow-edges",        "sdy-sink-data-flow-edges",
};

/* The options of populate-op-sharding-rules: `conservative-propagation[=true|false]`, space
 * separated as MLIR's pass options are. */
static gs_status populate_options(const char *opts, gs_sdy_pass *out, const char **why) {
    const char *p = opts;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        size_t len = strcspn(p, " ");
        const char *eq = memchr(p, '=', len);
        size_t key = eq ? (size_t)(eq - p) : len;
        static const char KEY[] = "conservative-propagation";
        if (key != sizeof KEY - 1 || memcmp(p, KEY, key) != 0)
            return *why = "unknown option of -sdy-populate-op-sharding-rules", GS_ERR;
        size_t vlen = eq ? len - key - 1 : 0;
        if (!eq || (vlen == 4 && memcmp(eq + 1, "true", 4) == 0) || (vlen == 1 && eq[1] == '1'))
            out->conservative_propagation = true;
        else if ((vlen == 5 && memcmp(eq + 1, "false", 5) == 0) || (vlen == 1 && eq[1] == '0'))
            out->conservative_propagation = false;
        else
            return *why = "conservative-propagation wants true or false", GS_ERR;
        p += len;
    }
    return GS_OK;
}

gs_status gs_sdy_pass_parse(const char *arg, gs_sdy_pass *out, const char **why) {
    memset(out, 0, sizeof *out);
    out->flag = arg;
    const char *name = arg;
    if (*name == '-') name++;
    if (*name == '-') name++;
    size_t len = strcspn(name, "=");
    int kind = -1;
    for (int k = 0; k < GS_SDY_N_PASSES; k++)
        if (strlen(PASS_NAMES[k]) == len && memcmp(PASS_NAMES[k], name, len) == 0) kind = k;
    if (name == arg || kind < 0) return *why = "unknown pass", GS_ERR;
    out->kind = (gs_sdy_pass_kind)kind;
    if (name[len] == '=') out->options = name + len + 1;
    if (out->kind == GS_SDY_POPULATE_OP_SHARDING_RULES && out->options) {
        /* `="a=b c=d"` as a shell left it: the quotes are MLIR's, not part of the options */
        char buf[256];
        size_t n = strlen(out->options);
        if (n >= sizeof buf) return *why = "pass options too long", GS_ERR;
        memcpy(buf, out->options, n + 1);
        if (n >= 2 && (buf[0] == '"' || buf[0] == '\'') && buf[n - 1] == buf[0]) {
            buf[n - 1] = 0;
            return populate_options(buf + 1, out, why);
        }
        return populate_options(buf, out, why);
    }
    return GS_OK;
}

char *gs_sdy_opt(gs_module *m, int n, const gs_sdy_pass *passes, gs_diags *d) {
    gs_mlir_print_options o = {.sdy_opt = true};
    for (int i = 0; i < n; i++) {
        switch (passes[i].kind) {
        case GS_SDY_POPULATE_OP_SHARDING_RULES:
            o.sharding_rules = true;
            o.conservative_propagation = passes[i].conservative_propagation;
            break;
        default:
            gs_error(d, gs_span_none(), "%s: pass not implemented yet", passes[i].flag);
            return NULL;
        }
    }
    return gs_module_to_mlir_ex(m, &o, d);
}
