/*
 * comm_threads.c — the threads communicator: every device is a thread of this process.
 *
 * Each collective is a rendezvous of all devices (SPMD: every device reaches every collective in
 * the same order): a device publishes its buffers in its slot, waits at a barrier, reads the
 * slots of its group's members, and waits at a second barrier before its buffers may change.
 * All-reduce keeps the traffic of a copy: member i reduces chunk i of all members' buffers (in
 * member order, so the result is deterministic and identical on all members) and writes it
 * straight back into every member's buffer.
 *
 * Barriers wait with a timeout and report the devices that did not arrive; abort() wakes every
 * waiting device, which then reports the device that failed. Where every device has a core of
 * its own, a device spins a little before it sleeps: waking a sleeping thread took about 40 us
 * on a virtual machine, at each of a collective's two barriers, even when both devices arrived
 * together (ResNet-50 over 2 devices has 36 collectives a step).
 */
#include "internal.h"
#include "base/sysalloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What a device publishes for the current collective, and its own scratch memory. */
typedef struct slot {
    const void *in;     /* its input buffer (all-reduce: its in-place buffer) */
    void *scratch;      /* kept across collectives (fresh pages fault slowly), owned by the device */
    size_t scratch_cap; /* bytes of scratch */
} slot;

typedef struct threads_comm {
    gs_comm base;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t generation; /* completed barriers (written atomically under mu, read by spinners) */
    int arrived;         /* devices waiting at the current barrier */
    bool *present;       /* n: which devices arrived at the current barrier */
    slot *slots;         /* n */
    bool aborted;        /* some device failed or a barrier timed out (written as generation) */
    int failed_dev;      /* the device that failed (-1: a timeout) */
    bool spin;           /* devices spin before they sleep: each has a core */
} threads_comm;

/* How long a device spins at a barrier before it sleeps. */
#define SPIN_NS 100000L

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void set_aborted(threads_comm *t) { __atomic_store_n(&t->aborted, true, __ATOMIC_RELEASE); }

/* Spins, without the mutex, until barrier `gen` completes, the communicator aborts or SPIN_NS
 * pass (the caller then waits on the condition variable as before). */
static void spin_past(threads_comm *t, uint64_t gen) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (unsigned i = 1;; i++) {
        if (__atomic_load_n(&t->generation, __ATOMIC_ACQUIRE) != gen ||
            __atomic_load_n(&t->aborted, __ATOMIC_ACQUIRE))
            return;
        cpu_relax();
        if (i % 64) continue;
        clock_gettime(CLOCK_MONOTONIC, &b);
        if ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) > SPIN_NS) return;
    }
}

static threads_comm *tc(gs_comm *c) { return (threads_comm *)c; }

static gs_status aborted_error(threads_comm *t, int dev, gs_diags *d) {
    if (t->failed_dev >= 0)
        return gs_error(d, gs_span_none(), "device %d: stopped because device %d failed", dev, t->failed_dev);
    return gs_error(d, gs_span_none(), "device %d: stopped because a collective timed out", dev);
}

static gs_status wait_barrier(gs_comm *c, int dev, gs_diags *d);

/* Every collective meets its group at barriers: the time a device waits there for the others
 * is what the trace reports as the collective's wait. */
static gs_status barrier(gs_comm *c, int dev, gs_diags *d) {
    if (!c->trace) return wait_barrier(c, dev, d);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    gs_status st = wait_barrier(c, dev, d);
    clock_gettime(CLOCK_MONOTONIC, &b);
    gs_trace_add_wait(c->trace, dev - c->first_device,
                      (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec));
    return st;
}

static gs_status wait_barrier(gs_comm *c, int dev, gs_diags *d) {
    threads_comm *t = tc(c);
    pthread_mutex_lock(&t->mu);
    if (t->aborted) {
        gs_status st = aborted_error(t, dev, d);
        pthread_mutex_unlock(&t->mu);
        return st;
    }
    uint64_t gen = t->generation;
    t->present[dev] = true;
    if (++t->arrived == c->n_devices) {
        t->arrived = 0;
        memset(t->present, 0, sizeof(bool) * (size_t)c->n_devices);
        __atomic_store_n(&t->generation, gen + 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        return GS_OK;
    }
    if (t->spin) {
        pthread_mutex_unlock(&t->mu);
        spin_past(t, gen);
        pthread_mutex_lock(&t->mu);
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    double secs = c->timeout_s > 0 ? c->timeout_s : 60.0;
    deadline.tv_sec += (time_t)secs;
    deadline.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    gs_status st = GS_OK;
    while (t->generation == gen && !t->aborted) {
        int rc = pthread_cond_timedwait(&t->cv, &t->mu, &deadline);
        if (rc == ETIMEDOUT && t->generation == gen && !t->aborted) {
            gs_sb missing = {0};
            int n_missing = 0;
            for (int i = 0; i < c->n_devices; i++)
                if (!t->present[i]) {
                    if (n_missing < 16) gs_sb_printf(&missing, "%s%d", n_missing ? ", " : "", i);
                    n_missing++;
                }
            if (n_missing > 16) gs_sb_printf(&missing, " and %d more", n_missing - 16);
            st = gs_error(d, gs_span_none(),
                          "device %d: a collective timed out after %g s: device%s %s did not arrive",
                          dev, secs, n_missing == 1 ? "" : "s", gs_sb_str(&missing));
            gs_sb_free(&missing);
            set_aborted(t);
            t->failed_dev = -1;
            pthread_cond_broadcast(&t->cv);
            break;
        }
    }
    if (st == GS_OK && t->generation == gen && t->aborted) st = aborted_error(t, dev, d);
    pthread_mutex_unlock(&t->mu);
    return st;
}

static void publish(threads_comm *t, int dev, const void *in) {
    /* Written before the barrier's mutex release, read after its acquisition: ordered. */
    pthread_mutex_lock(&t->mu);
    t->slots[dev].in = in;
    pthread_mutex_unlock(&t->mu);
}

/* Element range [lo, hi) of chunk i of n elements split into k chunks. */
static void chunk_range(int64_t n, int k, int i, int64_t *lo, int64_t *hi) {
    int64_t base = n / k, rem = n % k;
    *lo = i * base + (i < rem ? i : rem);
    *hi = *lo + base + (i < rem ? 1 : 0);
}

/* Member i owns chunk i of the group's buffers: between two barriers it alone reads and writes
 * that chunk in every member's buffer. It reduces the chunk block by block (members in group
 * order: deterministic, the same bits everywhere) and writes each reduced block back into every
 * member's buffer, so each element is read once per member and written once per member — the
 * same memory traffic as a copy. */
static gs_status all_reduce(gs_comm *c, int dev, const gs_group *g, gs_type t, gs_reduce_op op,
                            void *buf, int64_t n, gs_diags *d) {
    threads_comm *tcm = tc(c);
    int esz = gs_type_size(t);
    int64_t lo, hi;
    chunk_range(n, g->size, g->index, &lo, &hi);
    enum { BLOCK_BYTES = 32 * 1024 };
    int64_t block = BLOCK_BYTES / esz > 0 ? BLOCK_BYTES / esz : 1;
    slot *me = &tcm->slots[dev];
    size_t need = (size_t)(block * esz);
    if (me->scratch_cap < need) {
        void *p = gs_sys_realloc(me->scratch, need);
        if (!p) {
            c->ops->abort(c, dev);
            return gs_error(d, gs_span_none(), "device %d: out of memory in all-reduce", dev);
        }
        me->scratch = p;
        me->scratch_cap = need;
    }
    char *acc = me->scratch;
    publish(tcm, dev, buf);
    gs_status st = barrier(c, dev, d);
    for (int64_t b = lo; st == GS_OK && b < hi; b += block) {
        int64_t m = hi - b < block ? hi - b : block;
        size_t off = (size_t)(b * esz), bytes = (size_t)(m * esz);
        const char *first = (const char *)tcm->slots[g->members[0]].in + off;
        if (g->size == 1) {
            memcpy(acc, first, bytes);
        } else {
            gs_reduce_pair(t, op, acc, first, (const char *)tcm->slots[g->members[1]].in + off, m);
        }
        for (int k = 2; k < g->size; k++)
            gs_reduce_into(t, op, acc, (const char *)tcm->slots[g->members[k]].in + off, m);
        for (int k = 0; k < g->size; k++) memcpy((char *)tcm->slots[g->members[k]].in + off, acc, bytes);
    }
    if (st == GS_OK) st = barrier(c, dev, d);
    return st;
}

static gs_status all_gather(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                            void *out, gs_diags *d) {
    threads_comm *t = tc(c);
    publish(t, dev, in);
    gs_status st = barrier(c, dev, d);
    if (st == GS_OK)
        for (int k = 0; k < g->size; k++)
            if (bytes) memcpy((char *)out + k * bytes, t->slots[g->members[k]].in, (size_t)bytes);
    if (st == GS_OK) st = barrier(c, dev, d);
    return st;
}

static gs_status all_gather_interleaved(gs_comm *c, int dev, const gs_group *g, const void *in,
                                        int64_t outer, int64_t run, void *out, gs_diags *d) {
    threads_comm *t = tc(c);
    publish(t, dev, in);
    gs_status st = barrier(c, dev, d);
    if (st == GS_OK && run > 0)
        for (int64_t o = 0; o < outer; o++)
            for (int k = 0; k < g->size; k++)
                memcpy((char *)out + (o * g->size + k) * run,
                       (const char *)t->slots[g->members[k]].in + o * run, (size_t)run);
    if (st == GS_OK) st = barrier(c, dev, d);
    return st;
}

static gs_status all_to_all(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                            void *out, gs_diags *d) {
    threads_comm *t = tc(c);
    publish(t, dev, in);
    gs_status st = barrier(c, dev, d);
    if (st == GS_OK)
        for (int k = 0; k < g->size; k++)
            if (bytes)
                memcpy((char *)out + k * bytes,
                       (const char *)t->slots[g->members[k]].in + (int64_t)g->index * bytes, (size_t)bytes);
    if (st == GS_OK) st = barrier(c, dev, d);
    return st;
}

static gs_status reduce_scatter(gs_comm *c, int dev, const gs_group *g, gs_type ty, gs_reduce_op op,
                                const void *in, int64_t n, void *out, gs_diags *d) {
    threads_comm *t = tc(c);
    int esz = gs_type_size(ty);
    publish(t, dev, in);
    gs_status st = barrier(c, dev, d);
    if (st == GS_OK && n > 0) {
        int64_t off = (int64_t)g->index * n * esz;
        memcpy(out, (const char *)t->slots[g->members[0]].in + off, (size_t)(n * esz));
        for (int k = 1; k < g->size; k++)
            gs_reduce_into(ty, op, out, (const char *)t->slots[g->members[k]].in + off, n);
    }
    if (st == GS_OK) st = barrier(c, dev, d);
    return st;
}

static gs_status permute(gs_comm *c, int dev, int to, int from, const void *in, void *out,
                         int64_t bytes, gs_diags *d) {
    threads_comm *t = tc(c);
    (void)to;
    publish(t, dev, in);
    gs_status st = barrier(c, dev, d);
    if (st == GS_OK && from >= 0 && bytes) memcpy(out, t->slots[from].in, (size_t)bytes);
    if (st == GS_OK) st = barrier(c, dev, d);
    return st;
}

static gs_status gather_root(gs_comm *c, const void *const *local, int64_t bytes, void *out,
                             gs_diags *d) {
    (void)d; /* every device is local */
    for (int k = 0; k < c->n_devices; k++)
        if (bytes) memcpy((char *)out + k * bytes, local[k], (size_t)bytes);
    return GS_OK;
}

static void comm_abort(gs_comm *c, int dev) {
    threads_comm *t = tc(c);
    pthread_mutex_lock(&t->mu);
    if (!t->aborted) {
        set_aborted(t);
        t->failed_dev = dev;
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static void comm_free(gs_comm *c) {
    threads_comm *t = tc(c);
    if (!t) return;
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    for (int i = 0; i < c->n_devices; i++) free(t->slots[i].scratch);
    free(t->present);
    free(t->slots);
    free(t);
}

static const gs_comm_ops THREADS_OPS = {all_reduce, all_gather,  all_to_all, reduce_scatter,
                                        permute,    gather_root, barrier,    comm_abort,
                                        comm_free,  all_gather_interleaved};

gs_comm *gs_comm_threads_new(int n_devices, double timeout_s) {
    if (n_devices < 1) return NULL;
    threads_comm *t = gs_sys_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->present = gs_sys_calloc((size_t)n_devices, sizeof(bool));
    t->slots = gs_sys_calloc((size_t)n_devices, sizeof(slot));
    if (!t->present || !t->slots) {
        free(t->present);
        free(t->slots);
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->base.ops = &THREADS_OPS;
    t->base.n_devices = n_devices;
    t->base.first_device = 0;
    t->base.local_devices = n_devices;
    t->base.share_work = gs_share_default(n_devices);
    t->base.async_collectives = true;
    t->base.timeout_s = timeout_s;
    t->failed_dev = -1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    t->spin = n_devices > 1 && cores >= n_devices;
    return &t->base;
}
