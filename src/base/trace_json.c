/*
 * trace_json.c — Chrome's trace-event JSON (what Perfetto, ui.perfetto.dev, and chrome://tracing
 * open), written by `gspmd run --trace` (src/runtime/trace.c: what the devices ran) and `gspmd
 * cost --trace` (src/cost/step.c: what the cost model predicts), so that the two timelines of a
 * program load side by side. One process per device, complete ("X") events in microseconds.
 */
#include "base/internal.h"

static void json_str(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
}

void gs_trace_json_begin(gs_trace_json *t, FILE *f) {
    t->f = f;
    t->first = true;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
}

void gs_trace_json_process(gs_trace_json *t, int pid, const char *name) {
    fprintf(t->f, "%s{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, "
                  "\"args\": {\"name\": \"",
            t->first ? "" : ",\n", pid);
    json_str(t->f, name);
    fprintf(t->f, "\"}},\n{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": %d, "
                  "\"tid\": 0, \"args\": {\"sort_index\": %d}}",
            pid, pid);
    t->first = false;
}

void gs_trace_json_event(gs_trace_json *t, int pid, int tid, const char *name, const char *op,
                         double ts_us, double dur_us, int64_t bytes, double wait_us) {
    fprintf(t->f, "%s{\"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"name\": \"", t->first ? "" : ",\n",
            pid, tid);
    json_str(t->f, name);
    fprintf(t->f, "\", \"cat\": \"%s\", \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"op\": \"%s\"", op,
            ts_us, dur_us, op);
    if (bytes >= 0) fprintf(t->f, ", \"bytes\": %lld", (long long)bytes);
    if (wait_us >= 0) fprintf(t->f, ", \"wait_us\": %.3f", wait_us);
    fprintf(t->f, "}}");
    t->first = false;
}

bool gs_trace_json_end(gs_trace_json *t) {
    fprintf(t->f, "\n]}\n");
    bool ok = !ferror(t->f);
    return fclose(t->f) == 0 && ok;
}
