/*
 * share.c — work shared by the device threads of one process: the replicas of a sharding compute
 * the same dots and convolutions on the same operands (a weight split 8 ways over 128 devices:
 * 16 devices hold each slice), and when a process runs more device threads than it has cores
 * they take turns on the cores. One device computes such an instruction; the others, finding its
 * operands equal bit for bit, wait for it and take a copy of its result. The results are what
 * each device would compute itself: the kernels are deterministic and read nothing but their
 * operands (and every device runs BLAS on one thread when devices outnumber cores).
 *
 * An entry is keyed by the instruction and a hash of its operands, and holds copies of the
 * operands (compared in full before a result is shared) and of the result. Instructions under
 * GS_SHARE_MIN_FLOPS are computed by each device (sharing would cost more than it saves), and
 * entries stop being made once the copies reach GS_SHARE_MAX_BYTES.
 */
#include "internal.h"
#include "base/sysalloc.h"
#include "gspmd/cost.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GS_SHARE_MIN_FLOPS (1 << 26)
#define GS_SHARE_MAX_BYTES ((size_t)1 << 30)

enum { COMPUTING, DONE, FAILED };

typedef struct entry {
    const gs_instr *in;
    uint64_t hash;
    int n;
    gs_value **ops; /* copies of the operands */
    gs_value *result;
    int state;
    struct entry *next;
} entry;

struct gs_share {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    entry *head;
    size_t bytes;   /* of the copies held */
    int64_t reused; /* results taken instead of computed */
};

gs_share *gs_share_new(void) {
    gs_share *s = gs_sys_calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    return s;
}

static void entry_free(entry *e) {
    for (int k = 0; k < e->n; k++) gs_value_free(e->ops[k]);
    free(e->ops);
    gs_value_free(e->result);
    free(e);
}

void gs_share_free(gs_share *s) {
    if (!s) return;
    for (entry *e = s->head, *next; e; e = next) {
        next = e->next;
        entry_free(e);
    }
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int64_t gs_share_reused(const gs_share *s) { return s ? s->reused : 0; }

bool gs_share_default(int local) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return local > 1 && cores > 0 && local > cores;
}

static uint64_t mix(uint64_t h, uint64_t w) {
    h ^= w;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* A hash of the operands' types, dims and bytes (eight at a time). */
static uint64_t hash_ops(gs_value *const *ops, int n) {
    uint64_t h = 0x243F6A8885A308D3ull;
    for (int k = 0; k < n; k++) {
        const gs_value *v = ops[k];
        h = mix(h, (uint64_t)v->type);
        for (int i = 0; i < v->rank; i++) h = mix(h, (uint64_t)v->dims[i]);
        size_t bytes = gs_value_bytes(v), i = 0;
        const unsigned char *p = v->data;
        for (; i + 8 <= bytes; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            h = mix(h, w);
        }
        uint64_t w = 0;
        memcpy(&w, p + i, bytes - i);
        h = mix(h, w ^ bytes);
    }
    return h;
}

static bool shareable(const gs_instr *in, gs_value *const *ops, int n) {
    if (in->op != GS_OP_DOT && in->op != GS_OP_CONVOLUTION) return false;
    for (int k = 0; k < n; k++)
        if (!ops[k] || ops[k]->type == GS_TUPLE || ops[k]->type == GS_TOKEN || ops[k]->devices)
            return false;
    return gs_cost_instr_flops(in) >= GS_SHARE_MIN_FLOPS;
}

gs_value *gs_share_begin(void *ctx, const gs_instr *in, gs_value *const *ops, int n, void **claim) {
    gs_share *s = ctx;
    *claim = NULL;
    if (!s || !shareable(in, ops, n)) return NULL;
    uint64_t h = hash_ops(ops, n);
    pthread_mutex_lock(&s->mu);
    entry *e = s->head;
    for (; e; e = e->next) {
        if (e->in != in || e->hash != h || e->n != n) continue;
        bool same = true;
        for (int k = 0; k < n && same; k++) same = gs_value_same_bits(e->ops[k], ops[k]);
        if (same) break;
    }
    gs_value *r = NULL;
    if (e) {
        while (e->state == COMPUTING) pthread_cond_wait(&s->cv, &s->mu);
        if (e->state == DONE) {
            r = gs_value_copy(e->result); /* NULL (out of memory): compute it here */
            if (r) s->reused++;
        }
        pthread_mutex_unlock(&s->mu);
        return r;
    }
    size_t bytes = 0;
    for (int k = 0; k < n; k++) bytes += gs_value_bytes(ops[k]);
    if (s->bytes + bytes <= GS_SHARE_MAX_BYTES) {
        e = gs_sys_calloc(1, sizeof *e);
        gs_value **copies = e ? gs_sys_calloc((size_t)n, sizeof *copies) : NULL;
        bool ok = copies != NULL;
        for (int k = 0; k < n && ok; k++) ok = (copies[k] = gs_value_copy(ops[k])) != NULL;
        if (ok) {
            e->in = in;
            e->hash = h;
            e->n = n;
            e->ops = copies;
            e->state = COMPUTING;
            e->next = s->head;
            s->head = e;
            s->bytes += bytes;
            *claim = e;
        } else if (e) {
            e->ops = copies;
            e->n = copies ? n : 0;
            entry_free(e);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

void gs_share_end(void *ctx, void *claim, const gs_value *result) {
    gs_share *s = ctx;
    entry *e = claim;
    if (!s || !e) return;
    gs_value *copy = result ? gs_value_copy(result) : NULL;
    pthread_mutex_lock(&s->mu);
    e->result = copy;
    e->state = copy ? DONE : FAILED;
    if (copy) s->bytes += gs_value_bytes(copy);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}
