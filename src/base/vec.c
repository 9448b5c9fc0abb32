/*
 * vec.c — gs_vec (base/internal.h): a growable array of fixed-size elements for scratch lists,
 * kept in a gs_sb, the library's one growable buffer.
 */
#include "base/internal.h"

#include <string.h>

void gs_vec_init(gs_vec *v, size_t elem_size) {
    memset(v, 0, sizeof *v);
    v->elem_size = elem_size;
}

gs_status gs_vec_push(gs_vec *v, const void *elem) {
    v->bytes.len = v->n * v->elem_size; /* n may have been set back to empty the vector */
    gs_sb_putn(&v->bytes, elem, v->elem_size);
    if (v->bytes.failed) return GS_ERR;
    v->data = v->bytes.buf;
    v->n++;
    return GS_OK;
}

void gs_vec_free(gs_vec *v) {
    gs_sb_free(&v->bytes);
    v->data = NULL;
    v->n = 0;
}
