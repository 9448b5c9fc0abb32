/*
 * strmap.c — string-keyed open-addressing hash map, growable arrays, and source files.
 */
#include "gspmd/base.h"
#include "base/internal.h"

#include <stdlib.h>
#include <errno.h>
#include <string.h>

uint64_t gs_hash_bytes(const void *p, size_t n, uint64_t seed) {
    /* FNV-1a, then a final mix. */
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static gs_status strmap_grow(gs_strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    const char **keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return GS_ERR;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = gs_hash_bytes(m->keys[i], strlen(m->keys[i]), 0) & (cap - 1);
        while (keys[j]) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return GS_OK;
}

gs_status gs_strmap_put(gs_strmap *m, const char *key, void *val) {
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m) != GS_OK) return GS_ERR;
    size_t j = gs_hash_bytes(key, strlen(key), 0) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) {
            m->vals[j] = val;
            return GS_OK;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = val;
    m->n++;
    return GS_OK;
}

void *gs_strmap_get(const gs_strmap *m, const char *key) {
    if (!m->cap) return NULL;
    size_t j = gs_hash_bytes(key, strlen(key), 0) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

void gs_strmap_free(gs_strmap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

void gs_vec_init(gs_vec *v, size_t elem_size) {
    memset(v, 0, sizeof *v);
    v->elem_size = elem_size;
}

gs_status gs_vec_push(gs_vec *v, const void *elem) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        void *d = realloc(v->data, cap * v->elem_size);
        if (!d) return GS_ERR;
        v->data = d;
        v->cap = cap;
    }
    memcpy((char *)v->data + v->n * v->elem_size, elem, v->elem_size);
    v->n++;
    return GS_OK;
}

void gs_vec_free(gs_vec *v) {
    free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}

gs_source *gs_source_from_string(const char *name, const char *text) {
    size_t nl = strlen(name), tl = strlen(text);
    gs_source *s = malloc(sizeof *s + nl + 1 + tl + 1);
    if (!s) return NULL;
    char *nm = (char *)(s + 1);
    memcpy(nm, name, nl + 1);
    char *tx = nm + nl + 1;
    memcpy(tx, text, tl + 1);
    s->name = nm;
    s->text = tx;
    s->len = tl;
    return s;
}

gs_source *gs_source_read_file(const char *path, char *err, size_t err_size) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    gs_sb sb = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) gs_sb_putn(&sb, buf, n);
    bool bad = ferror(f);
    if (f != stdin) fclose(f);
    if (bad || sb.failed) {
        snprintf(err, err_size, "%s: cannot read", path);
        gs_sb_free(&sb);
        return NULL;
    }
    if (memchr(gs_sb_str(&sb), 0, sb.len)) {
        snprintf(err, err_size, "%s: not a text file (contains NUL bytes)", path);
        gs_sb_free(&sb);
        return NULL;
    }
    gs_source *s = gs_source_from_string(path, gs_sb_str(&sb));
    gs_sb_free(&sb);
    if (!s) snprintf(err, err_size, "%s: out of memory", path);
    return s;
}

void gs_source_free(gs_source *s) { free(s); }
