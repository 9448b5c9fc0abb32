/*
 * cmd_sharding.c — `gspmd show-sharding`, and the --mesh / --shard options other subcommands
 * share (see cli.h).
 *
 *   gspmd show-sharding SHARDING --shape SHAPE [--mesh MESH] [--devices N] [--json]
 *                       [--svg FILE] [--color|--no-color]
 *
 * SHARDING is XLA sharding text (`{devices=[2,2]<=[4]}`, named form included) or, with --mesh,
 * a PartitionSpec (`data,None`). Prints the grid of which device holds which block (colours
 * when stdout is a terminal), or with --json the layout per device; --svg also writes the
 * picture as SVG. Errors in SHARDING, --shape or --mesh print `<arg>:1:COL: error: ...` with a
 * caret under the problem and exit 1; bad usage exits 2.
 */
#include "cli.h"
#include "gspmd/text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *SHOW_USAGE =
    "gspmd show-sharding SHARDING --shape SHAPE [--mesh MESH] [--devices N] [--json]\n"
    "                    [--svg FILE] [--color|--no-color]";

static const char *SHOW_HELP =
    "Draws which device holds which block of an array of shape SHAPE (e.g. f32[5,7]) under\n"
    "SHARDING: XLA sharding text such as '{devices=[2,2]<=[4]}' or\n"
    "'{devices=[2,1,2]<=[4] last_tile_dim_replicate}', or, with --mesh, a PartitionSpec such as\n"
    "'data,None' or '(data,model),None' (JAX's NamedSharding; unmentioned axes replicate).\n"
    "\n"
    "  --shape SHAPE   the array: TYPE[d0,d1,...] (TYPE optional, default f32)\n"
    "  --mesh MESH     named mesh NAME=SIZE,... over devices 0..N-1 row-major, optionally\n"
    "                  followed by :ORDER (a device list, or <=[dims]T(perm))\n"
    "  --devices N     the device count (default: the mesh's; replicated shardings: 1); a tiled\n"
    "                  sharding must use exactly that many\n"
    "  --json          print {\"sharding\", \"shape\", \"num_devices\", \"devices\": "
    "[{\"device\",\n"
    "                  \"tile\", \"offset\", \"shard_shape\", \"valid\"}...]} instead of the grid\n"
    "  --svg FILE      also write the picture as SVG to FILE\n"
    "  --color         colour the grid (default when stdout is a terminal); --no-color: never\n";

const char *const GS_CLI_SHARDING_HELP =
    "  --mesh NAME=SIZE,...[:ORDER]   named device mesh for PartitionSpecs\n"
    "  --shard NAME=SPEC              give instructions named NAME (a glob; repeatable) the\n"
    "                                 sharding SPEC: a PartitionSpec over --mesh ('batch,None')\n"
    "                                 or XLA sharding text ('{devices=[2,1]<=[2]}')\n";

/* Renders d against a one-line source holding the argument text, so errors get a caret. */
static void render(gs_diags *d) { gs_diags_render(d, stderr); }

int gs_cli_parse_mesh(gs_arena *a, const char *text, gs_mesh *out) {
    gs_source *src = gs_source_from_string("--mesh", text);
    if (!src) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    gs_diags d = {0};
    gs_span sp = {src, 1, 1};
    int rc = gs_mesh_parse(a, src->text, src->len, out, &d, sp) == GS_OK ? 0 : 1;
    render(&d);
    gs_diags_free(&d);
    gs_source_free(src);
    return rc;
}

/* What one command line asks for. */
typedef struct show_args {
    const char *text;      /* SHARDING */
    const char *shape;     /* --shape */
    const char *mesh;      /* --mesh, or NULL */
    const char *svg;       /* --svg, or NULL */
    const char *ndev;      /* --devices, or NULL */
    int64_t n_devices;     /* --devices N, or 0 */
    bool json;             /* --json */
    int color;             /* --color 1, --no-color 0, else -1 */
} show_args;

/* The argument loop: GS_CLI_CONTINUE, or the exit code (0 after --help, 2 bad usage). */
static int show_parse_args(int argc, char **argv, show_args *o) {
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (gs_cli_is_help(argv[i])) {
            return gs_cli_print_help(SHOW_USAGE, SHOW_HELP); /* SHOW_HELP has no % */
        } else if (gs_cli_opt_value(argc, argv, &i, "--shape", &v)) {
            o->shape = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "--mesh", &v)) {
            o->mesh = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "--svg", &v)) {
            o->svg = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "--devices", &v)) {
            o->ndev = v;
        } else if (strcmp(argv[i], "--json") == 0) {
            o->json = true;
        } else if (strcmp(argv[i], "--color") == 0) {
            o->color = 1;
        } else if (strcmp(argv[i], "--no-color") == 0) {
            o->color = 0;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            return gs_cli_usage_error("show-sharding", SHOW_USAGE, "unknown option '%s'", argv[i]);
        } else if (o->text) {
            return gs_cli_usage_error("show-sharding", SHOW_USAGE, "more than one SHARDING ('%s')",
                                      argv[i]);
        } else {
            o->text = argv[i];
        }
    }
    if (!o->text) return gs_cli_usage_error("show-sharding", SHOW_USAGE, "missing SHARDING");
    if (!o->shape) return gs_cli_usage_error("show-sharding", SHOW_USAGE, "missing --shape SHAPE");
    if (o->ndev) {
        char *end;
        errno = 0;
        o->n_devices = strtoll(o->ndev, &end, 10);
        if (*end || !*o->ndev || o->n_devices < 1 || errno)
            return gs_cli_usage_error("show-sharding", SHOW_USAGE,
                                      "--devices wants a positive integer, not '%s'", o->ndev);
    }
    return GS_CLI_CONTINUE;
}

/* Parses --shape: one array, every dimension's size known. */
static gs_status parse_show_shape(gs_arena *a, gs_source *src, gs_shape **shape, gs_diags *d) {
    if (gs_parse_shape(a, src, GS_F32, shape, d) != GS_OK) return GS_ERR;
    if (!gs_shape_is_array(*shape)) {
        gs_error(d, gs_span_none(), "show-sharding draws one array, not %s",
                 gs_shape_is_tuple(*shape) ? "a tuple" : "a token");
        return GS_ERR;
    }
    for (int i = 0; i < (*shape)->rank; i++)
        if ((*shape)->dims[i] < 0) {
            gs_error(d, gs_span_none(), "show-sharding needs every dimension's size, but "
                     "dimension %d is unbounded ('?')", i);
            return GS_ERR;
        }
    return GS_OK;
}

/* Parses SHARDING: XLA sharding text, or a PartitionSpec over mesh (NULL: no --mesh). */
static gs_status parse_show_sharding(gs_arena *a, gs_source *src, const gs_mesh *mesh, int rank,
                                     gs_sharding **s, gs_diags *d) {
    gs_span sp = {src, 1, 1};
    const char *t = src->text;
    while (*t == ' ') t++;
    if (*t == '{') return gs_sharding_parse(a, src->text, src->len, s, d, sp);
    if (mesh) return gs_sharding_from_spec(a, mesh, src->text, src->len, rank, s, d, sp);
    gs_error(d, sp, "expected XLA sharding text '{...}', or a PartitionSpec with --mesh");
    return GS_ERR;
}

/* Whether s can be drawn over shape (text: its name) on n_devices devices; else an error. */
static bool show_fits(const show_args *o, const gs_sharding *s, const gs_shape *shape,
                      const char *text, int64_t n_devices, gs_diags *d) {
    if (s->kind == GS_SHARDING_TUPLE) {
        gs_error(d, gs_span_none(),
                 "show-sharding draws one array, but the sharding is a "
                 "tuple of %d",
                 s->n_tuple);
    } else if (s->kind == GS_SHARDING_TILED && n_devices && s->tiles.n != n_devices) {
        gs_error(d, gs_span_none(), "the sharding uses %lld devices but %s %lld",
                 (long long)s->tiles.n, o->ndev ? "--devices says" : "the mesh has",
                 (long long)n_devices);
    } else if (s->kind == GS_SHARDING_TILED && s->data_rank != shape->rank) {
        gs_error(d, gs_span_none(), "the sharding has %d data dims but the shape %s has rank %d",
                 s->data_rank, text, shape->rank);
    } else {
        return true;
    }
    return false;
}

/* --json: the layout per device. */
static int print_layout_json(const gs_sharding *s, const char *text, const gs_shape *shape,
                             int64_t n_devices) {
    char *js = gs_sharding_layout_json(s, text, shape->rank, shape->dims, n_devices);
    if (!js) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    printf("%s\n", js);
    free(js);
    return 0;
}

/* The grid of which device holds which block, coloured per --color / a terminal. */
static void print_grid(const show_args *o, const gs_sharding *s, const char *text,
                       const gs_shape *shape, int64_t n_devices) {
    gs_sb pic = {0};
    gs_sharding_print(&pic, s);
    gs_sb_printf(&pic, "  %s\n", text);
    bool use_color = o->color == 1 || (o->color == -1 && isatty(STDOUT_FILENO));
    gs_sharding_draw_text(&pic, s, shape->rank, shape->dims, n_devices, use_color);
    fputs(gs_sb_str(&pic), stdout);
    gs_sb_free(&pic);
}

/* --svg FILE: the picture as SVG. 0, or 1 after an error. */
static int write_svg(const char *path, const gs_sharding *s, const gs_shape *shape,
                     int64_t n_devices) {
    gs_sb pic = {0};
    int rc = 0;
    gs_sharding_draw_svg(&pic, s, shape->rank, shape->dims, n_devices);
    FILE *f = fopen(path, "w");
    if (!f || fputs(gs_sb_str(&pic), f) < 0) {
        fprintf(stderr, "error: cannot write '%s': %s\n", path, strerror(errno));
        rc = 1;
    }
    if (f && fclose(f) != 0 && rc == 0) {
        fprintf(stderr, "error: cannot write '%s': %s\n", path, strerror(errno));
        rc = 1;
    }
    gs_sb_free(&pic);
    return rc;
}

/* Parses what o names (errors into d) and prints it. 0, or 1 on bad input. */
static int show(const show_args *o, gs_arena *a, gs_source *shape_src, gs_source *src,
                gs_diags *d) {
    gs_shape *shape = NULL;
    gs_sharding *s = NULL;
    gs_mesh mesh;
    int64_t n_devices = o->n_devices;
    if (parse_show_shape(a, shape_src, &shape, d) != GS_OK) return 1;
    if (o->mesh) {
        if (gs_cli_parse_mesh(a, o->mesh, &mesh) != 0) return 1;
        if (!n_devices) n_devices = mesh.n_devices;
    }
    if (parse_show_sharding(a, src, o->mesh ? &mesh : NULL, shape->rank, &s, d) != GS_OK) return 1;
    gs_sb text = {0};
    gs_sb_printf(&text, "%s[", gs_type_name(shape->type));
    for (int i = 0; i < shape->rank; i++)
        gs_sb_printf(&text, "%s%lld", i ? "," : "", (long long)shape->dims[i]);
    gs_sb_putc(&text, ']');
    int rc = 1;
    if (show_fits(o, s, shape, gs_sb_str(&text), n_devices, d)) {
        rc = 0;
        if (o->json) rc = print_layout_json(s, gs_sb_str(&text), shape, n_devices);
        else print_grid(o, s, gs_sb_str(&text), shape, n_devices);
        if (rc == 0 && o->svg) rc = write_svg(o->svg, s, shape, n_devices);
    }
    gs_sb_free(&text);
    return rc;
}

int gs_cli_show_sharding(int argc, char **argv) {
    show_args o = {.color = -1};
    int rc = show_parse_args(argc, argv, &o);
    if (rc != GS_CLI_CONTINUE) return rc;
    gs_arena a;
    gs_arena_init(&a);
    gs_diags d = {0};
    gs_source *shape_src = gs_source_from_string("--shape", o.shape);
    gs_source *src = gs_source_from_string("SHARDING", o.text);
    if (!shape_src || !src) {
        fprintf(stderr, "error: out of memory\n");
        rc = 1;
    } else {
        rc = show(&o, &a, shape_src, src, &d);
    }
    render(&d);
    gs_diags_free(&d);
    gs_source_free(shape_src);
    gs_source_free(src);
    gs_arena_free(&a);
    return rc;
}

/* ------------------------------------------------------------------ --mesh / --shard */

int gs_cli_sharding_option(int argc, char **argv, int *i, gs_cli_shardings *o) {
    const char *a = argv[*i], *v;
    bool mesh = strncmp(a, "--mesh", 6) == 0 && (a[6] == 0 || a[6] == '=');
    bool shard = strncmp(a, "--shard", 7) == 0 && (a[7] == 0 || a[7] == '=');
    if (!mesh && !shard) return 0;
    if (!gs_cli_opt_value(argc, argv, i, mesh ? "--mesh" : "--shard", &v)) {
        fprintf(stderr, "gspmd: %s needs a value\n", mesh ? "--mesh" : "--shard");
        return -1;
    }
    if (mesh) {
        o->mesh = v;
        return 1;
    }
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1]) {
        fprintf(stderr, "gspmd: --shard wants NAME=SPEC, not '%s'\n", v);
        return -1;
    }
    const char **grown = realloc(o->shard, sizeof *grown * (size_t)(o->n + 1));
    if (!grown) {
        fprintf(stderr, "gspmd: out of memory\n");
        return -1;
    }
    o->shard = grown;
    o->shard[o->n++] = v;
    return 1;
}

int gs_cli_sharding_requests(const gs_cli_shardings *o, gs_arena *a, gs_mesh *mesh,
                             gs_compile_options *co) {
    if (o->mesh) {
        if (gs_cli_parse_mesh(a, o->mesh, mesh) != 0) return 1;
        co->mesh = mesh;
    }
    if (o->n == 0) return 0;
    gs_shard_request *reqs = GS_NEW_ARRAY(a, gs_shard_request, o->n);
    for (int i = 0; reqs && i < o->n; i++) {
        const char *eq = strchr(o->shard[i], '=');
        reqs[i].pattern = gs_arena_strndup(a, o->shard[i], (size_t)(eq - o->shard[i]));
        reqs[i].spec = eq + 1;
        if (!reqs[i].pattern) reqs = NULL;
    }
    if (!reqs) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    co->n_requests = o->n;
    co->requests = reqs;
    return 0;
}

void gs_cli_shardings_free(gs_cli_shardings *o) {
    free(o->shard);
    memset(o, 0, sizeof *o);
}
