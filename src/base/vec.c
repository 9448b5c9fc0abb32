/*
 * vec.c — growable malloc'ed arrays: the doubling every growable buffer uses (gs_grow, also
 * under gs_sb) and the element vector gs_vec (base/internal.h).
 */
#include "base/internal.h"

#include <stdlib.h>
#include <string.h>

gs_status gs_grow(void **buf, size_t *cap, size_t need, size_t elem_size, size_t first) {
    if (need <= *cap) return GS_OK;
    size_t n = *cap ? *cap : first;
    while (n < need) n *= 2;
    void *b = realloc(*buf, n * elem_size);
    if (!b) return GS_ERR;
    *buf = b;
    *cap = n;
    return GS_OK;
}

void gs_vec_init(gs_vec *v, size_t elem_size) {
    memset(v, 0, sizeof *v);
    v->elem_size = elem_size;
}

gs_status gs_vec_push(gs_vec *v, const void *elem) {
    if (gs_grow(&v->data, &v->cap, v->n + 1, v->elem_size, 8) != GS_OK) return GS_ERR;
    memcpy((char *)v->data + v->n * v->elem_size, elem, v->elem_size);
    v->n++;
    return GS_OK;
}

void gs_vec_free(gs_vec *v) {
    free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}
