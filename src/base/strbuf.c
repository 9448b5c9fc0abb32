/*
 * strbuf.c — a growable string (gs_sb) and shortest round-trip formatting of floats.
 */
#include "gspmd/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool sb_reserve(gs_sb *sb, size_t extra) {
    if (sb->failed) return false;
    if (sb->len + extra + 1 <= sb->cap) return true;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1) cap *= 2;
    char *buf = realloc(sb->buf, cap);
    if (!buf) {
        sb->failed = true;
        return false;
    }
    sb->buf = buf;
    sb->cap = cap;
    return true;
}

void gs_sb_putn(gs_sb *sb, const char *s, size_t n) {
    if (!sb_reserve(sb, n)) return;
    memcpy(sb->buf + sb->len, s, n);
    sb->len += n;
    sb->buf[sb->len] = 0;
}

void gs_sb_putc(gs_sb *sb, char c) { gs_sb_putn(sb, &c, 1); }
void gs_sb_puts(gs_sb *sb, const char *s) { gs_sb_putn(sb, s, strlen(s)); }

void gs_sb_vprintf(gs_sb *sb, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n > 0 && sb_reserve(sb, (size_t)n)) {
        vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap2);
        sb->len += (size_t)n;
    }
    va_end(ap2);
}

void gs_sb_printf(gs_sb *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gs_sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

const char *gs_sb_str(const gs_sb *sb) { return sb->buf ? sb->buf : ""; }

char *gs_sb_take(gs_sb *sb) {
    char *s = sb->buf;
    if (!s && !sb->failed) s = calloc(1, 1);
    if (sb->failed) {
        free(s);
        s = NULL;
    }
    memset(sb, 0, sizeof *sb);
    return s;
}

void gs_sb_free(gs_sb *sb) {
    free(sb->buf);
    memset(sb, 0, sizeof *sb);
}

void gs_format_double(char *buf, size_t size, double v) {
    if (isnan(v)) {
        snprintf(buf, size, signbit(v) ? "-nan" : "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v < 0 ? "-inf" : "inf");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, size, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

void gs_format_float(char *buf, size_t size, float v) {
    if (isnan(v) || isinf(v)) {
        gs_format_double(buf, size, v);
        return;
    }
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, size, "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}
