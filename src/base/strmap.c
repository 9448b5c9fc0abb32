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

/* The map's hash of s[0..n): a word at a time (keys are names and type texts, often longer
 * than 16 bytes). Not gs_hash_bytes, whose values other modules keep. */
static uint64_t key_hash(const char *s, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* Is the NUL-terminated key equal to s[0..n)? (A NUL inside s[0..n) never matches.) */
static bool key_equals(const char *key, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (key[i] != s[i] || !s[i]) return false;
    return key[n] == 0;
}

static gs_status strmap_grow(gs_strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    gs_strmap_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return GS_ERR;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key) continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (slots[j].key) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return GS_OK;
}

gs_status gs_strmap_swap(gs_strmap *m, const char *key, void **val) {
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m) != GS_OK) return GS_ERR;
    size_t n = strlen(key);
    uint64_t h = key_hash(key, n);
    size_t j = h & (m->cap - 1);
    for (; m->slots[j].key; j = (j + 1) & (m->cap - 1)) {
        gs_strmap_slot *e = &m->slots[j];
        if (e->hash == h && key_equals(e->key, key, n)) {
            void *old = e->val;
            e->val = *val;
            *val = old;
            return GS_OK;
        }
    }
    m->slots[j] = (gs_strmap_slot){key, *val, h};
    m->n++;
    *val = NULL;
    return GS_OK;
}

gs_status gs_strmap_put(gs_strmap *m, const char *key, void *val) {
    return gs_strmap_swap(m, key, &val);
}

void *gs_strmap_getn(const gs_strmap *m, const char *s, size_t n) {
    if (!m->cap) return NULL;
    uint64_t h = key_hash(s, n);
    for (size_t j = h & (m->cap - 1); m->slots[j].key; j = (j + 1) & (m->cap - 1))
        if (m->slots[j].hash == h && key_equals(m->slots[j].key, s, n)) return m->slots[j].val;
    return NULL;
}

void *gs_strmap_get(const gs_strmap *m, const char *key) {
    return gs_strmap_getn(m, key, strlen(key));
}

void gs_strmap_free(gs_strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}
