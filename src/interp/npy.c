/*
 * npy.c — NumPy .npy reading and writing (see gspmd/npy.h).
 *
 * Header: magic "\x93NUMPY", version (1.0: 2-byte header length; 2.0/3.0: 4-byte), then a
 * Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
 * spaces to a multiple of 64 bytes and ended by '\n'. Data follows in C order.
 */
#include "kernels.h"
#include "gspmd/npy.h"
#include "base/sysalloc.h"
#include "gspmd/numeric.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct npy_type {
    gs_type type;
    const char *descr; /* little-endian numpy descr */
} npy_type;

static const npy_type NPY_TYPES[] = {
    {GS_PRED, "|b1"}, {GS_S8, "|i1"}, {GS_U8, "|u1"}, {GS_S16, "<i2"}, {GS_U16, "<u2"},
    {GS_S32, "<i4"}, {GS_U32, "<u4"}, {GS_S64, "<i8"}, {GS_U64, "<u8"}, {GS_F16, "<f2"},
    {GS_F32, "<f4"}, {GS_F64, "<f8"}, {GS_C64, "<c8"}, {GS_C128, "<c16"},
};

static const char *descr_of(gs_type t) {
    for (size_t i = 0; i < sizeof NPY_TYPES / sizeof NPY_TYPES[0]; i++)
        if (NPY_TYPES[i].type == t) return NPY_TYPES[i].descr;
    return NULL;
}

static gs_type type_of_descr(const char *d) {
    /* Accept '=' and '<' (native little-endian here) and '|' for one-byte types. */
    char norm[16] = {0};
    snprintf(norm, sizeof norm, "%s", d);
    if (norm[0] == '=') norm[0] = '<';
    if (norm[0] == '<' && (norm[2] == '1' && norm[3] == 0)) norm[0] = '|';
    for (size_t i = 0; i < sizeof NPY_TYPES / sizeof NPY_TYPES[0]; i++)
        if (strcmp(NPY_TYPES[i].descr, norm) == 0) return NPY_TYPES[i].type;
    return GS_INVALID_TYPE;
}

gs_status gs_npy_write(const char *path, const gs_value *v, gs_diags *d) {
    if (!gs_type_is_array(v->type)) return gs_error(d, gs_span_none(), "%s: only arrays can be written", path);
    gs_type t = v->type == GS_BF16 ? GS_F32 : v->type;
    const char *descr = descr_of(t);
    if (!descr)
        return gs_error(d, gs_span_none(), "%s: element type %s has no numpy dtype", path,
                        gs_type_name(v->type));
    char hdr[1024];
    int k = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < v->rank; i++) k += snprintf(hdr + k, sizeof hdr - (size_t)k, "%lld,%s", (long long)v->dims[i], i + 1 < v->rank ? " " : "");
    k += snprintf(hdr + k, sizeof hdr - (size_t)k, "), }");
    int total = 10 + k + 1;
    int pad = (64 - total % 64) % 64;
    for (int i = 0; i < pad; i++) hdr[k++] = ' ';
    hdr[k++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) return gs_error(d, gs_span_none(), "%s: cannot write: %s", path, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(k & 0xff), (unsigned char)(k >> 8)};
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)k, f) == (size_t)k;
    if (ok && v->type == GS_BF16) {
        float buf[1024];
        for (int64_t i = 0; ok && i < v->n; i += 1024) {
            int64_t m = v->n - i < 1024 ? v->n - i : 1024;
            for (int64_t j = 0; j < m; j++) buf[j] = (float)gs_elem_get_f(v->data, GS_BF16, i + j);
            ok = fwrite(buf, 4, (size_t)m, f) == (size_t)m;
        }
    } else if (ok) {
        size_t bytes = gs_value_bytes(v);
        ok = fwrite(v->data, 1, bytes, f) == bytes;
    }
    if (ok && fflush(f) != 0) ok = false;
    int err = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    return ok ? GS_OK : gs_error(d, gs_span_none(), "%s: cannot write: %s", path, strerror(err));
}

/* Finds 'key': in the header dict and returns a pointer just past the colon (and spaces). */
static const char *dict_value(const char *hdr, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

/* Reads the magic, version and header text of .npy file f into *hdr (malloc'd). */
static gs_status read_header(FILE *f, const char *path, char **hdr, gs_diags *d) {
    unsigned char pre[12];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return gs_error(d, gs_span_none(), "%s: not a .npy file", path);
    size_t hlen;
    if (pre[6] == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2)
            return gs_error(d, gs_span_none(), "%s: truncated header", path);
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else {
        return gs_error(d, gs_span_none(), "%s: unsupported .npy version %d", path, pre[6]);
    }
    if (hlen > (1u << 20)) return gs_error(d, gs_span_none(), "%s: header too long", path);
    *hdr = gs_sys_malloc(hlen + 1);
    if (!*hdr || fread(*hdr, 1, hlen, f) != hlen)
        return gs_error(d, gs_span_none(), "%s: truncated header", path);
    (*hdr)[hlen] = 0;
    return GS_OK;
}

/* The dtype (descr, its text), rank and dims the header dictionary hdr declares. */
static gs_status parse_header(const char *hdr, const char *path, char descr[16], gs_type *t,
                              int *rank, int64_t *dims, gs_diags *d) {
    const char *dv = dict_value(hdr, "descr"), *fo = dict_value(hdr, "fortran_order"),
               *sh = dict_value(hdr, "shape");
    if (!dv || !fo || !sh || *dv != '\'' || *sh != '(')
        return gs_error(d, gs_span_none(), "%s: malformed .npy header", path);
    memset(descr, 0, 16);
    const char *q = strchr(dv + 1, '\'');
    if (!q || q - dv - 1 >= 16)
        return gs_error(d, gs_span_none(), "%s: malformed dtype in header", path);
    memcpy(descr, dv + 1, (size_t)(q - dv - 1));
    if (strncmp(fo, "False", 5) != 0)
        return gs_error(d, gs_span_none(),
                        "%s: Fortran-order arrays are not supported (save with C order)", path);
    *t = type_of_descr(descr);
    if (*t == GS_INVALID_TYPE)
        return gs_error(d, gs_span_none(), "%s: dtype '%s' is not supported (big-endian or unknown)",
                        path, descr);
    *rank = 0;
    const char *p = sh + 1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        if (!isdigit((unsigned char)*p) || *rank == GS_MAX_RANK)
            return gs_error(d, gs_span_none(), "%s: malformed shape in header", path);
        char *end;
        errno = 0;
        dims[(*rank)++] = strtoll(p, &end, 10);
        if (errno == ERANGE)
            return gs_error(d, gs_span_none(), "%s: a dim in the header's shape is too large", path);
        p = end;
    }
    return GS_OK;
}

/* The data must be there before anything is allocated for it: a header may claim any shape,
 * and the element count and byte size must not overflow. */
static gs_status check_data_size(FILE *f, const char *path, const char *descr, gs_type t,
                                 int rank, const int64_t *dims, gs_diags *d) {
    long data_at = ftell(f);
    struct stat fs;
    if (data_at < 0 || fstat(fileno(f), &fs) != 0)
        return gs_error(d, gs_span_none(), "%s: cannot read: %s", path, strerror(errno));
    int64_t have = S_ISREG(fs.st_mode) ? (int64_t)fs.st_size - data_at : INT64_MAX;
    int64_t elems = 1, size = gs_type_size(t);
    bool fits = true;
    for (int i = 0; i < rank && fits; i++) {
        if (dims[i] != 0 && elems > INT64_MAX / dims[i]) fits = false;
        else elems *= dims[i];
    }
    if (fits && elems <= INT64_MAX / size && elems * size <= have) return GS_OK;
    char shape[64] = "()"; /* a scalar's; the dims overwrite it */
    int k = 0;
    for (int i = 0; i < rank && k < (int)sizeof shape - 24; i++)
        k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%lld", i ? "," : "",
                      (long long)dims[i]);
    if (!fits || elems > INT64_MAX / size)
        return gs_error(d, gs_span_none(), "%s: the header's shape (%s) has too many elements",
                        path, shape);
    return gs_error(d, gs_span_none(),
                    "%s: file holds fewer bytes than its shape needs (%s of %s: %lld bytes, "
                    "%lld there)", path, descr, shape, (long long)(elems * size),
                    (long long)have);
}

/* The header of path: its dtype, rank, dims and where its data starts (checked to be there). */
static gs_status read_meta(const char *path, gs_type *t, int *rank, int64_t *dims, long *at,
                           gs_diags *d) {
    FILE *f = fopen(path, "rb");
    if (!f) return gs_error(d, gs_span_none(), "%s: cannot open: %s", path, strerror(errno));
    char *hdr = NULL, descr[16];
    gs_status st = read_header(f, path, &hdr, d);
    if (st == GS_OK) st = parse_header(hdr, path, descr, t, rank, dims, d);
    if (st == GS_OK) st = check_data_size(f, path, descr, *t, *rank, dims, d);
    *at = st == GS_OK ? ftell(f) : -1;
    free(hdr);
    fclose(f);
    return st;
}

gs_status gs_npy_read(const char *path, gs_value **out, gs_diags *d) {
    gs_type t = GS_INVALID_TYPE;
    int rank = 0;
    int64_t dims[GS_MAX_RANK] = {0};
    long at;
    if (read_meta(path, &t, &rank, dims, &at, d) != GS_OK) return GS_ERR;
    gs_value *v = gs_value_new_array(t, rank, dims);
    if (!v) return gs_error(d, gs_span_none(), "%s: out of memory", path);
    gs_npy_info info = {path, at, t, t};
    gs_shard_dim sd[GS_MAX_RANK];
    for (int k = 0; k < rank; k++) sd[k] = (gs_shard_dim){0, dims[k], dims[k]};
    if (gs_npy_read_box(&info, rank, dims, sd, v, d) != GS_OK) {
        gs_value_free(v);
        return GS_ERR;
    }
    *out = v;
    return GS_OK;
}

/* The header of path checked against `want` (an array shape): into *info, the file's dtype and
 * where its data starts. */
gs_status gs_npy_open_as(const char *path, const gs_shape *want, const char *param_name,
                         gs_npy_info *info, gs_diags *d) {
    gs_type t = GS_INVALID_TYPE;
    int rank = 0;
    int64_t dims[GS_MAX_RANK] = {0};
    long at;
    gs_status st = read_meta(path, &t, &rank, dims, &at, d);
    if (st != GS_OK) return st;
    bool dims_ok = rank == want->rank;
    for (int i = 0; dims_ok && i < want->rank; i++) dims_ok = dims[i] == want->dims[i];
    gs_type src_ok = want->type == GS_BF16 ? GS_F32 : want->type;
    if (!dims_ok || t != src_ok) {
        gs_value shown = {.type = t, .rank = rank};
        memcpy(shown.dims, dims, sizeof(int64_t) * (size_t)rank);
        char got[128];
        gs_value_shape_str(&shown, got, sizeof got);
        gs_sb ws = {0};
        gs_shape_print(&ws, want, false);
        gs_error(d, gs_span_none(), "input %s: %s holds %s, but the parameter is %s%s", param_name,
                 path, got, gs_sb_str(&ws),
                 want->type == GS_BF16 ? " (bf16 inputs are read from float32 files)" : "");
        gs_sb_free(&ws);
        return GS_ERR;
    }
    info->path = path;
    info->data_at = at;
    info->file_type = t;
    info->type = want->type;
    return GS_OK;
}

/* n elements of the file's type at src into dst[at..] of the parameter's type (the same, or
 * f32 -> bf16 rounded to nearest even). */
static void take_run(const gs_npy_info *info, const void *src, void *dst, int64_t at, int64_t n) {
    if (info->file_type == info->type) {
        int esz = gs_type_size(info->type);
        memcpy((char *)dst + at * esz, src, (size_t)(n * esz));
        return;
    }
    for (int64_t i = 0; i < n; i++)
        gs_elem_set_f(dst, info->type, at + i, gs_elem_get_f(src, info->file_type, i));
}

gs_status gs_npy_read_box(const gs_npy_info *info, int rank, const int64_t *dims,
                          const gs_shard_dim *sd, gs_value *v, gs_diags *d) {
    /* Rows of the box: dims j.. are one contiguous run in the file and in the part when every
     * dim after j is whole there (the whole array is one read). */
    int j = rank ? rank - 1 : 0;
    while (j > 0 && sd[j].offset == 0 && sd[j].valid == dims[j] && sd[j].size == dims[j]) j--;
    int64_t run = rank ? sd[j].valid : 1, rows = 1;
    for (int k = j + 1; k < rank; k++) run *= dims[k];
    for (int k = 0; k < j; k++) rows *= sd[k].valid;
    if (run <= 0 || rows <= 0) return GS_OK;
    FILE *f = fopen(info->path, "rb");
    if (!f) return gs_error(d, gs_span_none(), "%s: cannot open: %s", info->path, strerror(errno));
    int fsz = gs_type_size(info->file_type);
    char *buf = gs_sys_malloc((size_t)(run * fsz));
    gs_status st = buf ? GS_OK : gs_error(d, gs_span_none(), "%s: out of memory", info->path);
    int64_t idx[GS_MAX_RANK] = {0};
    for (int64_t row = 0; st == GS_OK && row < rows; row++) {
        int64_t g = 0, l = 0; /* the row's first element in the file and in the part */
        for (int k = 0; k < rank; k++) {
            g = g * dims[k] + sd[k].offset + idx[k];
            l = l * sd[k].size + idx[k];
        }
        if (fseek(f, info->data_at + (long)(g * fsz), SEEK_SET) != 0 ||
            fread(buf, (size_t)fsz, (size_t)run, f) != (size_t)run)
            st = gs_error(d, gs_span_none(), "%s: file holds fewer bytes than its shape needs",
                          info->path);
        else
            take_run(info, buf, v->data, l, run);
        for (int k = j - 1; k >= 0; k--) {
            if (++idx[k] < sd[k].valid) break;
            idx[k] = 0;
        }
    }
    free(buf);
    fclose(f);
    return st;
}

gs_status gs_npy_read_as(const char *path, const gs_shape *want, const char *param_name,
                         gs_value **out, gs_diags *d) {
    gs_npy_info info;
    if (gs_npy_open_as(path, want, param_name, &info, d) != GS_OK) return GS_ERR;
    gs_value *v = gs_value_new_array(want->type, want->rank, want->dims);
    if (!v) return gs_error(d, gs_span_none(), "%s: out of memory", path);
    gs_shard_dim sd[GS_MAX_RANK];
    for (int k = 0; k < want->rank; k++) sd[k] = (gs_shard_dim){0, want->dims[k], want->dims[k]};
    if (gs_npy_read_box(&info, want->rank, want->dims, sd, v, d) != GS_OK) {
        gs_value_free(v);
        return GS_ERR;
    }
    *out = v;
    return GS_OK;
}
