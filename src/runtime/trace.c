/*
 * trace.c — what a process's devices ran, on a timeline (`gspmd run --trace FILE.json`): every
 * instruction the interpreter evaluates on a device (a fused elementwise chain as its root;
 * parameters, constants, tuples and get-tuple-elements are plumbing and left out), with its
 * start and end, and for a collective the bytes of its result and the time the device spent
 * blocked in the communicator for it (gs_trace_add_wait). Written as Chrome's trace-event
 * JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing open: one process per device, one
 * complete event ("ph": "X") per instruction, a while loop's or call's event enclosing those of
 * its body.
 */
#include "internal.h"
#include "base/internal.h"
#include "base/sysalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct trace_event {
    const gs_instr *in;
    double t0, t1; /* seconds, CLOCK_MONOTONIC */
    int64_t bytes; /* a collective's result bytes, else -1 */
    int64_t wait_ns; /* a collective's time blocked in the communicator, else -1 */
} trace_event;

typedef struct device_trace {
    gs_instr_observer obs;
    gs_vec ev; /* trace_event */
    bool oom; /* an event could not be recorded: the file says so */
    int64_t wait_ns; /* blocked since the last collective's event (the device's thread and its
                        asynchronous helper add to it: atomic) */
} device_trace;

struct gs_trace {
    int local, first;
    device_trace *dev;
};

static bool plumbing(gs_opcode op) {
    return op == GS_OP_PARAMETER || op == GS_OP_CONSTANT || op == GS_OP_TUPLE ||
           op == GS_OP_GET_TUPLE_ELEMENT;
}

static void record(void *ctx, const gs_instr *in, double t0, double t1, const gs_value *r) {
    device_trace *t = ctx;
    if (plumbing(in->op)) return;
    int64_t bytes = -1, wait = -1;
    gs_op_family fam = gs_op_info_of(in->op)->family;
    if (fam == GS_FAM_COLLECTIVE || fam == GS_FAM_ASYNC) {
        if (r && r->type != GS_TUPLE) bytes = (int64_t)gs_value_bytes(r);
        wait = __atomic_exchange_n(&t->wait_ns, 0, __ATOMIC_ACQ_REL);
    }
    trace_event e = {in, t0, t1, bytes, wait};
    if (gs_vec_push(&t->ev, &e) != GS_OK) t->oom = true;
}

gs_trace *gs_trace_new(int local_devices, int first_device) {
    gs_trace *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->local = local_devices;
    t->first = first_device;
    t->dev = calloc((size_t)(local_devices > 0 ? local_devices : 1), sizeof *t->dev);
    if (!t->dev) {
        free(t);
        return NULL;
    }
    for (int k = 0; k < local_devices; k++) {
        t->dev[k].obs = (gs_instr_observer){record, &t->dev[k]};
        gs_vec_init(&t->dev[k].ev, sizeof(trace_event));
    }
    return t;
}

void gs_trace_free(gs_trace *t) {
    if (!t) return;
    for (int k = 0; k < t->local; k++) gs_vec_free(&t->dev[k].ev);
    free(t->dev);
    free(t);
}

void gs_trace_add_wait(gs_trace *t, int k, double seconds) {
    if (t && k >= 0 && k < t->local && seconds > 0)
        __atomic_add_fetch(&t->dev[k].wait_ns, (int64_t)(seconds * 1e9), __ATOMIC_ACQ_REL);
}

const gs_instr_observer *gs_trace_observer(gs_trace *t, int k) {
    return t && k >= 0 && k < t->local ? &t->dev[k].obs : NULL;
}

gs_status gs_trace_write(const gs_trace *t, const char *path, gs_diags *d) {
    FILE *f = fopen(path, "w");
    if (!f)
        return gs_error(d, gs_span_none(), "cannot write the trace '%s': %s", path,
                        strerror(errno));
    double origin = -1;
    for (int k = 0; k < t->local; k++)
        for (size_t i = 0; i < t->dev[k].ev.n; i++) {
            double t0 = GS_VEC_AT(&t->dev[k].ev, trace_event, i).t0;
            if (origin < 0 || t0 < origin) origin = t0;
        }
    if (origin < 0) origin = 0;
    gs_trace_json j;
    gs_trace_json_begin(&j, f);
    for (int k = 0; k < t->local; k++) {
        int dev = t->first + k;
        char name[96];
        snprintf(name, sizeof name, "device %d%s", dev,
                 t->dev[k].oom ? " (some events lost: out of memory)" : "");
        gs_trace_json_process(&j, dev, name);
        for (size_t i = 0; i < t->dev[k].ev.n; i++) {
            const trace_event *e = &GS_VEC_AT(&t->dev[k].ev, trace_event, i);
            gs_trace_json_event(&j, dev, 0, e->in->name, gs_op_name(e->in->op),
                                (e->t0 - origin) * 1e6, (e->t1 - e->t0) * 1e6, e->bytes,
                                e->wait_ns >= 0 ? (double)e->wait_ns * 1e-3 : -1);
        }
    }
    bool ok = gs_trace_json_end(&j);
    return ok ? GS_OK
              : gs_error(d, gs_span_none(), "cannot write the trace '%s': %s", path,
                         strerror(errno));
}
