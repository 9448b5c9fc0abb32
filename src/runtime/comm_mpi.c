/*
 * comm_mpi.c — the MPI communicator: one device per MPI rank (device number = world rank).
 *
 * Replica groups become communicators made once with MPI_Comm_split (color: the group's first
 * member, key: the position in the group, so rank order is group order) and cached by the
 * partition's key. Collectives map to MPI_Iallreduce / Iallgather / Ialltoall /
 * Ireduce_scatter_block / Isend+Irecv; reductions MPI cannot do exactly as XLA defines (bf16,
 * f16, f8, float min/max with NaN, complex min/max) gather the members' buffers and fold them in
 * group order. Every wait polls: for completion, for an abort notice from a failed rank (which
 * is reported, naming that device), and against the timeout. A failing rank sends abort notices
 * to every other rank, so no rank waits forever for it.
 */
#include "runtime_internal.h"

#include <stdlib.h>
#include <string.h>

#ifdef GSPMD_HAVE_MPI
#include <mpi.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

enum { TAG_ABORT = 7001, TAG_PERMUTE = 7002 };

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
    int abort_payload;     /* kept alive for the nonblocking abort sends */
} mpi_comm;

static bool g_we_initialised; /* set once by MPI_Init in this process (MPI is per process) */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static mpi_comm *mc(gs_comm *c) { return (mpi_comm *)c; }

/* Waits for req, polling for abort notices and the timeout. */
static gs_status wait_req(mpi_comm *m, int dev, MPI_Request *req, gs_diags *d) {
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
            return gs_error(d, gs_span_none(), "device %d: stopped because device %d failed", dev, who);
        }
        if (now_s() - t0 > limit)
            return gs_error(d, gs_span_none(),
                            "device %d: a collective timed out after %g s (some device did not arrive)",
                            dev, limit);
        /* Nonblocking collectives progress only inside MPI calls: test often, but yield the
         * core (ranks may outnumber cores), and sleep only once a wait has lasted a while. */
        if (++spins < 200000)
            sched_yield();
        else
            usleep(100);
    }
}

static gs_status group_comm(mpi_comm *m, int dev, const gs_group *g, MPI_Comm *out, gs_diags *d) {
    for (int i = 0; i < m->n_cache; i++)
        if (m->cache[i].key == g->key) {
            *out = m->cache[i].comm;
            return GS_OK;
        }
    if (m->n_cache == m->cap_cache) {
        int cap = m->cap_cache ? m->cap_cache * 2 : 8;
        cached_comm *c = realloc(m->cache, sizeof *c * (size_t)cap);
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
        MPI_Request req;
        MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, dt, mop, gc, &req);
        return wait_req(m, dev, &req, d);
    }
    /* Gather and fold in group order. */
    int esz = gs_type_size(t);
    char *all = malloc((size_t)(n * esz) * (size_t)g->size + 1);
    if (!all) return gs_error(d, gs_span_none(), "device %d: out of memory", dev);
    gs_status st = mpi_all_gather(c, dev, g, buf, n * esz, all, d);
    if (st == GS_OK && n > 0) {
        memcpy(buf, all, (size_t)(n * esz));
        for (int k = 1; k < g->size; k++) gs_reduce_into(t, op, buf, all + (size_t)k * (size_t)(n * esz), n);
    }
    free(all);
    return st;
}

static gs_status mpi_all_gather(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                                void *out, gs_diags *d) {
    mpi_comm *m = mc(c);
    if (bytes > 0x7fffffff) return gs_error(d, gs_span_none(), "device %d: all-gather block over 2 GiB", dev);
    MPI_Comm gc;
    if (group_comm(m, dev, g, &gc, d) != GS_OK) return GS_ERR;
    MPI_Request req;
    MPI_Iallgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, gc, &req);
    return wait_req(m, dev, &req, d);
}

static gs_status mpi_all_to_all(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                                void *out, gs_diags *d) {
    mpi_comm *m = mc(c);
    if (bytes > 0x7fffffff) return gs_error(d, gs_span_none(), "device %d: all-to-all block over 2 GiB", dev);
    MPI_Comm gc;
    if (group_comm(m, dev, g, &gc, d) != GS_OK) return GS_ERR;
    MPI_Request req;
    MPI_Ialltoall(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, gc, &req);
    return wait_req(m, dev, &req, d);
}

static gs_status mpi_reduce_scatter(gs_comm *c, int dev, const gs_group *g, gs_type t, gs_reduce_op op,
                                    const void *in, int64_t n, void *out, gs_diags *d) {
    mpi_comm *m = mc(c);
    MPI_Datatype dt;
    MPI_Op mop;
    if (n > 0 && mpi_reduction(t, op, &dt, &mop) && n <= 0x7fffffff) {
        MPI_Comm gc;
        if (group_comm(m, dev, g, &gc, d) != GS_OK) return GS_ERR;
        MPI_Request req;
        MPI_Ireduce_scatter_block(in, out, (int)n, dt, mop, gc, &req);
        return wait_req(m, dev, &req, d);
    }
    int esz = gs_type_size(t);
    int64_t total = n * g->size;
    char *tmp = malloc((size_t)(total * esz) + 1);
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
    if (from >= 0) MPI_Irecv(out, (int)bytes, MPI_BYTE, from, TAG_PERMUTE, m->world, &reqs[nreq++]);
    if (to >= 0) MPI_Isend(in, (int)bytes, MPI_BYTE, to, TAG_PERMUTE, m->world, &reqs[nreq++]);
    for (int i = 0; i < nreq; i++)
        if (wait_req(m, dev, &reqs[i], d) != GS_OK) return GS_ERR;
    /* Keep permutes of consecutive collectives apart. */
    MPI_Request b;
    MPI_Ibarrier(m->world, &b);
    return wait_req(m, dev, &b, d);
}

static gs_status mpi_gather_root(gs_comm *c, int dev, const void *in, int64_t bytes, void *out,
                                 gs_diags *d) {
    mpi_comm *m = mc(c);
    if (bytes > 0x7fffffff) return gs_error(d, gs_span_none(), "device %d: output over 2 GiB", dev);
    MPI_Request req;
    MPI_Igather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, 0, m->world, &req);
    return wait_req(m, dev, &req, d);
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
    m->abort_payload = dev;
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
    if (!m->aborted) { /* an aborted run may still have requests pending on these */
        for (int i = 0; i < m->n_cache; i++) MPI_Comm_free(&m->cache[i].comm);
        MPI_Comm_free(&m->world);
        MPI_Comm_free(&m->fail);
    }
    free(m->cache);
    free(m);
}

static const gs_comm_ops MPI_OPS = {mpi_all_reduce, mpi_all_gather,  mpi_all_to_all,
                                    mpi_reduce_scatter, mpi_permute, mpi_gather_root,
                                    mpi_barrier,    mpi_abort,       mpi_free};

static void ensure_init(void) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        g_we_initialised = true;
    }
}

gs_comm *gs_comm_mpi_new(int devices_per_rank, double timeout_s, gs_diags *d) {
    if (devices_per_rank != 1) {
        gs_error(d, gs_span_none(), "the MPI backend runs one device per rank (--devices-per-rank 1)");
        return NULL;
    }
    ensure_init();
    mpi_comm *m = calloc(1, sizeof *m);
    if (!m) {
        gs_error(d, gs_span_none(), "out of memory");
        return NULL;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &m->world);
    MPI_Comm_dup(MPI_COMM_WORLD, &m->fail);
    MPI_Comm_rank(m->world, &m->rank);
    int size;
    MPI_Comm_size(m->world, &size);
    m->base.ops = &MPI_OPS;
    m->base.n_devices = size * devices_per_rank;
    m->base.first_device = m->rank * devices_per_rank;
    m->base.local_devices = devices_per_rank;
    m->base.timeout_s = timeout_s;
    m->abort_from = -1;
    return &m->base;
}

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

bool gs_mpi_agree(gs_comm *c, bool ok, bool *all_ok) {
    *all_ok = ok;
    if (!c || c->ops != &MPI_OPS) return true;
    mpi_comm *m = mc(c);
    int mine = ok ? 1 : 0, all = 0;
    MPI_Request req;
    MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MIN, m->fail, &req);
    double t0 = now_s(), limit = c->timeout_s > 0 ? c->timeout_s : 60;
    int done = 0;
    while (!done && now_s() - t0 < limit) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
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

#endif

bool gs_mpi_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL ||
           getenv("PMI_RANK") != NULL;
}
