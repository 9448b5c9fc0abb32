/*
 * comm_mpi.c — the MPI communicators. With one device per rank (device number = world rank):
 *
 * Replica groups become communicators made once with MPI_Comm_split (color: the group's first
 * member, key: the position in the group, so rank order is group order) and cached by the
 * partition's key. Collectives map to MPI_Iallreduce / Iallgather / Ialltoall /
 * Ireduce_scatter_block / Isend+Irecv; reductions MPI cannot do exactly as XLA defines (bf16,
 * f16, f8, float min/max with NaN, complex min/max) gather the members' buffers and fold them in
 * group order. Every wait polls: for completion, for an abort notice from a failed rank (which
 * is reported, naming that device), and against the timeout. A failing rank sends abort notices
 * to every other rank, so no rank waits forever for it.
 *
 * With several devices per rank (devices r*k .. r*k+k-1 on rank r, one thread each), every
 * collective is an exchange: the rank's devices meet locally, the last to arrive sends the
 * rank's k input buffers to every rank (MPI_Iallgather, MPI_THREAD_MULTIPLE), and each device
 * then computes its own result from all devices' inputs in group order — simple and exact,
 * though it moves every input to every rank.
 */
#include "internal.h"
#include "base/sysalloc.h"

#include <stdlib.h>
#include <string.h>

#ifdef GSPMD_HAVE_MPI
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

enum { TAG_ABORT = 7001, TAG_PERMUTE = 7002, TAG_QUERY = 7003, TAG_REPLY = 7004 };

typedef struct cached_comm {
    uint64_t key;
    MPI_Comm comm;
} cached_comm;

typedef struct mpi_comm {
    gs_comm base;
    MPI_Comm world;        /* a duplicate of MPI_COMM_WORLD */
    MPI_Comm fail;         /* another duplicate, used only to end a failed run together */
    int rank;
    cached_comm *cache;    /* group communicators by key */
    int n_cache, cap_cache;
    bool aborted;
    int abort_from;        /* the rank whose notice arrived */
    int abort_payload;     /* kept alive for the nonblocking abort sends: the failed device,
                              or -(r + 1) when rank r did not arrive at a collective */
    int reply_payload;     /* kept alive for the nonblocking replies to roll calls */
    int missing;           /* a rank that did not answer the roll call of a timed-out wait, or
                              -1 */
    /* Several devices per rank (k = base.local_devices > 1): */
    pthread_mutex_t mu;    /* guards the fields below */
    pthread_cond_t cv;
    uint64_t generation;   /* completed exchanges */
    int arrived;           /* local devices at the current exchange */
    const void **ins;      /* k: the local devices' inputs */
    char *gathered;        /* every device's input, device order */
    size_t gathered_cap;
    char *sendbuf;         /* the k local inputs, concatenated */
    size_t send_cap;
    int64_t exch_bytes;    /* bytes per device of the current exchange */
    gs_status exch_status; /* how the last exchange ended */
    bool local_aborted;    /* a local device failed */
    int local_failed;      /* which */
} mpi_comm;

static bool g_we_initialised; /* set once by MPI_Init in this process (MPI is per process) */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static mpi_comm *mc(gs_comm *c) { return (mpi_comm *)c; }

/* The error of a device stopped by an abort notice: `who` failed, or (negative) rank -who-1 did
 * not arrive at a collective. */
static gs_status stopped(gs_diags *d, int dev, int rank, int who, double limit) {
    if (who < 0 && -who - 1 == rank)
        return gs_error(d, gs_span_none(),
                        "device %d: stopped because the other ranks found this rank missing at a "
                        "collective (stopped or too slow: their waits timed out after %g s)",
                        dev, limit);
    if (who < 0)
        return gs_error(d, gs_span_none(),
                        "device %d: stopped because rank %d did not arrive at a collective (a "
                        "wait timed out after %g s on another rank)",
                        dev, -who - 1, limit);
    return gs_error(d, gs_span_none(), "device %d: stopped because device %d failed", dev, who);
}

/* Answers the roll calls of ranks whose waits timed out: where this rank is (ROLL_WAITING in a
 * collective, ROLL_ENDING past the program's end). */
enum { ROLL_WAITING = 1, ROLL_ENDING = 2 };
static void answer_roll_calls(mpi_comm *m, int where) {
    for (;;) {
        int flag = 0, who;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_QUERY, m->world, &flag, &status);
        if (!flag) return;
        MPI_Recv(&who, 1, MPI_INT, status.MPI_SOURCE, TAG_QUERY, m->world, MPI_STATUS_IGNORE);
        MPI_Request req;
        m->reply_payload = where;
        MPI_Isend(&m->reply_payload, 1, MPI_INT, status.MPI_SOURCE, TAG_REPLY, m->world, &req);
        MPI_Request_free(&req);
    }
}

/* After a wait timed out: asks every rank whether it is there and waits `grace` seconds for the
 * answers (answering the others' roll calls meanwhile). Writes into `text` which devices did not
 * arrive — the ranks that did not answer (stopped, killed, or still computing outside any
 * collective) or answered from past the program's end — and sets m->missing to the first of
 * them; "" and -1 when every rank is waiting in a collective. */
static void roll_call(mpi_comm *m, double grace, char *text, size_t cap) {
    int size;
    MPI_Comm_size(m->world, &size);
    int *here = gs_sys_calloc((size_t)size, sizeof *here); /* 0: no answer, else ROLL_* */
    text[0] = 0;
    m->missing = -1;
    if (!here) return;
    here[m->rank] = ROLL_WAITING;
    for (int r = 0; r < size; r++) {
        if (r == m->rank) continue;
        MPI_Request req;
        MPI_Isend(&m->rank, 1, MPI_INT, r, TAG_QUERY, m->world, &req);
        MPI_Request_free(&req);
    }
    int answered = 1;
    for (double t0 = now_s(); answered < size && now_s() - t0 < grace;) {
        answer_roll_calls(m, ROLL_WAITING);
        int flag = 0, who;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_REPLY, m->world, &flag, &status);
        if (!flag) {
            usleep(1000);
            continue;
        }
        MPI_Recv(&who, 1, MPI_INT, status.MPI_SOURCE, TAG_REPLY, m->world, MPI_STATUS_IGNORE);
        if (!here[status.MPI_SOURCE]) answered++;
        here[status.MPI_SOURCE] = who == ROLL_ENDING ? ROLL_ENDING : ROLL_WAITING;
    }
    int k = m->base.local_devices, n = 0, silent = 0;
    size_t len = 0;
    for (int r = 0; r < size && len + 60 < cap; r++) {
        if (here[r] == ROLL_WAITING) continue;
        silent += here[r] == 0;
        if (m->missing < 0) m->missing = r;
        if (k > 1)
            len += (size_t)snprintf(text + len, cap - len, "%s%d..%d (rank %d)", n ? ", " : "",
                                    r * k, r * k + k - 1, r);
        else
            len += (size_t)snprintf(text + len, cap - len, "%s%d", n ? ", " : "", r);
        n++;
    }
    if (n) {
        char *list = gs_sys_strdup(text);
        if (list)
            snprintf(text, cap, "device%s %s did not arrive (%s)", n > 1 ? "s" : "", list,
                     silent == n ? "stopped, killed, or still computing"
                     : silent    ? "stopped, killed, still computing, or past the program's end"
                                 : "past the program's end without it");
        free(list);
    }
    free(here);
}

/* Waits for req, polling for abort notices and the timeout. */
static gs_status wait_req_untimed(mpi_comm *m, int dev, MPI_Request *req, gs_diags *d);

/* A request's completion; with a trace, the time blocked here is the collective's wait. */
static gs_status wait_req(mpi_comm *m, int dev, MPI_Request *req, gs_diags *d) {
    if (!m->base.trace) return wait_req_untimed(m, dev, req, d);
    double t0 = now_s();
    gs_status st = wait_req_untimed(m, dev, req, d);
    gs_trace_add_wait(m->base.trace, dev - m->base.first_device, now_s() - t0);
    return st;
}

static gs_status wait_req_untimed(mpi_comm *m, int dev, MPI_Request *req, gs_diags *d) {
    double t0 = now_s(), limit = m->base.timeout_s > 0 ? m->base.timeout_s : 60.0;
    int spins = 0;
    for (;;) {
        int done = 0;
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done) return GS_OK;
        int flag = 0;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_ABORT, m->world, &flag, &status);
        if (flag) {
            int who = 0;
            MPI_Recv(&who, 1, MPI_INT, status.MPI_SOURCE, TAG_ABORT, m->world, MPI_STATUS_IGNORE);
            m->aborted = true;
            m->abort_from = who;
            return stopped(d, dev, m->rank, who, limit);
        }
        answer_roll_calls(m, ROLL_WAITING);
        if (now_s() - t0 > limit) {
            char missing[512];
            roll_call(m, limit < 2 ? limit / 2 : 1, missing, sizeof missing);
            if (missing[0])
                return gs_error(d, gs_span_none(),
                                "device %d: a collective timed out after %g s: %s", dev, limit,
                                missing);
            return gs_error(d, gs_span_none(),
                            "device %d: a collective timed out after %g s (every rank answered: "
                            "the devices are waiting in different collectives)",
                            dev, limit);
        }
        /* Nonblocking collectives progress only inside MPI calls: test often, but yield the
         * core (ranks may outnumber cores), and sleep only once a wait has lasted a while. */
        if (++spins < 200000)
            sched_yield();
        else
            usleep(100);
    }
}

/* The buffers a nonblocking MPI call reads and writes are MPI's until the call completes. When
 * a wait fails (another device stopped, a timeout), the call may still be in flight, and MPI
 * would read or write them at its next progress, after the caller freed them
 * (tests/runtime/mpi_alloc_faults.py found a permute's receive writing into a freed result).
 * So each call works on staging copies of its own: freed once it completes, left to MPI when it
 * does not (the run is ending then). */
typedef struct staged {
    void *in, *out;
} staged;

static gs_status stage(staged *s, int dev, const void *in, size_t in_bytes, size_t out_bytes,
                       gs_diags *d) {
    s->in = gs_sys_malloc(in_bytes + 1);
    s->out = gs_sys_malloc(out_bytes + 1);
    if (!s->in || !s->out) {
        free(s->in);
        free(s->out);
        return gs_error(d, gs_span_none(), "device %d: out of memory", dev);
    }
    if (in_bytes) memcpy(s->in, in, in_bytes);
    return GS_OK;
}

/* Waits for the staged call's requests; on success copies its result out and frees the
 * staging. */
static gs_status finish_staged(mpi_comm *m, int dev, MPI_Request *reqs, int n_reqs, staged *s,
                               void *out, size_t out_bytes, gs_diags *d) {
    for (int i = 0; i < n_reqs; i++)
        if (wait_req(m, dev, &reqs[i], d) != GS_OK) return GS_ERR; /* s stays MPI's */
    if (out_bytes) memcpy(out, s->out, out_bytes);
    free(s->in);
    free(s->out);
    return GS_OK;
}

static gs_status group_comm(mpi_comm *m, int dev, const gs_group *g, MPI_Comm *out, gs_diags *d) {
    for (int i = 0; i < m->n_cache; i++)
        if (m->cache[i].key == g->key) {
            *out = m->cache[i].comm;
            return GS_OK;
        }
    if (m->n_cache == m->cap_cache) {
        int cap = m->cap_cache ? m->cap_cache * 2 : 8;
        cached_comm *c = gs_sys_realloc(m->cache, sizeof *c * (size_t)cap);
        if (!c) return gs_error(d, gs_span_none(), "device %d: out of memory", dev);
        m->cache = c;
        m->cap_cache = cap;
    }
    /* MPI_Comm_split blocks until every rank calls it; first make sure every rank reached this
     * collective (a nonblocking barrier we can time out and abort), so a missing or failed rank
     * cannot hang the others inside the split. */
    MPI_Request arrive;
    MPI_Ibarrier(m->world, &arrive);
    if (wait_req(m, dev, &arrive, d) != GS_OK) return GS_ERR;
    MPI_Comm nc;
    if (MPI_Comm_split(m->world, g->id, g->index, &nc) != MPI_SUCCESS)
        return gs_error(d, gs_span_none(), "device %d: MPI_Comm_split failed", dev);
    m->cache[m->n_cache].key = g->key;
    m->cache[m->n_cache].comm = nc;
    m->n_cache++;
    *out = nc;
    return GS_OK;
}

/* The MPI datatype and op for an exact builtin reduction, or false. */
static bool mpi_reduction(gs_type t, gs_reduce_op op, MPI_Datatype *dt, MPI_Op *mop) {
    bool is_float = t == GS_F32 || t == GS_F64, is_complex = t == GS_C64 || t == GS_C128;
    switch (t) {
    case GS_F32: *dt = MPI_FLOAT; break;
    case GS_F64: *dt = MPI_DOUBLE; break;
    case GS_C64: *dt = MPI_C_FLOAT_COMPLEX; break;
    case GS_C128: *dt = MPI_C_DOUBLE_COMPLEX; break;
    case GS_S8: *dt = MPI_INT8_T; break;
    case GS_S16: *dt = MPI_INT16_T; break;
    case GS_S32: *dt = MPI_INT32_T; break;
    case GS_S64: *dt = MPI_INT64_T; break;
    case GS_U8: *dt = MPI_UINT8_T; break;
    case GS_U16: *dt = MPI_UINT16_T; break;
    case GS_U32: *dt = MPI_UINT32_T; break;
    case GS_U64: *dt = MPI_UINT64_T; break;
    case GS_PRED: *dt = MPI_C_BOOL; break;
    default: return false;
    }
    switch (op) {
    case GS_RED_SUM: *mop = t == GS_PRED ? MPI_LOR : MPI_SUM; return true;
    case GS_RED_PROD: *mop = t == GS_PRED ? MPI_LAND : MPI_PROD; return true;
    case GS_RED_MIN:
        if (is_float || is_complex) return false; /* XLA propagates NaN */
        *mop = t == GS_PRED ? MPI_LAND : MPI_MIN;
        return true;
    case GS_RED_MAX:
        if (is_float || is_complex) return false;
        *mop = t == GS_PRED ? MPI_LOR : MPI_MAX;
        return true;
    case GS_RED_AND: *mop = t == GS_PRED ? MPI_LAND : MPI_BAND; return !is_float && !is_complex;
    case GS_RED_OR: *mop = t == GS_PRED ? MPI_LOR : MPI_BOR; return !is_float && !is_complex;
    case GS_RED_XOR: *mop = t == GS_PRED ? MPI_LXOR : MPI_BXOR; return !is_float && !is_complex;
    default: return false;
    }
}

static gs_status mpi_all_gather(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                                void *out, gs_diags *d);

static gs_status mpi_all_reduce(gs_comm *c, int dev, const gs_group *g, gs_type t, gs_reduce_op op,
                                void *buf, int64_t n, gs_diags *d) {
    mpi_comm *m = mc(c);
    MPI_Datatype dt;
    MPI_Op mop;
    if (n > 0 && mpi_reduction(t, op, &dt, &mop) && n <= 0x7fffffff) {
        MPI_Comm gc;
        if (group_comm(m, dev, g, &gc, d) != GS_OK) return GS_ERR;
        size_t bytes = (size_t)(n * gs_type_size(t));
        staged s;
        if (stage(&s, dev, buf, bytes, bytes, d) != GS_OK) return GS_ERR;
        MPI_Request req;
        MPI_Iallreduce(s.in, s.out, (int)n, dt, mop, gc, &req);
        return finish_staged(m, dev, &req, 1, &s, buf, bytes, d);
    }
    /* Gather and fold in group order. */
    int esz = gs_type_size(t);
    char *all = gs_sys_malloc((size_t)(n * esz) * (size_t)g->size + 1);
    if (!all) return gs_error(d, gs_span_none(), "device %d: out of memory", dev);
    gs_status st = mpi_all_gather(c, dev, g, buf, n * esz, all, d);
    if (st == GS_OK && n > 0) {
        memcpy(buf, all, (size_t)(n * esz));
        for (int k = 1; k < g->size; k++) gs_reduce_into(t, op, buf, all + (size_t)k * (size_t)(n * esz), n);
    }
    free(all);
    return st;
}

static gs_status mpi_all_gather_interleaved(gs_comm *c, int dev, const gs_group *g,
                                            const void *in, int64_t outer, int64_t run,
                                            void *out, gs_diags *d);

/* The members' blocks in group order: the interleaved gather of one piece each. */
static gs_status mpi_all_gather(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                                void *out, gs_diags *d) {
    return mpi_all_gather_interleaved(c, dev, g, in, 1, bytes, out, d);
}

/* An all-gather whose members' blocks (outer pieces of `run` bytes each) land interleaved in out
 * straight from the staging buffer MPI wrote (member j's piece o at (o * group size + j) *
 * run), with no buffer of blocks in between. */
static gs_status mpi_all_gather_interleaved(gs_comm *c, int dev, const gs_group *g,
                                            const void *in, int64_t outer, int64_t run,
                                            void *out, gs_diags *d) {
    mpi_comm *m = mc(c);
    int64_t bytes = outer * run;
    if (bytes > 0x7fffffff) return gs_error(d, gs_span_none(), "device %d: all-gather block over 2 GiB", dev);
    MPI_Comm gc;
    if (group_comm(m, dev, g, &gc, d) != GS_OK) return GS_ERR;
    staged s;
    size_t out_bytes = (size_t)bytes * (size_t)g->size;
    if (stage(&s, dev, in, (size_t)bytes, out_bytes, d) != GS_OK) return GS_ERR;
    MPI_Request req;
    MPI_Iallgather(s.in, (int)bytes, MPI_BYTE, s.out, (int)bytes, MPI_BYTE, gc, &req);
    if (wait_req(m, dev, &req, d) != GS_OK) return GS_ERR; /* s stays MPI's */
    const char *blocks = s.out; /* member k's block at k * bytes */
    for (int64_t o = 0; run > 0 && o < outer; o++)
        for (int k = 0; k < g->size; k++)
            memcpy((char *)out + (o * g->size + k) * run, blocks + k * bytes + o * run,
                   (size_t)run);
    free(s.in);
    free(s.out);
    return GS_OK;
}

static gs_status mpi_all_to_all(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                                void *out, gs_diags *d) {
    mpi_comm *m = mc(c);
    if (bytes > 0x7fffffff) return gs_error(d, gs_span_none(), "device %d: all-to-all block over 2 GiB", dev);
    MPI_Comm gc;
    if (group_comm(m, dev, g, &gc, d) != GS_OK) return GS_ERR;
    staged s;
    size_t all = (size_t)bytes * (size_t)g->size;
    if (stage(&s, dev, in, all, all, d) != GS_OK) return GS_ERR;
    MPI_Request req;
    MPI_Ialltoall(s.in, (int)bytes, MPI_BYTE, s.out, (int)bytes, MPI_BYTE, gc, &req);
    return finish_staged(m, dev, &req, 1, &s, out, all, d);
}

static gs_status mpi_reduce_scatter(gs_comm *c, int dev, const gs_group *g, gs_type t, gs_reduce_op op,
                                    const void *in, int64_t n, void *out, gs_diags *d) {
    mpi_comm *m = mc(c);
    MPI_Datatype dt;
    MPI_Op mop;
    if (n > 0 && mpi_reduction(t, op, &dt, &mop) && n <= 0x7fffffff) {
        MPI_Comm gc;
        if (group_comm(m, dev, g, &gc, d) != GS_OK) return GS_ERR;
        size_t esz = (size_t)gs_type_size(t), out_bytes = (size_t)n * esz;
        staged s;
        if (stage(&s, dev, in, out_bytes * (size_t)g->size, out_bytes, d) != GS_OK) return GS_ERR;
        MPI_Request req;
        MPI_Ireduce_scatter_block(s.in, s.out, (int)n, dt, mop, gc, &req);
        return finish_staged(m, dev, &req, 1, &s, out, out_bytes, d);
    }
    int esz = gs_type_size(t);
    int64_t total = n * g->size;
    char *tmp = gs_sys_malloc((size_t)(total * esz) + 1);
    if (!tmp) return gs_error(d, gs_span_none(), "device %d: out of memory", dev);
    memcpy(tmp, in, (size_t)(total * esz));
    gs_status st = mpi_all_reduce(c, dev, g, t, op, tmp, total, d);
    if (st == GS_OK) memcpy(out, tmp + (size_t)g->index * (size_t)(n * esz), (size_t)(n * esz));
    free(tmp);
    return st;
}

static gs_status mpi_permute(gs_comm *c, int dev, int to, int from, const void *in, void *out,
                             int64_t bytes, gs_diags *d) {
    mpi_comm *m = mc(c);
    if (bytes > 0x7fffffff) return gs_error(d, gs_span_none(), "device %d: permute over 2 GiB", dev);
    MPI_Request reqs[2];
    int nreq = 0;
    staged s;
    if (stage(&s, dev, in, to >= 0 ? (size_t)bytes : 0, (size_t)bytes, d) != GS_OK) return GS_ERR;
    if (from >= 0)
        MPI_Irecv(s.out, (int)bytes, MPI_BYTE, from, TAG_PERMUTE, m->world, &reqs[nreq++]);
    if (to >= 0) MPI_Isend(s.in, (int)bytes, MPI_BYTE, to, TAG_PERMUTE, m->world, &reqs[nreq++]);
    /* No sender: the result stays as the caller made it (zeros). */
    if (finish_staged(m, dev, reqs, nreq, &s, out, from >= 0 ? (size_t)bytes : 0, d) != GS_OK)
        return GS_ERR;
    /* Keep permutes of consecutive collectives apart. */
    MPI_Request b;
    MPI_Ibarrier(m->world, &b);
    return wait_req(m, dev, &b, d);
}

static gs_status mpi_gather_root(gs_comm *c, const void *const *local, int64_t bytes, void *out,
                                 gs_diags *d) {
    mpi_comm *m = mc(c);
    int k = c->local_devices;
    if (bytes * k > 0x7fffffff) return gs_error(d, gs_span_none(), "output over 2 GiB per rank");
    char *mine = gs_sys_malloc((size_t)(bytes * k) + 1);
    if (!mine) return gs_error(d, gs_span_none(), "out of memory");
    for (int i = 0; i < k; i++)
        if (bytes) memcpy(mine + (size_t)i * (size_t)bytes, local[i], (size_t)bytes);
    int size = 1;
    MPI_Comm_size(m->world, &size);
    size_t all = m->rank == 0 ? (size_t)(bytes * k) * (size_t)size : 0;
    char *gathered = gs_sys_malloc(all + 1);
    if (!gathered) {
        free(mine);
        return gs_error(d, gs_span_none(), "out of memory");
    }
    MPI_Request req;
    MPI_Igather(mine, (int)(bytes * k), MPI_BYTE, gathered, (int)(bytes * k), MPI_BYTE, 0, m->world,
                &req);
    /* As with staged calls: on a failed wait both buffers stay MPI's. */
    if (wait_req(m, c->first_device, &req, d) != GS_OK) return GS_ERR;
    if (all) memcpy(out, gathered, all);
    free(mine);
    free(gathered);
    return GS_OK;
}

static gs_status mpi_barrier(gs_comm *c, int dev, gs_diags *d) {
    mpi_comm *m = mc(c);
    MPI_Request req;
    MPI_Ibarrier(m->world, &req);
    return wait_req(m, dev, &req, d);
}

static void mpi_abort(gs_comm *c, int dev) {
    mpi_comm *m = mc(c);
    if (m->aborted) return;
    m->aborted = true;
    m->abort_payload = m->missing >= 0 ? -(m->missing + 1) : dev;
    int size;
    MPI_Comm_size(m->world, &size);
    for (int r = 0; r < size; r++) {
        if (r == m->rank) continue;
        MPI_Request req;
        MPI_Isend(&m->abort_payload, 1, MPI_INT, r, TAG_ABORT, m->world, &req);
        MPI_Request_free(&req);
    }
}

static void mpi_free(gs_comm *c) {
    mpi_comm *m = mc(c);
    if (!m) return;
    /* An aborted run may still have requests pending on its communicators and on the abort
     * notice's payload in m: they stay MPI's (the process is ending). */
    if (m->aborted) return;
    for (int i = 0; i < m->n_cache; i++) MPI_Comm_free(&m->cache[i].comm);
    MPI_Comm_free(&m->world);
    MPI_Comm_free(&m->fail);
    free(m->cache);
    free(m->ins);
    free(m);
}

static const gs_comm_ops MPI_OPS = {mpi_all_reduce, mpi_all_gather,  mpi_all_to_all,
                                    mpi_reduce_scatter, mpi_permute, mpi_gather_root,
                                    mpi_barrier,    mpi_abort,       mpi_free,
                                    mpi_all_gather_interleaved};

static void ensure_init(void) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        g_we_initialised = true;
    }
}

static const gs_comm_ops HYBRID_OPS;

gs_comm *gs_comm_mpi_new(int devices_per_rank, double timeout_s, gs_diags *d) {
    if (devices_per_rank < 1) {
        gs_error(d, gs_span_none(), "--devices-per-rank must be at least 1");
        return NULL;
    }
    ensure_init();
    int provided = 0;
    MPI_Query_thread(&provided);
    if (devices_per_rank > 1 && provided < MPI_THREAD_MULTIPLE) {
        gs_error(d, gs_span_none(), "several devices per rank need an MPI with MPI_THREAD_MULTIPLE");
        return NULL;
    }
    mpi_comm *m = gs_sys_calloc(1, sizeof *m);
    int k = devices_per_rank;
    if (m) m->ins = gs_sys_calloc((size_t)k, sizeof *m->ins);
    if (!m || !m->ins) {
        if (m) free(m);
        gs_error(d, gs_span_none(), "out of memory");
        return NULL;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &m->world);
    MPI_Comm_dup(MPI_COMM_WORLD, &m->fail);
    MPI_Comm_rank(m->world, &m->rank);
    int size;
    MPI_Comm_size(m->world, &size);
    m->base.ops = k > 1 ? &HYBRID_OPS : &MPI_OPS;
    m->base.n_devices = size * k;
    m->base.first_device = m->rank * k;
    m->base.local_devices = k;
    m->base.share_work = gs_share_default(k);
    m->base.timeout_s = timeout_s;
    m->abort_from = -1;
    m->missing = -1;
    m->local_failed = -1;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    return &m->base;
}

/* ------------------------------------------------------------------ several devices per rank */

static bool grow(char **buf, size_t *cap, size_t need) {
    if (*cap >= need) return true;
    char *p = gs_sys_realloc(*buf, need);
    if (!p) return false;
    *buf = p;
    *cap = need;
    return true;
}

/* The exchange behind every collective: afterwards m->gathered holds every device's `bytes` of
 * input in device order. Call exchange_done after reading it. */
static gs_status exchange(mpi_comm *m, int dev, const void *in, int64_t bytes, gs_diags *d) {
    int k = m->base.local_devices, li = dev - m->base.first_device, n = m->base.n_devices;
    pthread_mutex_lock(&m->mu);
    if (m->local_aborted || m->aborted) {
        int who = m->local_aborted ? m->local_failed : m->abort_from;
        pthread_mutex_unlock(&m->mu);
        return stopped(d, dev, m->rank, who, m->base.timeout_s > 0 ? m->base.timeout_s : 60);
    }
    uint64_t gen = m->generation;
    m->ins[li] = in;
    if (++m->arrived < k) {
        /* Wait for the exchanging device (timed). */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        double secs = m->base.timeout_s > 0 ? m->base.timeout_s : 60;
        dl.tv_sec += (time_t)secs + 1;
        gs_status st = GS_OK;
        while (m->generation == gen && !m->local_aborted)
            if (pthread_cond_timedwait(&m->cv, &m->mu, &dl) != 0 && m->generation == gen) {
                st = gs_error(d, gs_span_none(), "device %d: a collective timed out after %g s (a device of this rank did not arrive)", dev, secs);
                break;
            }
        if (st == GS_OK && m->generation == gen)
            st = gs_error(d, gs_span_none(), "device %d: stopped because device %d failed", dev, m->local_failed);
        if (st == GS_OK && m->exch_status != GS_OK) {
            if (m->aborted)
                st = stopped(d, dev, m->rank, m->abort_from, secs);
            else
                st = gs_error(d, gs_span_none(), "device %d: a collective of this rank failed", dev);
        }
        pthread_mutex_unlock(&m->mu);
        return st;
    }
    /* Last to arrive: exchange the rank's inputs with every rank. The others are waiting, so
     * nobody reads the gathered buffer while it changes. */
    m->arrived = 0;
    m->exch_bytes = bytes;
    size_t per = (size_t)bytes, mine = per * (size_t)k;
    gs_status st = GS_OK;
    if (!grow(&m->sendbuf, &m->send_cap, mine + 1) || !grow(&m->gathered, &m->gathered_cap, per * (size_t)n + 1))
        st = gs_error(d, gs_span_none(), "device %d: out of memory", dev);
    for (int i = 0; st == GS_OK && i < k; i++)
        if (per) memcpy(m->sendbuf + (size_t)i * per, m->ins[i], per);
    pthread_mutex_unlock(&m->mu);
    if (st == GS_OK && mine > 0x7fffffff) st = gs_error(d, gs_span_none(), "device %d: collective over 2 GiB per rank", dev);
    if (st == GS_OK) {
        MPI_Request req;
        MPI_Iallgather(m->sendbuf, (int)mine, MPI_BYTE, m->gathered, (int)mine, MPI_BYTE, m->world, &req);
        st = wait_req(m, dev, &req, d);
    }
    pthread_mutex_lock(&m->mu);
    m->exch_status = st;
    m->generation++;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    return st;
}

/* After every local device has read m->gathered: a local barrier so it can be reused. */
static gs_status exchange_done(mpi_comm *m, int dev, gs_diags *d) {
    return exchange(m, dev, NULL, 0, d);
}

static const char *dev_in(mpi_comm *m, int device) {
    return m->gathered + (size_t)device * (size_t)m->exch_bytes;
}

static gs_status h_all_reduce(gs_comm *c, int dev, const gs_group *g, gs_type t, gs_reduce_op op,
                              void *buf, int64_t n, gs_diags *d) {
    mpi_comm *m = mc(c);
    int esz = gs_type_size(t);
    if (exchange(m, dev, buf, n * esz, d) != GS_OK) return GS_ERR;
    if (n > 0) {
        memcpy(buf, dev_in(m, g->members[0]), (size_t)(n * esz));
        for (int k = 1; k < g->size; k++) gs_reduce_into(t, op, buf, dev_in(m, g->members[k]), n);
    }
    return exchange_done(m, dev, d);
}

static gs_status h_all_gather(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                              void *out, gs_diags *d) {
    mpi_comm *m = mc(c);
    if (exchange(m, dev, in, bytes, d) != GS_OK) return GS_ERR;
    for (int k = 0; k < g->size; k++)
        if (bytes) memcpy((char *)out + k * bytes, dev_in(m, g->members[k]), (size_t)bytes);
    return exchange_done(m, dev, d);
}

static gs_status h_all_to_all(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                              void *out, gs_diags *d) {
    mpi_comm *m = mc(c);
    if (exchange(m, dev, in, bytes * g->size, d) != GS_OK) return GS_ERR;
    for (int k = 0; k < g->size; k++)
        if (bytes) memcpy((char *)out + k * bytes, dev_in(m, g->members[k]) + (int64_t)g->index * bytes, (size_t)bytes);
    return exchange_done(m, dev, d);
}

static gs_status h_reduce_scatter(gs_comm *c, int dev, const gs_group *g, gs_type t, gs_reduce_op op,
                                  const void *in, int64_t n, void *out, gs_diags *d) {
    mpi_comm *m = mc(c);
    int esz = gs_type_size(t);
    if (exchange(m, dev, in, n * esz * g->size, d) != GS_OK) return GS_ERR;
    if (n > 0) {
        int64_t off = (int64_t)g->index * n * esz;
        memcpy(out, dev_in(m, g->members[0]) + off, (size_t)(n * esz));
        for (int k = 1; k < g->size; k++) gs_reduce_into(t, op, out, dev_in(m, g->members[k]) + off, n);
    }
    return exchange_done(m, dev, d);
}

static gs_status h_permute(gs_comm *c, int dev, int to, int from, const void *in, void *out,
                           int64_t bytes, gs_diags *d) {
    mpi_comm *m = mc(c);
    (void)to;
    if (exchange(m, dev, in, bytes, d) != GS_OK) return GS_ERR;
    if (from >= 0 && bytes) memcpy(out, dev_in(m, from), (size_t)bytes);
    return exchange_done(m, dev, d);
}

static gs_status h_barrier(gs_comm *c, int dev, gs_diags *d) {
    return exchange(mc(c), dev, NULL, 0, d);
}

static void h_abort(gs_comm *c, int dev) {
    mpi_comm *m = mc(c);
    pthread_mutex_lock(&m->mu);
    bool first = !m->local_aborted;
    if (first) {
        m->local_aborted = true;
        m->local_failed = dev;
    }
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (first) mpi_abort(c, dev); /* notify the other ranks (MPI_THREAD_MULTIPLE) */
}

static void h_free(gs_comm *c) {
    mpi_comm *m = mc(c);
    if (!m || m->aborted) return; /* its exchange buffers may still be MPI's (see mpi_free) */
    free(m->sendbuf);
    free(m->gathered);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    mpi_free(c);
}

static const gs_comm_ops HYBRID_OPS = {h_all_reduce, h_all_gather, h_all_to_all,
                                       h_reduce_scatter, h_permute, mpi_gather_root,
                                       h_barrier,    h_abort,      h_free,
                                       NULL};

bool gs_mpi_available(void) { return true; }

int gs_mpi_rank(void) {
    ensure_init();
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int gs_mpi_world_size(void) {
    ensure_init();
    int s;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

void gs_mpi_finalize(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized && g_we_initialised) MPI_Finalize();
}

void gs_mpi_abort_job(void) {
    fflush(stdout);
    fflush(stderr);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

bool gs_mpi_agree(gs_comm *c, bool ok, bool *all_ok) {
    *all_ok = ok;
    if (!c || (c->ops != &MPI_OPS && c->ops != &HYBRID_OPS)) return true;
    mpi_comm *m = mc(c);
    int mine = ok ? 1 : 0, all = 0;
    MPI_Request req;
    MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MIN, m->fail, &req);
    double t0 = now_s(), limit = c->timeout_s > 0 ? c->timeout_s : 60;
    /* After a failure the other ranks are ending too (or one is gone): do not wait long. A
     * rank that succeeded waits for the others to end, or to time out and take their roll call
     * (which it answers). */
    limit = ok ? limit + 3 : limit > 1 ? 1 : limit;
    int done = 0;
    while (!done && now_s() - t0 < limit) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        answer_roll_calls(m, ROLL_ENDING);
        if (!done) usleep(200);
    }
    if (!done) return false;
    /* Drain abort notices nobody read, so finalisation has nothing in flight. */
    for (;;) {
        int flag = 0, who;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_ABORT, m->world, &flag, &status);
        if (!flag) break;
        MPI_Recv(&who, 1, MPI_INT, status.MPI_SOURCE, TAG_ABORT, m->world, MPI_STATUS_IGNORE);
    }
    *all_ok = all != 0;
    return true;
}

void gs_mpi_exit_now(void) {
    fflush(stdout);
    fflush(stderr);
    _exit(1);
}

#else /* !GSPMD_HAVE_MPI */

gs_comm *gs_comm_mpi_new(int devices_per_rank, double timeout_s, gs_diags *d) {
    (void)devices_per_rank;
    (void)timeout_s;
    gs_error(d, gs_span_none(), "gspmd was built without MPI (install libopenmpi-dev and rebuild)");
    return NULL;
}
bool gs_mpi_available(void) { return false; }
int gs_mpi_rank(void) { return 0; }
int gs_mpi_world_size(void) { return 1; }
void gs_mpi_finalize(void) {}
bool gs_mpi_agree(gs_comm *c, bool ok, bool *all_ok) {
    (void)c;
    *all_ok = ok;
    return true;
}
void gs_mpi_exit_now(void) {
    fflush(stdout);
    fflush(stderr);
    _exit(1);
}
void gs_mpi_abort_job(void) { gs_mpi_exit_now(); }

#endif

bool gs_mpi_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL ||
           getenv("PMI_RANK") != NULL;
}
