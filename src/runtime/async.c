/*
 * async.c — asynchronous collectives on the threads backend: an all-reduce-start,
 * all-gather-start or collective-permute-start hands its collective to the device's helper
 * thread and returns at once, so the device computes what is scheduled between the start and
 * its -done while the helper meets the other devices; the -done waits for the helper's result.
 *
 * Order: the communicator pairs the devices' collectives by the order each device issues them,
 * so while a device has collectives with its helper, its synchronous collectives go through the
 * helper's queue too (and wait there); with none outstanding they run on the device's thread.
 * Memory: a start copies its operands into the job, so the helper never reads a buffer the
 * device may free (a failing device unwinds its values before the run is aborted); the helper's
 * result passes to the device at the -done, under the queue's mutex.
 */
#include "internal.h"
#include "base/sysalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    const gs_instr *in; /* the collective (a -start, or a synchronous one) */
    gs_value **ops;     /* the operands: copies for a start, borrowed for a synchronous one */
    int n;
    bool owns_ops;
    const gs_value *key; /* the start's value (what its -done receives), or NULL */
    gs_value *result;    /* the helper's result */
    gs_status st;
    gs_diags d;
    bool finished;
    struct job *next;
} job;

struct gs_async {
    const gs_device_ctx *ctx;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail; /* jobs in issue order: the helper takes them from head */
    job *done_list;   /* finished jobs not yet taken by their -done */
    int queued;       /* jobs not yet finished */
    bool quit;
};

static void job_free(job *j) {
    if (!j) return;
    if (j->owns_ops)
        for (int k = 0; k < j->n; k++) gs_value_free(j->ops[k]);
    if (j->owns_ops) free(j->ops);
    gs_value_free(j->result);
    gs_diags_free(&j->d);
    free(j);
}

static void *helper_main(void *arg) {
    gs_async *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->head && !a->quit) pthread_cond_wait(&a->cv, &a->mu);
        if (!a->head) break; /* quit with nothing left */
        job *j = a->head;
        pthread_mutex_unlock(&a->mu);
        gs_value *r = NULL;
        gs_status st = gs_collective_run(a->ctx, j->in, j->ops, j->n, &r, &j->d);
        pthread_mutex_lock(&a->mu);
        j->result = r;
        j->st = st;
        j->finished = true;
        a->head = j->next;
        if (!a->head) a->tail = NULL;
        a->queued--;
        if (j->key) { /* a start's: kept for its -done */
            j->next = a->done_list;
            a->done_list = j;
        }
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

gs_async *gs_async_new(const gs_device_ctx *ctx) {
    gs_async *a = gs_sys_calloc(1, sizeof *a);
    if (!a) return NULL;
    a->ctx = ctx;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    if (pthread_create(&a->thread, NULL, helper_main, a) != 0) {
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        free(a);
        return NULL;
    }
    a->started = true;
    return a;
}

void gs_async_free(gs_async *a) {
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->quit = true;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (a->started) pthread_join(a->thread, NULL);
    for (job *j = a->done_list, *next; j; j = next) {
        next = j->next;
        job_free(j);
    }
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

bool gs_async_busy(gs_async *a) {
    if (!a) return false;
    pthread_mutex_lock(&a->mu);
    bool busy = a->queued > 0;
    pthread_mutex_unlock(&a->mu);
    return busy;
}

static void enqueue(gs_async *a, job *j) {
    pthread_mutex_lock(&a->mu);
    if (a->tail)
        a->tail->next = j;
    else
        a->head = j;
    a->tail = j;
    a->queued++;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* Moves the diagnostics of j into d. */
static void take_diags(job *j, gs_diags *d) {
    for (int i = 0; i < j->d.n; i++) {
        const gs_diag *g = &j->d.items[i];
        if (g->severity == GS_SEV_ERROR)
            gs_error(d, g->span, "%s", g->message ? g->message : "out of memory");
    }
}

gs_status gs_async_sync(gs_async *a, const gs_instr *in, gs_value *const *ops, int n,
                        gs_value **out, gs_diags *d) {
    job *j = gs_sys_calloc(1, sizeof *j);
    if (!j) return gs_error(d, in->span, "out of memory");
    j->in = in;
    j->ops = (gs_value **)ops;
    j->n = n;
    enqueue(a, j);
    pthread_mutex_lock(&a->mu);
    while (!j->finished) pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
    gs_status st = j->st;
    if (st == GS_OK) {
        *out = j->result;
        j->result = NULL;
    } else {
        take_diags(j, d);
    }
    job_free(j);
    return st;
}

bool gs_async_start_op(gs_opcode op) {
    return op == GS_OP_ALL_REDUCE_START || op == GS_OP_ALL_GATHER_START ||
           op == GS_OP_COLLECTIVE_PERMUTE_START;
}

gs_status gs_async_start(gs_async *a, const gs_instr *in, gs_value *const *ops, int n,
                         gs_value **out, gs_diags *d) {
    job *j = gs_sys_calloc(1, sizeof *j);
    gs_value **copies = j ? gs_sys_calloc((size_t)(n > 0 ? n : 1), sizeof *copies) : NULL;
    bool ok = copies != NULL;
    for (int k = 0; ok && k < n; k++) ok = (copies[k] = gs_value_copy(ops[k])) != NULL;
    /* The start's value as XLA shapes it, its result a placeholder the -done replaces. */
    const gs_shape *s = in->shape;
    bool whole = in->op == GS_OP_ALL_REDUCE_START || s->type != GS_TUPLE || s->n_tuple < 2;
    gs_value *placeholder = ok ? gs_value_from_shape(whole ? s : s->tuple[1]) : NULL, *v = NULL;
    gs_diags ignore = {0};
    if (placeholder && gs_collective_wrap_start(in, ops, n, placeholder, &v, &ignore) != GS_OK)
        v = NULL;
    gs_diags_free(&ignore);
    if (!v) {
        if (copies)
            for (int k = 0; k < n; k++) gs_value_free(copies[k]);
        free(copies);
        free(j);
        return gs_error(d, in->span, "out of memory");
    }
    j->in = in;
    j->ops = copies;
    j->n = n;
    j->owns_ops = true;
    j->key = v;
    enqueue(a, j);
    *out = v;
    return GS_OK;
}

bool gs_async_finish(gs_async *a, const gs_value *start, gs_value **out, gs_diags *d,
                     gs_status *st) {
    if (!a) return false;
    pthread_mutex_lock(&a->mu);
    job *j = NULL;
    for (;;) {
        job **pp = &a->done_list;
        for (; *pp; pp = &(*pp)->next)
            if ((*pp)->key == start) break;
        if (*pp) {
            j = *pp;
            *pp = j->next;
            break;
        }
        bool queued = false;
        for (job *q = a->head; q; q = q->next) queued = queued || q->key == start;
        if (!queued) break; /* not a start of ours */
        pthread_cond_wait(&a->cv, &a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    if (!j) return false;
    *st = j->st;
    if (j->st == GS_OK) {
        *out = j->result;
        j->result = NULL;
    } else {
        take_diags(j, d);
    }
    job_free(j);
    return true;
}
