/*
 * strmap.c — hashing (gs_hash_bytes) and the string-keyed open-addressing hash map (gs_strmap).
 */
#include "gspmd/base.h"
#include "base/internal.h"

#include <stdlib.h>
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
