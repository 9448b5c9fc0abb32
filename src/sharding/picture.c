/*
 * picture.c — pictures of a layout: which device holds which block of an array. A terminal grid
 * in the manner of jax.debug.visualize_array_sharding (rank 2 as rows x columns, rank 1 one row,
 * higher ranks one grid per tile index of the leading dims; ANSI colours on request), the same
 * as SVG, and the per-device layout as JSON for tools and tests.
 *
 * A block is one data tile: along each dim its rows/columns are [min(k*size, dim),
 * min((k+1)*size, dim)) with size = ceil(dim / tiles), so the last blocks of an uneven dim are
 * short or empty. A block's label lists the devices holding it (every member of its replication
 * group), with runs written a-b.
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* Most blocks drawn before the pictures give up (the JSON has no limit). */
enum { MAX_BLOCKS = 4096 };

/* What the pictures need of a sharding over one shape. */
typedef struct layout {
    const gs_sharding *s;       /* the (non-tuple) sharding */
    int rank;                   /* shape rank */
    const int64_t *dims;        /* shape dims */
    int64_t n_devices;          /* devices for the kinds that do not say (>= 1) */
    int64_t tiles[GS_MAX_RANK]; /* tiles per dim */
    int64_t size[GS_MAX_RANK];  /* padded shard size per dim */
    int64_t n_blocks;           /* product of tiles */
} layout;

static void layout_init(layout *l, const gs_sharding *s, int rank, const int64_t *dims,
                        int64_t n_devices) {
    l->s = s;
    l->rank = rank;
    l->dims = dims;
    l->n_devices = n_devices > 0 ? n_devices : 1;
    l->n_blocks = 1;
    for (int i = 0; i < rank; i++) {
        l->tiles[i] = gs_sharding_tiles_in_dim(s, i);
        l->size[i] = gs_ceil_div(dims[i], l->tiles[i]);
        l->n_blocks *= l->tiles[i];
    }
}

/* Start and end of block k along dim i. */
static void block_range(const layout *l, int i, int64_t k, int64_t *lo, int64_t *hi) {
    *lo = k * l->size[i];
    *hi = *lo + l->size[i];
    if (*lo > l->dims[i]) *lo = l->dims[i];
    if (*hi > l->dims[i]) *hi = l->dims[i];
}

/* The label of block b (ravelled data tile index): its devices, runs compacted, long lists cut. */
static void block_label(const layout *l, int64_t b, gs_sb *sb) {
    const gs_sharding *s = l->s;
    if (s->kind == GS_SHARDING_MAXIMAL) {
        gs_sb_printf(sb, "%lld", (long long)s->device);
        return;
    }
    int64_t first = 0, count = l->n_devices;
    if (s->kind == GS_SHARDING_TILED) {
        count = s->tiles.n / l->n_blocks;
        first = b * count;
    }
    const char *prefix = s->kind == GS_SHARDING_MANUAL      ? "manual "
                         : s->kind == GS_SHARDING_UNKNOWN   ? "unknown "
                         : s->kind == GS_SHARDING_UNREDUCED ? "partial "
                                                            : "";
    gs_sb_puts(sb, prefix);
    size_t start = sb->len;
    int64_t i = 0, shown = 0;
    while (i < count) {
        int64_t d0 = s->kind == GS_SHARDING_TILED ? gs_tile_device_at(&s->tiles, first + i) : i;
        int64_t j = i + 1;
        while (j < count) {
            int64_t dj = s->kind == GS_SHARDING_TILED ? gs_tile_device_at(&s->tiles, first + j) : j;
            if (dj != d0 + (j - i)) break;
            j++;
        }
        if (sb->len - start > 20) {
            gs_sb_printf(sb, ",..(%lld)", (long long)count);
            return;
        }
        if (shown++) gs_sb_putc(sb, ',');
        if (j - i >= 3)
            gs_sb_printf(sb, "%lld-%lld", (long long)d0, (long long)(d0 + (j - i) - 1));
        else
            for (int64_t k = i; k < j; k++)
                gs_sb_printf(sb, "%s%lld", k > i ? "," : "", (long long)(d0 + (k - i)));
        i = j;
    }
}

/* The grid dims: rows (or -1), cols (or -1), and the leading dims before them. */
static void grid_dims(int rank, int *row, int *col, int *lead) {
    *row = rank >= 2 ? rank - 2 : -1;
    *col = rank >= 1 ? rank - 1 : -1;
    *lead = rank >= 2 ? rank - 2 : 0;
}

/* Header of the grid for leading tile index idx: `[0:4, 2:3, :, :]`. */
static void lead_header(const layout *l, const int64_t *idx, int lead, gs_sb *sb) {
    gs_sb_putc(sb, '[');
    for (int i = 0; i < l->rank; i++) {
        if (i) gs_sb_puts(sb, ", ");
        if (i < lead) {
            int64_t lo, hi;
            block_range(l, i, idx[i], &lo, &hi);
            gs_sb_printf(sb, "%lld:%lld", (long long)lo, (long long)hi);
        } else {
            gs_sb_putc(sb, ':');
        }
    }
    gs_sb_puts(sb, "]\n");
}

static const int PALETTE[] = {25, 28, 90, 130, 31, 94, 60, 136, 24, 65, 96, 166};

static void repeat(gs_sb *sb, const char *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) gs_sb_puts(sb, s);
}

void gs_sharding_draw_text(gs_sb *sb, const gs_sharding *s, int rank, const int64_t *dims,
                           int64_t n_devices, bool color) {
    layout l;
    layout_init(&l, s, rank, dims, n_devices);
    if (l.n_blocks > MAX_BLOCKS) {
        gs_sb_printf(sb, "(%lld blocks: too many to draw; use --json)\n", (long long)l.n_blocks);
        return;
    }
    int row, col, lead;
    grid_dims(rank, &row, &col, &lead);
    int64_t nr = row >= 0 ? l.tiles[row] : 1, nc = col >= 0 ? l.tiles[col] : 1;
    int64_t n_grids = l.n_blocks / (nr * nc);
    /* Column width from the longest label. */
    int64_t width = 5;
    for (int64_t b = 0; b < l.n_blocks; b++) {
        gs_sb lab = {0};
        block_label(&l, b, &lab);
        if ((int64_t)lab.len + 2 > width) width = (int64_t)lab.len + 2;
        gs_sb_free(&lab);
    }
    int64_t idx[GS_MAX_RANK] = {0};
    for (int64_t g = 0; g < n_grids; g++) {
        if (lead > 0) lead_header(&l, idx, lead, sb);
        int64_t base = g * nr * nc;
        gs_sb_puts(sb, "┌");
        for (int64_t c = 0; c < nc; c++) {
            repeat(sb, "─", width);
            gs_sb_puts(sb, c + 1 < nc ? "┬" : "┐\n");
        }
        for (int64_t r = 0; r < nr; r++) {
            gs_sb_puts(sb, "│");
            for (int64_t c = 0; c < nc; c++) {
                int64_t b = base + r * nc + c;
                gs_sb lab = {0};
                block_label(&l, b, &lab);
                int64_t pad = width - (int64_t)lab.len, left = pad / 2;
                if (color) gs_sb_printf(sb, "\x1b[48;5;%dm\x1b[38;5;15m", PALETTE[b % 12]);
                repeat(sb, " ", left);
                gs_sb_puts(sb, gs_sb_str(&lab));
                repeat(sb, " ", pad - left);
                if (color) gs_sb_puts(sb, "\x1b[0m");
                gs_sb_puts(sb, "│");
                gs_sb_free(&lab);
            }
            if (row >= 0) {
                int64_t lo, hi;
                block_range(&l, row, r, &lo, &hi);
                gs_sb_printf(sb, " %lld:%lld", (long long)lo, (long long)hi);
            }
            gs_sb_putc(sb, '\n');
            if (r + 1 < nr) {
                gs_sb_puts(sb, "├");
                for (int64_t c = 0; c < nc; c++) {
                    repeat(sb, "─", width);
                    gs_sb_puts(sb, c + 1 < nc ? "┼" : "┤\n");
                }
            }
        }
        gs_sb_puts(sb, "└");
        for (int64_t c = 0; c < nc; c++) {
            repeat(sb, "─", width);
            gs_sb_puts(sb, c + 1 < nc ? "┴" : "┘\n");
        }
        if (col >= 0) {
            gs_sb line = {0};
            gs_sb_putc(&line, ' ');
            for (int64_t c = 0; c < nc; c++) {
                int64_t lo, hi;
                block_range(&l, col, c, &lo, &hi);
                char buf[48];
                int n = snprintf(buf, sizeof buf, "%lld:%lld", (long long)lo, (long long)hi);
                int64_t pad = width + 1 - n, left = pad / 2;
                repeat(&line, " ", left > 0 ? left : 0);
                gs_sb_puts(&line, buf);
                repeat(&line, " ", pad - left > 0 ? pad - left : 1);
            }
            size_t len = line.len;
            while (len > 0 && gs_sb_str(&line)[len - 1] == ' ') len--;
            gs_sb_putn(sb, gs_sb_str(&line), len);
            gs_sb_putc(sb, '\n');
            gs_sb_free(&line);
        }
        for (int i = lead - 1; i >= 0; i--) {
            if (++idx[i] < l.tiles[i]) break;
            idx[i] = 0;
        }
    }
}

/* ------------------------------------------------------------------ SVG */

/* Pixel extents of the blocks along dim i (n blocks) within total px, proportional to their
 * data with a minimum so empty blocks stay visible. */
static void extents(const layout *l, int i, int64_t n, double total, double *start, double *len) {
    double min = 24, pos = 0;
    double avail = total - min * (double)n;
    for (int64_t k = 0; k < n; k++) {
        int64_t lo = 0, hi = 1;
        if (i >= 0) block_range(l, i, k, &lo, &hi);
        double frac =
            i >= 0 && l->dims[i] > 0 ? (double)(hi - lo) / (double)l->dims[i] : 1.0 / (double)n;
        start[k] = pos;
        len[k] = min + avail * frac;
        pos += len[k];
    }
}

void gs_sharding_draw_svg(gs_sb *sb, const gs_sharding *s, int rank, const int64_t *dims,
                          int64_t n_devices) {
    layout l;
    layout_init(&l, s, rank, dims, n_devices);
    int row, col, lead;
    grid_dims(rank, &row, &col, &lead);
    int64_t nr = row >= 0 ? l.tiles[row] : 1, nc = col >= 0 ? l.tiles[col] : 1;
    int64_t n_grids = l.n_blocks <= MAX_BLOCKS ? l.n_blocks / (nr * nc) : 0;
    double gw = 480, gh = row >= 0 ? 360 : 60, head = lead > 0 ? 24 : 0, gap = 16;
    double height = (double)n_grids * (gh + head + gap) + gap;
    gs_sb_printf(sb,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                 "font-family=\"monospace\" font-size=\"12\">\n",
                 gw + 2 * gap, height < 60 ? 60 : height);
    if (n_grids == 0)
        gs_sb_printf(sb, "<text x=\"%.0f\" y=\"30\">%lld blocks: too many to draw</text>\n", gap,
                     (long long)l.n_blocks);
    double *cs = malloc(sizeof(double) * (size_t)(nc + nr) * 2);
    if (!cs) {
        gs_sb_puts(sb, "</svg>\n");
        return;
    }
    double *cl = cs + nc, *rs = cl + nc, *rl = rs + nr;
    extents(&l, col, nc, gw, cs, cl);
    extents(&l, row, nr, gh, rs, rl);
    int64_t idx[GS_MAX_RANK] = {0};
    double y0 = gap;
    for (int64_t g = 0; g < n_grids; g++) {
        if (lead > 0) {
            gs_sb h = {0};
            lead_header(&l, idx, lead, &h);
            h.buf[h.len - 1] = 0; /* drop the newline */
            gs_sb_printf(sb, "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", gap, y0 + 14, h.buf);
            gs_sb_free(&h);
        }
        double top = y0 + head;
        for (int64_t r = 0; r < nr; r++)
            for (int64_t c = 0; c < nc; c++) {
                int64_t b = g * nr * nc + r * nc + c;
                gs_sb lab = {0};
                block_label(&l, b, &lab);
                double x = gap + cs[c], y = top + rs[r];
                gs_sb_printf(sb,
                             "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                             "fill=\"hsl(%lld,55%%,72%%)\" stroke=\"black\"/>\n",
                             x, y, cl[c], rl[r], (long long)((b * 47) % 360));
                gs_sb_printf(sb,
                             "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                             "dominant-baseline=\"middle\">%s</text>\n",
                             x + cl[c] / 2, y + rl[r] / 2, gs_sb_str(&lab));
                gs_sb_free(&lab);
            }
        y0 += gh + head + gap;
        for (int i = lead - 1; i >= 0; i--) {
            if (++idx[i] < l.tiles[i]) break;
            idx[i] = 0;
        }
    }
    free(cs);
    gs_sb_puts(sb, "</svg>\n");
}

/* ------------------------------------------------------------------ JSON */

static cJSON *int_array(const int64_t *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *x = cJSON_CreateNumber((double)v[i]);
        if (!x || !cJSON_AddItemToArray(a, x)) {
            cJSON_Delete(x);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* Adds one device's entry; false on allocation failure. */
static bool add_device(cJSON *list, const gs_sharding *s, int rank, const int64_t *dims,
                       int64_t device) {
    int64_t tile[GS_MAX_RANK] = {0}, off[GS_MAX_RANK], size[GS_MAX_RANK], valid[GS_MAX_RANK];
    gs_shard_dim sd[GS_MAX_RANK];
    if (!gs_sharding_device_shard(s, rank, dims, device, sd)) return true;
    if (s->kind == GS_SHARDING_TILED) gs_sharding_tile_index(s, device, tile);
    for (int i = 0; i < rank; i++) {
        off[i] = sd[i].offset;
        size[i] = sd[i].size;
        valid[i] = sd[i].valid;
    }
    cJSON *e = cJSON_CreateObject();
    if (!e) return false;
    bool ok = cJSON_AddNumberToObject(e, "device", (double)device) &&
              cJSON_AddItemToObject(e, "tile", int_array(tile, rank)) &&
              cJSON_AddItemToObject(e, "offset", int_array(off, rank)) &&
              cJSON_AddItemToObject(e, "shard_shape", int_array(size, rank)) &&
              cJSON_AddItemToObject(e, "valid", int_array(valid, rank)) &&
              cJSON_AddItemToArray(list, e);
    if (!ok) cJSON_Delete(e);
    return ok;
}

char *gs_sharding_layout_json(const gs_sharding *s, const char *shape_text, int rank,
                              const int64_t *dims, int64_t n_devices) {
    gs_sb text = {0};
    gs_sharding_print(&text, s);
    cJSON *root = cJSON_CreateObject();
    cJSON *list = cJSON_CreateArray();
    bool ok = root && list && !text.failed &&
              cJSON_AddStringToObject(root, "sharding", gs_sb_str(&text)) &&
              cJSON_AddStringToObject(root, "shape", shape_text);
    gs_sb_free(&text);
    int64_t total = n_devices > 0 ? n_devices : 1;
    if (s->kind == GS_SHARDING_TILED) total = s->tiles.n;
    if (s->kind == GS_SHARDING_MAXIMAL && total <= s->device) total = s->device + 1;
    ok = ok && cJSON_AddNumberToObject(root, "num_devices", (double)total);
    if (ok && s->kind == GS_SHARDING_TILED) {
        /* Ascending device ids: 0..n-1 for iota, the sorted list for explicit assignments. */
        for (int64_t i = 0; ok && i < s->tiles.n; i++) {
            int64_t dev = s->tiles.iota ? i : s->tiles.by_device[2 * i];
            ok = add_device(list, s, rank, dims, dev);
        }
    } else if (ok && s->kind == GS_SHARDING_MAXIMAL) {
        ok = add_device(list, s, rank, dims, s->device);
    } else if (ok) {
        for (int64_t d = 0; ok && d < total; d++) ok = add_device(list, s, rank, dims, d);
    }
    if (ok) {
        ok = cJSON_AddItemToObject(root, "devices", list);
        if (ok) list = NULL;
    }
    char *out = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(list);
    cJSON_Delete(root);
    return out;
}
