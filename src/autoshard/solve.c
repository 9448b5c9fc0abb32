/*
 * src/autoshard/solve.c — choosing: the integer program solved by CBC (COIN-OR's branch and
 * cut, through its C interface), or the greedy choice.
 *
 * The program (XLA's auto-sharding and Alpa's formulation): a binary x[v][s] per value and
 * candidate, y[o][k] per op and strategy, one of each chosen; an op's strategy gives its
 * results' candidates (y picks x); each operand reshards from its value's candidate to the one
 * the strategy wants, the pair picked by continuous z[s][r] whose rows and columns sum to x and
 * y (integral x and y make z integral); the cost is the sum of the chosen values' elementwise
 * compute, ops' strategies and reshards; at each memory point the live values over their
 * shards fit the limit.
 *
 * CBC is loaded when a program is first solved (dlopen of GSPMD_CBC_LIBRARY), not linked: the
 * other commands start without mapping it and what it needs (3.5 ms of 6.4 ms per process), and
 * a machine without it makes the greedy choice and says why.
 *
 * CBC rather than GLPK: its branch and cut (with Clp's simplex and the Cgl cuts) solves these
 * assignment-shaped programs of tens of thousands of binaries in seconds where GLPK's branch and
 * bound stalls, it takes a time limit and reports the best bound (the gap), and Alpa solved the
 * same formulation with it.
 *
 * The greedy choice (no solver built in, or none found in time): ops in program order, each
 * taking its cheapest strategy given the values already chosen (a value not yet chosen takes
 * what the strategy wants), a value no op chose its cheapest candidate. When that does not fit
 * memory, every value takes its most split candidate and the ops choose again.
 */
#include "autoshard/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef GSPMD_HAVE_CBC
#include <Cbc_C_Interface.h>
#include <dlfcn.h>
#endif

/* ------------------------------------------------------------------ evaluating a choice */

static double op_cost(const as_problem *p, const as_op *o, int k) {
    double s = o->cost[k];
    for (int i = 0; i < o->n_opd; i++) {
        int u = o->opd_value[i];
        if (u < 0) continue;
        const as_value *x = &p->values[u];
        s += as_reshard_s(p, &x->cand[x->choice], &x->cand[o->req[k * o->n_opd + i]],
                          o->opd_bytes[i]) *
             o->mult;
    }
    for (int j = 0; j < o->n_res; j++) { /* a result made otherwise reshards to its value */
        int v = o->res_value[j];
        int c = o->out[k * o->n_res + j];
        if (v < 0 || c == p->values[v].choice) continue;
        const as_value *x = &p->values[v];
        s += as_reshard_s(p, &x->cand[c], &x->cand[x->choice], x->bytes) * o->mult;
    }
    return s;
}

double as_objective(const as_problem *p) {
    double s = 0;
    for (int v = 0; v < p->n_values; v++) s += p->values[v].node_cost[p->values[v].choice];
    for (int k = 0; k < p->n_ops; k++) s += op_cost(p, &p->ops[k], p->ops[k].choice);
    for (int e = 0; e < p->n_edges; e++) {
        const as_edge *ed = &p->edges[e];
        const as_value *f = &p->values[ed->from], *t = &p->values[ed->to];
        s += as_reshard_s(p, &f->cand[f->choice], &t->cand[t->choice], ed->bytes) * ed->mult;
    }
    return s;
}

static double point_bytes(const as_problem *p, const as_point *pt) {
    double s = 0;
    for (int q = 0; q < pt->n; q++) {
        const as_value *x = &p->values[pt->value[q]];
        s += pt->bytes[q] / (double)x->cand[x->choice].shards;
    }
    return s;
}

double as_peak(const as_problem *p) {
    double m = 0;
    for (int t = 0; t < p->n_points; t++) {
        double b = point_bytes(p, &p->points[t]);
        if (b > m) m = b;
    }
    return m;
}

/* ------------------------------------------------------------------ greedy */

static void greedy_op(as_problem *p, as_op *o) {
    int best = -1;
    double best_c = INFINITY;
    for (int pass = 0; pass < 2 && best < 0; pass++) { /* pass 1: results may reshard */
        for (int k = 0; k < o->n_strat; k++) {
            double c = o->cost[k];
            bool ok = true;
            for (int j = 0; j < o->n_res && ok; j++) {
                int v = o->res_value[j];
                if (v < 0) continue;
                const as_value *x = &p->values[v];
                int want = o->out[k * o->n_res + j];
                if (x->choice < 0)
                    c += x->node_cost[want];
                else if (x->choice != want && !pass)
                    ok = false;
                else if (x->choice != want)
                    c += as_reshard_s(p, &x->cand[want], &x->cand[x->choice], x->bytes) * o->mult;
            }
            for (int i = 0; i < o->n_opd && ok; i++) {
                int u = o->opd_value[i];
                if (u < 0) continue;
                const as_value *x = &p->values[u];
                int want = o->req[k * o->n_opd + i];
                c += x->choice < 0 ? x->node_cost[want]
                                   : as_reshard_s(p, &x->cand[x->choice], &x->cand[want],
                                                  o->opd_bytes[i]) *
                                         o->mult;
            }
            if (ok && c < best_c) best_c = c, best = k;
        }
    }
    if (best < 0) best = o->whole;
    o->choice = best;
    for (int i = 0; i < o->n_opd; i++) {
        int u = o->opd_value[i];
        if (u >= 0 && p->values[u].choice < 0) p->values[u].choice = o->req[best * o->n_opd + i];
    }
    for (int j = 0; j < o->n_res; j++) {
        int v = o->res_value[j];
        if (v >= 0 && p->values[v].choice < 0) p->values[v].choice = o->out[best * o->n_res + j];
    }
}

/* fixed: values keep their choice (else they start unchosen, pins aside). */
static void greedy(as_problem *p, bool fixed) {
    for (int v = 0; v < p->n_values && !fixed; v++)
        p->values[v].choice = p->values[v].pinned >= 0 ? p->values[v].pinned : -1;
    int io = 0, ie = 0;
    while (io < p->n_ops || ie < p->n_edges) {
        if (ie >= p->n_edges || (io < p->n_ops && p->ops[io].seq < p->edges[ie].seq)) {
            greedy_op(p, &p->ops[io++]);
            continue;
        }
        const as_edge *e = &p->edges[ie++]; /* same dims: the same candidates */
        as_value *f = &p->values[e->from], *t = &p->values[e->to];
        if (f->choice < 0 && t->choice >= 0) f->choice = t->choice;
        if (t->choice < 0 && f->choice >= 0) t->choice = f->choice;
    }
    for (int v = 0; v < p->n_values; v++) {
        as_value *x = &p->values[v];
        if (x->choice >= 0) continue;
        x->choice = 0;
        for (int s = 1; s < x->n_cand; s++)
            if (x->node_cost[s] < x->node_cost[x->choice]) x->choice = s;
    }
}

/* Every value on its most split candidate (pins kept): the least memory the search knows. */
static void most_split(as_problem *p) {
    for (int v = 0; v < p->n_values; v++) {
        as_value *x = &p->values[v];
        x->choice = x->pinned >= 0 ? x->pinned : 0;
        for (int s = 0; s < x->n_cand && x->pinned < 0; s++)
            if (x->cand[s].shards > x->cand[x->choice].shards) x->choice = s;
    }
}

/* The error for a memory limit no choice fits, with the smallest peak found and where. */
static gs_status no_fit(as_problem *p, gs_diags *d) {
    most_split(p);
    double peak = 0;
    const gs_instr *at = NULL;
    for (int t = 0; t < p->n_points; t++) {
        double b = point_bytes(p, &p->points[t]);
        if (b > peak) peak = b, at = p->points[t].at;
    }
    return gs_error(d, at ? at->span : gs_span_none(),
                    "no sharding on this mesh fits the memory limit of %.4g GiB per device: the "
                    "smallest peak autoshard finds is %.4g GiB, at %%%s",
                    p->memory_limit / (1 << 30), peak / (1 << 30), at ? at->name : "?");
}

/* ------------------------------------------------------------------ CBC */

#ifdef GSPMD_HAVE_CBC
/* The functions of CBC's C interface autoshard calls, from the loaded library. */
typedef struct cbc_api {
    void *lib;
    __typeof__(Cbc_newModel) *newModel;
    __typeof__(Cbc_deleteModel) *deleteModel;
    __typeof__(Cbc_addCol) *addCol;
    __typeof__(Cbc_addRow) *addRow;
    __typeof__(Cbc_setLogLevel) *setLogLevel;
    __typeof__(Cbc_setParameter) *setParameter;
    __typeof__(Cbc_setMaximumSeconds) *setMaximumSeconds;
    __typeof__(Cbc_setAllowableFractionGap) *setAllowableFractionGap;
    __typeof__(Cbc_solve) *solve;
    __typeof__(Cbc_bestSolution) *bestSolution;
    __typeof__(Cbc_isProvenInfeasible) *isProvenInfeasible;
    __typeof__(Cbc_isProvenOptimal) *isProvenOptimal;
    __typeof__(Cbc_getBestPossibleObjValue) *getBestPossibleObjValue;
} cbc_api;

/* Symbol `name` of lib into *fn (a function pointer); false when it is missing. */
static bool load_fn(void *lib, const char *name, void *fn, size_t size) {
    void *sym = dlsym(lib, name);
    if (sym) memcpy(fn, &sym, size);
    return sym != NULL;
}

/* Loads CBC into *c; on failure *why says what failed (the greedy choice's reason). */
static bool cbc_open(cbc_api *c, const char **why) {
    memset(c, 0, sizeof *c);
    c->lib = dlopen(GSPMD_CBC_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) {
        *why = "the solver's library (" GSPMD_CBC_LIBRARY ") cannot be loaded";
        return false;
    }
#define LOAD(f) load_fn(c->lib, "Cbc_" #f, &c->f, sizeof c->f)
    if (LOAD(newModel) && LOAD(deleteModel) && LOAD(addCol) && LOAD(addRow) &&
        LOAD(setLogLevel) && LOAD(setParameter) && LOAD(setMaximumSeconds) &&
        LOAD(setAllowableFractionGap) && LOAD(solve) && LOAD(bestSolution) &&
        LOAD(isProvenInfeasible) && LOAD(isProvenOptimal) && LOAD(getBestPossibleObjValue))
        return true;
#undef LOAD
    dlclose(c->lib);
    c->lib = NULL;
    *why = "the solver's library (" GSPMD_CBC_LIBRARY ") lacks a function autoshard calls";
    return false;
}

#endif

bool gs_autoshard_has_solver(void) {
#ifdef GSPMD_HAVE_CBC
    cbc_api c;
    const char *why;
    if (!cbc_open(&c, &why)) return false;
    dlclose(c.lib);
    return true;
#else
    return false;
#endif
}

#ifdef GSPMD_HAVE_CBC
typedef struct ilp {
    const cbc_api *cbc;
    Cbc_Model *m;
    double scale; /* objective units per second: the all-replicated estimate is 1000 units,
                     so that costs stay far above the solver's absolute tolerances */
    int n_cols, n_rows;
    int *xbase, *ybase;
} ilp;

static int add_col(ilp *q, double ub, double obj, bool integer) {
    q->cbc->addCol(q->m, "", 0, ub, obj * q->scale, integer ? 1 : 0, 0, NULL, NULL);
    return q->n_cols++;
}

static void add_row(ilp *q, int nz, const int *cols, const double *coefs, char sense, double rhs) {
    q->cbc->addRow(q->m, "", nz, cols, coefs, sense, rhs);
    q->n_rows++;
}

/* The transport rows that pick the pair (from value u's candidate, the candidate wanted): z
 * per pair, rows summing to x[u] and to the columns of `want` (want_cols[r] lists the
 * columns whose sum says candidate r is wanted). */
static bool transport(ilp *q, const as_problem *p, int u, int n_r, const int *r_cand,
                      int *const *want_cols, const int *n_want, const double *const *want_coef,
                      const as_value *to, double bytes, double mult, int *cols, double *coefs) {
    const as_value *x = &p->values[u];
    int ns = x->n_cand, zb = q->n_cols;
    for (int s = 0; s < ns; s++)
        for (int r = 0; r < n_r; r++)
            add_col(q, 1, as_reshard_s(p, &x->cand[s], &to->cand[r_cand[r]], bytes) * mult, false);
    for (int s = 0; s < ns; s++) { /* sum over r of z[s][r] = x[u][s] */
        int n = 0;
        for (int r = 0; r < n_r; r++) cols[n] = zb + s * n_r + r, coefs[n++] = 1;
        cols[n] = q->xbase[u] + s, coefs[n++] = -1;
        add_row(q, n, cols, coefs, 'E', 0);
    }
    for (int r = 0; r < n_r; r++) { /* sum over s of z[s][r] = wanted r */
        int n = 0;
        for (int s = 0; s < ns; s++) cols[n] = zb + s * n_r + r, coefs[n++] = 1;
        for (int w = 0; w < n_want[r]; w++) cols[n] = want_cols[r][w], coefs[n++] = -want_coef[r][w];
        add_row(q, n, cols, coefs, 'E', 0);
    }
    return true;
}

/* Builds and solves the program; true with the choices set when CBC found a solution. */
/* Strategy s of op o: its cost, with the reshard of each result it makes otherwise than a
 * pinned value's sharding (the partitioner computes the op as the strategy says, then
 * reshards: the pin fixes the value, not the op). */
static double pinned_out_cost(const as_problem *p, const as_op *o, int s) {
    double c = o->cost[s];
    for (int j = 0; j < o->n_res; j++) {
        int v = o->res_value[j];
        if (v < 0 || p->values[v].pinned < 0) continue;
        const as_value *x = &p->values[v];
        c += as_reshard_s(p, &x->cand[o->out[s * o->n_res + j]], &x->cand[x->pinned], x->bytes) *
             o->mult;
    }
    return c;
}

static bool solve_cbc(as_problem *p, double seconds, gs_autoshard_result *r, bool *infeasible) {
    *infeasible = false;
    /* its size first: too large a program goes to the greedy choice */
    double cols = 0;
    int max_nz = MAX_CAND + 2;
    for (int v = 0; v < p->n_values; v++) cols += p->values[v].n_cand;
    for (int k = 0; k < p->n_ops; k++) {
        const as_op *o = &p->ops[k];
        cols += o->n_strat;
        if (o->n_strat + 2 > max_nz) max_nz = o->n_strat + 2;
        for (int i = 0; i < o->n_opd; i++)
            if (o->opd_value[i] >= 0)
                cols += (double)p->values[o->opd_value[i]].n_cand *
                        (o->n_strat < MAX_CAND ? o->n_strat : MAX_CAND);
    }
    for (int e = 0; e < p->n_edges; e++)
        cols += (double)p->values[p->edges[e].from].n_cand * p->values[p->edges[e].to].n_cand;
    for (int v = 0; v < p->n_values; v++)
        if (p->values[v].n_cand * 2 + 2 > max_nz) max_nz = p->values[v].n_cand * 2 + 2;
    int pt_nz = 0;
    for (int t = 0; t < p->n_points; t++) {
        int n = 0;
        for (int i = 0; i < p->points[t].n; i++) n += p->values[p->points[t].value[i]].n_cand;
        if (n > pt_nz) pt_nz = n;
    }
    if (pt_nz > max_nz) max_nz = pt_nz;
    if (cols > 4e6) {
        r->why_greedy = "the program is too large for the solver";
        return false;
    }
    cbc_api cbc;
    if (!cbc_open(&cbc, &r->why_greedy)) return false;
    ilp q = {&cbc, cbc.newModel(), 1, 0, 0, NULL, NULL};
    q.scale = r->replicated > 0 ? 1e3 / r->replicated : 1e6;
    q.xbase = malloc(sizeof(int) * (size_t)(p->n_values + 1));
    q.ybase = malloc(sizeof(int) * (size_t)(p->n_ops + 1));
    int *colv = malloc(sizeof(int) * (size_t)max_nz * 2 + 64);
    double *coef = malloc(sizeof(double) * (size_t)max_nz * 2 + 64);
    bool ok = q.m && q.xbase && q.ybase && colv && coef;
    if (q.m) cbc.setLogLevel(q.m, 0);
    /* CBC's presolve of these programs (tens of thousands of transport columns, many costs
     * equal) takes longer than solving them: 17 s of a 20 s solve on tiny-moe's */
    if (q.m) cbc.setParameter(q.m, "presolve", "off");
    for (int v = 0; ok && v < p->n_values; v++) {
        const as_value *x = &p->values[v];
        q.xbase[v] = q.n_cols;
        for (int s = 0; s < x->n_cand; s++)
            add_col(&q, x->pinned >= 0 && x->pinned != s ? 0 : 1, x->node_cost[s], true);
    }
    for (int k = 0; ok && k < p->n_ops; k++) {
        const as_op *o = &p->ops[k];
        q.ybase[k] = q.n_cols;
        for (int s = 0; s < o->n_strat; s++) add_col(&q, 1, pinned_out_cost(p, o, s), true);
    }
    for (int v = 0; ok && v < p->n_values; v++) { /* one candidate per value */
        int n = p->values[v].n_cand;
        for (int s = 0; s < n; s++) colv[s] = q.xbase[v] + s, coef[s] = 1;
        add_row(&q, n, colv, coef, 'E', 1);
    }
    for (int k = 0; ok && k < p->n_ops; k++) {
        const as_op *o = &p->ops[k];
        for (int s = 0; s < o->n_strat; s++) colv[s] = q.ybase[k] + s, coef[s] = 1;
        add_row(&q, o->n_strat, colv, coef, 'E', 1); /* one strategy per op */
        for (int j = 0; j < o->n_res; j++) { /* its results are their values */
            int v = o->res_value[j];
            if (v < 0 || p->values[v].pinned >= 0) continue; /* (pinned: in its cost) */
            for (int c = 0; c < p->values[v].n_cand; c++) {
                int n = 0;
                for (int s = 0; s < o->n_strat; s++)
                    if (o->out[s * o->n_res + j] == c) colv[n] = q.ybase[k] + s, coef[n++] = 1;
                colv[n] = q.xbase[v] + c, coef[n++] = -1;
                add_row(&q, n, colv, coef, 'E', 0);
            }
        }
        for (int i = 0; i < o->n_opd; i++) { /* each operand reshards to what is wanted */
            int u = o->opd_value[i];
            if (u < 0) continue;
            int nr = 0, r_cand[MAX_CAND], n_want[MAX_CAND];
            int *want_cols[MAX_CAND];
            double *want_coef[MAX_CAND];
            for (int s = 0; s < o->n_strat; s++) {
                int c = o->req[s * o->n_opd + i], rr = 0;
                while (rr < nr && r_cand[rr] != c) rr++;
                if (rr == nr && nr < MAX_CAND) r_cand[nr++] = c;
            }
            for (int rr = 0; rr < nr; rr++) {
                want_cols[rr] = malloc(sizeof(int) * (size_t)o->n_strat);
                want_coef[rr] = malloc(sizeof(double) * (size_t)o->n_strat);
                n_want[rr] = 0;
                if (!want_cols[rr] || !want_coef[rr]) ok = false;
                for (int s = 0; ok && s < o->n_strat; s++)
                    if (o->req[s * o->n_opd + i] == r_cand[rr])
                        want_cols[rr][n_want[rr]] = q.ybase[k] + s,
                        want_coef[rr][n_want[rr]++] = 1;
            }
            if (ok)
                transport(&q, p, u, nr, r_cand, want_cols, n_want,
                          (const double *const *)want_coef, &p->values[u], o->opd_bytes[i],
                          o->mult, colv, coef);
            for (int rr = 0; rr < nr; rr++) free(want_cols[rr]), free(want_coef[rr]);
        }
    }
    for (int e = 0; ok && e < p->n_edges; e++) { /* elementwise operands follow the result */
        const as_edge *ed = &p->edges[e];
        const as_value *t = &p->values[ed->to];
        int nr = t->n_cand, r_cand[MAX_CAND], n_want[MAX_CAND], cols1[MAX_CAND];
        int *want_cols[MAX_CAND];
        double one[MAX_CAND], *want_coef[MAX_CAND];
        for (int c = 0; c < nr; c++) {
            r_cand[c] = c, n_want[c] = 1, cols1[c] = q.xbase[ed->to] + c, one[c] = 1;
            want_cols[c] = &cols1[c], want_coef[c] = &one[c];
        }
        transport(&q, p, ed->from, nr, r_cand, want_cols, n_want,
                  (const double *const *)want_coef, t, ed->bytes, ed->mult, colv, coef);
    }
    for (int t = 0; ok && t < p->n_points; t++) { /* the live values fit */
        const as_point *pt = &p->points[t];
        int n = 0;
        for (int i = 0; i < pt->n; i++) {
            const as_value *x = &p->values[pt->value[i]];
            for (int s = 0; s < x->n_cand; s++) /* in MiB */
                colv[n] = q.xbase[pt->value[i]] + s,
                coef[n++] = pt->bytes[i] / (double)x->cand[s].shards / (1 << 20);
        }
        if (n) add_row(&q, n, colv, coef, 'L', p->memory_limit / (1 << 20));
    }
    bool found = false;
    if (ok) {
        cbc.setMaximumSeconds(q.m, seconds);
        cbc.setAllowableFractionGap(q.m, 1e-6);
        clock_t t0 = clock();
        cbc.solve(q.m);
        r->solve_s = (double)(clock() - t0) / CLOCKS_PER_SEC;
        r->n_columns = q.n_cols;
        r->n_rows = q.n_rows;
        const double *sol = cbc.bestSolution(q.m);
        *infeasible = !sol && cbc.isProvenInfeasible(q.m);
        if (sol) {
            found = true;
            for (int v = 0; v < p->n_values; v++) {
                as_value *x = &p->values[v];
                x->choice = 0;
                for (int s = 0; s < x->n_cand; s++)
                    if (sol[q.xbase[v] + s] > 0.5) x->choice = s;
            }
            for (int k = 0; k < p->n_ops; k++) {
                as_op *o = &p->ops[k];
                o->choice = o->whole;
                for (int s = 0; s < o->n_strat; s++)
                    if (sol[q.ybase[k] + s] > 0.5) o->choice = s;
            }
            r->optimal = cbc.isProvenOptimal(q.m) != 0;
            r->bound = cbc.getBestPossibleObjValue(q.m) / q.scale;
        } else if (!*infeasible) {
            r->why_greedy = "the solver found no solution in its time limit";
        }
    } else {
        r->why_greedy = "out of memory building the program";
    }
    if (q.m) cbc.deleteModel(q.m);
    dlclose(cbc.lib);
    free(q.xbase);
    free(q.ybase);
    free(colv);
    free(coef);
    return found;
}
#endif

gs_status as_solve(as_problem *p, const gs_autoshard_options *o, gs_autoshard_result *r,
                   gs_diags *d) {
    bool done = false;
    r->solver = "greedy";
#ifdef GSPMD_HAVE_CBC
    if (!o->greedy) {
        bool infeasible;
        done = solve_cbc(p, o->time_limit > 0 ? o->time_limit : 60, r, &infeasible);
        if (infeasible) return no_fit(p, d);
        if (done) r->solver = "cbc";
    } else {
        r->why_greedy = "asked for";
    }
#else
    r->why_greedy = o->greedy ? "asked for" : "this build has no solver (CBC)";
#endif
    if (!done) {
        greedy(p, false);
        if (as_peak(p) > p->memory_limit) { /* the least memory, then the ops' best */
            most_split(p);
            if (as_peak(p) > p->memory_limit) return no_fit(p, d);
            greedy(p, true);
        }
        r->bound = 0;
    }
    double mine = as_objective(p);
    if (mine > r->replicated) { /* never worse than replicating everything, when it fits */
        int *keep_v = malloc(sizeof(int) * (size_t)(p->n_values + 1));
        int *keep_o = malloc(sizeof(int) * (size_t)(p->n_ops + 1));
        if (keep_v && keep_o) {
            for (int v = 0; v < p->n_values; v++) keep_v[v] = p->values[v].choice;
            for (int k = 0; k < p->n_ops; k++) keep_o[k] = p->ops[k].choice;
            bool pinned = false;
            for (int v = 0; v < p->n_values; v++) {
                pinned |= p->values[v].pinned > 0; /* (a pin on candidate 0 allows it) */
                p->values[v].choice = 0;
            }
            for (int k = 0; k < p->n_ops; k++) p->ops[k].choice = p->ops[k].whole;
            if (pinned || as_peak(p) > p->memory_limit) { /* not a choice here: keep mine */
                for (int v = 0; v < p->n_values; v++) p->values[v].choice = keep_v[v];
                for (int k = 0; k < p->n_ops; k++) p->ops[k].choice = keep_o[k];
            }
        }
        free(keep_v);
        free(keep_o);
    }
    r->objective = as_objective(p);
    if (!done) r->bound = r->objective;
    r->peak_bytes = as_peak(p);
    if (r->peak_bytes > p->memory_limit * (1 + 1e-9)) return no_fit(p, d);
    return GS_OK;
}
