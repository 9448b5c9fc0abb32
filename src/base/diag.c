/*
 * diag.c — diagnostics as values, and their rendering with the source line and a caret
 * (chibicc's style): `file:line:col: error: message`.
 */
#include "gspmd/base.h"

#include <stdlib.h>
#include <string.h>

gs_span gs_span_none(void) {
    gs_span s = {0};
    return s;
}

static void diag_add(gs_diags *d, gs_severity sev, gs_span span, const char *fmt, va_list ap) {
    if (!d) return;
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 8;
        gs_diag *items = realloc(d->items, sizeof *items * (size_t)cap);
        if (!items) {
            if (sev == GS_SEV_ERROR) d->n_errors++;
            return;
        }
        d->items = items;
        d->cap = cap;
    }
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *msg = malloc(n >= 0 ? (size_t)n + 1 : 1);
    if (msg) {
        if (n >= 0)
            vsnprintf(msg, (size_t)n + 1, fmt, ap2);
        else
            msg[0] = 0;
    }
    va_end(ap2);
    d->items[d->n].severity = sev;
    d->items[d->n].span = span;
    d->items[d->n].message = msg;
    d->n++;
    if (sev == GS_SEV_ERROR) d->n_errors++;
}

gs_status gs_verror(gs_diags *d, gs_span span, const char *fmt, va_list ap) {
    diag_add(d, GS_SEV_ERROR, span, fmt, ap);
    return GS_ERR;
}

gs_status gs_error(gs_diags *d, gs_span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_add(d, GS_SEV_ERROR, span, fmt, ap);
    va_end(ap);
    return GS_ERR;
}

void gs_warning(gs_diags *d, gs_span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_add(d, GS_SEV_WARNING, span, fmt, ap);
    va_end(ap);
}

void gs_note(gs_diags *d, gs_span span, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_add(d, GS_SEV_NOTE, span, fmt, ap);
    va_end(ap);
}

static const char *sev_name(gs_severity s) {
    switch (s) {
    case GS_SEV_ERROR: return "error";
    case GS_SEV_WARNING: return "warning";
    default: return "note";
    }
}

/* Prints line `line` of src and a caret under column col. */
static void render_caret(FILE *out, const gs_source *src, uint32_t line, uint32_t col) {
    const char *p = src->text, *end = src->text + src->len;
    for (uint32_t l = 1; l < line && p < end; p++)
        if (*p == '\n') l++;
    const char *q = p;
    while (q < end && *q != '\n') q++;
    int width = (int)(q - p);
    if (width > 300) width = 300;
    fprintf(out, "%.*s\n", width, p);
    for (uint32_t c = 1; c < col && (int)c <= width; c++) fputc(p[c - 1] == '\t' ? '\t' : ' ', out);
    fputs("^\n", out);
}

void gs_diags_render(const gs_diags *d, FILE *out) {
    for (int i = 0; i < d->n; i++) {
        const gs_diag *g = &d->items[i];
        const char *msg = g->message ? g->message : "(out of memory)";
        if (g->span.src && g->span.line > 0) {
            fprintf(out, "%s:%u:%u: %s: %s\n", g->span.src->name, g->span.line, g->span.col,
                    sev_name(g->severity), msg);
            render_caret(out, g->span.src, g->span.line, g->span.col);
        } else {
            fprintf(out, "%s: %s\n", sev_name(g->severity), msg);
        }
    }
    if (d->n_errors > 0 && d->n == 0) fprintf(out, "error: out of memory\n");
}

void gs_diags_clear(gs_diags *d) {
    for (int i = 0; i < d->n; i++) free(d->items[i].message);
    d->n = 0;
    d->n_errors = 0;
}

void gs_diags_free(gs_diags *d) {
    gs_diags_clear(d);
    free(d->items);
    memset(d, 0, sizeof *d);
}
