/*
 * test_sharding_rules.c — per-op factor rules (Shardy's OpShardingRule) built from each
 * instruction's opcode and attributes, checked against the rules Shardy's registry builds for the
 * same ops (same factors, same order, so the same letters; size-1 factors for dims nothing
 * reaches; blocked factors; the conservative options), whether Shardy registers a rule at all,
 * the printer's text, and a walk of the op table naming which families have a rule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gspmd/sharding.h"
#include "gspmd/text.h"

static const char *MODULE =
    "HloModule rules\n\n"
    "add_f32 {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(x, y)\n"
    "}\n\n"
    "lt {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT c = pred[] compare(a, b), direction=LT\n"
    "}\n\n"
    "ENTRY e {\n"
    "  p0 = f32[4,8] parameter(0)\n"
    "  p1 = f32[4,8] parameter(1)\n"
    "  w = f32[8,16] parameter(2)\n"
    "  v = f32[8] parameter(3)\n"
    "  img = f32[2,10,10,3] parameter(4)\n"
    "  ker = f32[3,3,3,5] parameter(5)\n"
    "  bl = f32[6,4,8] parameter(6)\n"
    "  br = f32[6,8,5] parameter(7)\n"
    "  idx = s32[5,1] parameter(8)\n"
    "  pr = pred[] parameter(9)\n"
    "  q = f32[2,3] parameter(10)\n"
    "  zero = f32[] constant(0)\n"
    "  add = f32[4,8] add(p0, p1)\n"
    "  sel = f32[4,8] select(pr, p0, p1)\n"
    "  bc = f32[3,8,4] broadcast(v), dimensions={1}\n"
    "  tr = f32[8,4] transpose(p0), dimensions={1,0}\n"
    "  rs = f32[32] reshape(p0)\n"
    "  rs2 = f32[2,2,8] reshape(p0)\n"
    "  rs3 = f32[8,4] reshape(p0)\n"
    "  rs4 = f32[3,2] reshape(q)\n"
    "  dot = f32[4,16] dot(p0, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  bdot = f32[6,4,5] dot(bl, br), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
    "rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
    "  red = f32[4] reduce(p0, zero), dimensions={1}, to_apply=add_f32\n"
    "  conv = f32[2,10,10,5] convolution(img, ker), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=b01f_01io->b01f\n"
    "  sl = f32[4,4] slice(p0), slice={[0:4], [2:6]}\n"
    "  pd = f32[6,8] pad(p0, zero), padding=1_1x0_0\n"
    "  cc = f32[8,8] concatenate(p0, p1), dimensions={0}\n"
    "  so = f32[4,8] sort(p0), dimensions={1}, to_apply=lt\n"
    "  ga = f32[5,8] gather(p0, idx), offset_dims={1}, collapsed_slice_dims={0}, "
    "start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}\n"
    "  io = s32[4,8] iota(), iota_dimension=1\n"
    "  tu = (f32[4,8], f32[8]) tuple(add, v)\n"
    "  ROOT gte = f32[4,8] get-tuple-element(tu), index=0\n"
    "}\n";

/* Ops of every other family with a Shardy rule, shaped as the cases of Shardy's
 * op_sharding_rule_registry tests. */
static const char *MODULE2 =
    "HloModule rules2\n"
    "\n"
    "add_f32 {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(x, y)\n"
    "}\n"
    "\n"
    "gt {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT c = pred[] compare(a, b), direction=GT\n"
    "}\n"
    "\n"
    "lt {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT c = pred[] compare(a, b), direction=LT\n"
    "}\n"
    "\n"
    "ENTRY e {\n"
    "  a = s64[2,2] parameter(0)\n"
    "  b = s64[2,2] parameter(1)\n"
    "  ag = (s64[2,4], s64[2,4]) all-gather(a, b), replica_groups={{0,1}}, dimensions={1}\n"
    "  rsin = f32[2,64,1,13] parameter(2)\n"
    "  rsc = f32[2,32,1,13] reduce-scatter(rsin), replica_groups={{0,1}}, dimensions={1}, "
    "to_apply=add_f32\n"
    "  a2a = f32[2,64,1,13] all-to-all(rsin), replica_groups={{0,1}}, dimensions={1}\n"
    "  bnx = f32[4,8,16,32] parameter(3)\n"
    "  bnv = f32[16] parameter(4)\n"
    "  bni = f32[4,8,16,32] batch-norm-inference(bnx, bnv, bnv, bnv, bnv), epsilon=0.001, "
    "feature_index=2\n"
    "  u32 = u32[4,2,2] parameter(5)\n"
    "  bcv = u64[4,2] bitcast-convert(u32)\n"
    "  chin = f32[2,4,8,8] parameter(6)\n"
    "  ch = f32[2,4,8,8] cholesky(chin), lower=true\n"
    "  t1 = f32[4,40,256] parameter(7)\n"
    "  t2 = f32[4,60,256] parameter(8)\n"
    "  s1 = f32[4,32,256] slice(t1), slice={[0:4], [0:32], [0:256]}\n"
    "  s2 = f32[4,24,256] slice(t1), slice={[0:4], [0:24], [0:256]}\n"
    "  s3 = f32[4,24,256] slice(t2), slice={[0:4], [0:24], [0:256]}\n"
    "  csame = f32[4,96,256] concatenate(s1, t1, s2), dimensions={1}\n"
    "  cdiff = f32[4,96,256] concatenate(s1, t1, s3), dimensions={1}\n"
    "  cself = f32[4,120,256] concatenate(t1, t1, t1), dimensions={1}\n"
    "  img = f32[8,224,224,192] parameter(9)\n"
    "  ker = f32[3,3,192,256] parameter(10)\n"
    "  cbg = f32[2,112,112,256] convolution(img, ker), window={size=3x3 stride=2x2 pad=0_1x0_1}, "
    "dim_labels=b01f_01io->b01f, batch_group_count=4\n"
    "  qin = f32[8,5,3] parameter(11)\n"
    "  qr = (f32[8,5,3], f32[8,3]) custom-call(qin), custom_call_target=\"Qr\"\n"
    "  tin = f32[16,8] parameter(12)\n"
    "  tk = (f32[16,2], s32[16,2]) custom-call(tin), custom_call_target=\"mhlo.topk\"\n"
    "  zf = f32[] constant(0)\n"
    "  zi = s32[] constant(0)\n"
    "  pr = (f32[16,2], f32[16,2]) custom-call(tin, tin, zf, zi), "
    "custom_call_target=\"PartialReduce\"\n"
    "  unk = f32[16,8] custom-call(tin), custom_call_target=\"my_unknown_target\"\n"
    "  lo = u32[2] parameter(13)\n"
    "  x64 = u64[2] custom-call(lo, lo), custom_call_target=\"X64Combine\"\n"
    "  rng = (u64[2], u32[4,1000]) rng-bit-generator(x64), algorithm=DEFAULT\n"
    "  vec = f32[32] parameter(14)\n"
    "  mat = f32[32,16] parameter(15)\n"
    "  vdot = f32[16] dot(vec, mat), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
    "  dusop = f32[32,4,8] parameter(16)\n"
    "  dusup = f32[32,1,2] parameter(17)\n"
    "  idx = s32[] parameter(18)\n"
    "  dusc = f32[32,4,8] dynamic-update-slice(dusop, dusup, zi, zi, zi)\n"
    "  dusd = f32[32,4,8] dynamic-update-slice(dusop, dusup, zi, idx, zi)\n"
    "  ds = f32[32,1,2] dynamic-slice(dusop, zi, idx, zi), dynamic_slice_sizes={32,1,2}\n"
    "  fin = c64[8,32,64] parameter(19)\n"
    "  fft = c64[8,32,64] fft(fin), fft_type=FFT, fft_length={32,64}\n"
    "  rfin = f32[8,32,64] parameter(20)\n"
    "  rfft = c64[8,32,33] fft(rfin), fft_type=RFFT, fft_length={32,64}\n"
    "  red = f32[2,1,13] reduce(rsin, zf), dimensions={1}, to_apply=add_f32\n"
    "  rw = f32[16,48,3] reduce-window(rwin, zf), window={size=3x1x1 stride=3x1x1 "
    "pad=0_0x2_-2x0_0}, to_apply=add_f32\n"
    "  rwin = f32[48,48,3] parameter(21)\n"
    "  sop = f32[3,4,2] parameter(22)\n"
    "  sidx = s64[2,3,2] parameter(23)\n"
    "  supd = f32[2,3,2,2] parameter(24)\n"
    "  sc = f32[3,4,2] scatter(sop, sidx, supd), update_window_dims={2,3}, "
    "inserted_window_dims={0}, scatter_dims_to_operand_dims={1,0}, index_vector_dim=2, "
    "to_apply=add_f32\n"
    "  sasop = f32[10,24,24,64] parameter(25)\n"
    "  sassrc = f32[9,12,12,64] parameter(26)\n"
    "  sas = f32[10,24,24,64] select-and-scatter(sasop, sassrc, zf), window={size=1x2x2x1 "
    "stride=1x2x2x1 pad=-1_0x0_0x0_0x0_0}, select=gt, scatter=add_f32\n"
    "  so = f32[4,8] parameter(27)\n"
    "  sort = f32[4,8] sort(so), dimensions={1}, to_apply=lt\n"
    "  srow = f32[1,8] parameter(28)\n"
    "  sort1 = f32[1,8] sort(srow), dimensions={1}, to_apply=lt\n"
    "  ta = f32[8,3,3] parameter(29)\n"
    "  tb = f32[8,3,5] parameter(30)\n"
    "  tsl = f32[8,3,5] triangular-solve(ta, tb), left_side=true, lower=true, unit_diagonal=false, "
    "transpose_a=TRANSPOSE\n"
    "  tbr = f32[8,5,3] parameter(31)\n"
    "  tsr = f32[8,5,3] triangular-solve(ta, tbr), left_side=false, lower=true, "
    "unit_diagonal=false, transpose_a=NO_TRANSPOSE\n"
    "  z0 = f32[2,0,4] parameter(32)\n"
    "  zadd = f32[2,0,4] add(z0, z0)\n"
    "  r0 = f32[0,8] reshape(z0)\n"
    "  rsm = f32[3,4,4] reshape(rs238)\n"
    "  rs238 = f32[2,3,8] parameter(33)\n"
    "  pin = f32[28,28,16] parameter(34)\n"
    "  pad = f32[30,26,16] pad(pin, zf), padding=1_1x-1_-1x0_0\n"
    "  ROOT out = f32[4,8] copy(so)\n"
    "}\n";

/* The printed rule of instruction name, built with opts (NULL: the defaults). */
static char *rule_of(gs_module *m, const char *name, const gs_op_rule_options *opts,
                     gs_op_rule **out) {
    gs_instr *in = gs_module_find_instr(m, name);
    assert_non_null(in);
    gs_op_rule *r;
    assert_int_equal(gs_op_rule_build_opts(&m->arena, in, opts, &r), GS_OK);
    if (out) *out = r;
    gs_sb sb = {0};
    gs_op_rule_print(&sb, r);
    return gs_sb_take(&sb);
}

/* Instruction name has a registered (Shardy) rule printing as want. */
static void expect_rule_opts(gs_module *m, const char *name, const gs_op_rule_options *opts,
                             const char *want) {
    gs_op_rule *r;
    char *got = rule_of(m, name, opts, &r);
    if (strcmp(got, want) != 0) fprintf(stderr, "%s:\n  got  %s\n  want %s\n", name, got, want);
    assert_string_equal(got, want);
    assert_false(r->is_default);
    assert_true(r->registered);
    free(got);
}

static void expect_rule(gs_module *m, const char *name, const char *want) {
    expect_rule_opts(m, name, NULL, want);
}

/* Instruction name has a rule Shardy does not register, printing as want. */
static void expect_unregistered(gs_module *m, const char *name, bool is_default, const char *want) {
    gs_op_rule *r;
    char *got = rule_of(m, name, NULL, &r);
    if (strcmp(got, want) != 0) fprintf(stderr, "%s:\n  got  %s\n  want %s\n", name, got, want);
    assert_string_equal(got, want);
    assert_false(r->registered);
    assert_int_equal(r->is_default, is_default);
    free(got);
}

static gs_module *parse(const char *name, const char *text, gs_source **src) {
    *src = gs_source_from_string(name, text);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(*src, &d);
    if (!m) gs_diags_render(&d, stderr);
    assert_non_null(m);
    gs_diags_free(&d);
    return m;
}

/* The families of the first module: elementwise, broadcast, transpose, reshape, dot, reduce,
 * convolution, slice / pad / concatenate, sort and gather. */
static void test_rules(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse("rules.hlo", MODULE, &src);
    expect_rule(m, "add", "([i, j], [i, j])->([i, j]) {i=4, j=8}");
    /* A scalar predicate takes no factor. */
    expect_rule(m, "sel", "([], [i, j], [i, j])->([i, j]) {i=4, j=8}");
    expect_rule(m, "bc", "([j])->([i, j, k]) {i=3, j=8, k=4}");
    expect_rule(m, "tr", "([j, i])->([i, j]) {i=8, j=4}");
    /* Shardy's reshape factorisation: common gcd factors while the products agree; once they
     * diverge ([2,3] -> [3,2]) each side takes factors of its own, all pass-through. */
    expect_rule(m, "rs", "([i, j])->([ij]) {i=4, j=8}");
    expect_rule(m, "rs2", "([ij, k])->([i, j, k]) {i=2, j=2, k=8}");
    expect_rule(m, "rs3", "([i, jk])->([ij, k]) {i=4, j=2, k=4}");
    expect_rule(m, "rs4", "([i, k])->([j, l]) {i=2, j=3, k=3, l=2}");
    expect_rule(m, "dot", "([i, k], [k, j])->([i, j]) {i=4, j=16, k=8} reduction={k}");
    expect_rule(m, "bdot",
                "([i, j, l], [i, l, k])->([i, j, k]) {i=6, j=4, k=5, l=8} "
                "reduction={l}");
    expect_rule(m, "red", "([i, j], [])->([i]) {i=4, j=8} reduction={j}");
    /* Spatial dims: the number of windows (10) is a permutation factor and takes the whole
     * input dim, so no window-size factor is left; the kernel's spatial dims get size-1
     * factors when the rule is built. */
    expect_rule(m, "conv",
                "([i, j, k, l], [n, o, l, m])->([i, j, k, m]) {i=2, j=10, k=10, l=3, m=5, n=1, "
                "o=1} reduction={l} permutation={j, k}");
    /* A sliced or padded dim is one permutation factor of the operand's size. */
    expect_rule(m, "sl", "([i, j])->([i, j]) {i=4, j=8} permutation={j}");
    expect_rule(m, "pd", "([i, j], [])->([i, j]) {i=4, j=8} permutation={i}");
    /* Concatenating tensors that are not slices: the dim needs replication. */
    expect_rule(m, "cc", "([i, j], [i, j])->([i, j]) {i=8, j=8} need_replication={i}");
    expect_rule(m, "so", "([i, j])->([i, j]) {i=4, j=8} need_replication={j}");
    /* Gather: batch dims, offset dims, then the collapsed dim (a reduction: the result is
     * all-reduced when it is sharded) and the index vector dim. */
    expect_rule(m, "ga",
                "([k, j], [i, l])->([i, j]) {i=5, j=8, k=4, l=1} reduction={k} "
                "need_replication={l}");
    expect_unregistered(m, "io", false, "()->([i, j]) {i=4, j=8}");
    expect_unregistered(m, "tu", true,
                        "([i, j], [k])->([l, m], [n]) {i=4, j=8, k=8, l=4, m=8, n=8} "
                        "need_replication={i, j, k, l, m, n}");
    expect_unregistered(m, "gte", true, "([])->([i, j]) {i=4, j=8} need_replication={i, j}");
    gs_module_free(m);
    gs_source_free(src);
}

/* The other families, each shaped as a case of Shardy's own tests. */
static void test_rules_shardy_cases(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse("rules2.hlo", MODULE2, &src);
    /* Collectives: the collective dim is a need-replication factor in the operands and another
     * in the results; size-1 dims have size-1 factors. */
    expect_rule(m, "ag",
                "([i, j], [i, j])->([i, k], [i, k]) {i=2, j=2, k=4} need_replication={j, k}");
    expect_rule(m, "rsc",
                "([i, l, j, k])->([i, m, j, k]) {i=2, j=1, k=13, l=64, m=32} "
                "need_replication={l, m}");
    expect_rule(m, "a2a",
                "([i, l, j, k])->([i, m, j, k]) {i=2, j=1, k=13, l=64, m=64} "
                "need_replication={l, m}");
    expect_rule(m, "bni",
                "([i, j, k, l], [k], [k], [k], [k])->([i, j, k, l]) {i=4, j=8, k=16, l=32}");
    expect_rule(m, "bcv", "([i, j, k])->([i, j]) {i=4, j=2, k=2} need_replication={k}");
    expect_rule(m, "ch",
                "([i, j, k, l])->([i, j, k, l]) {i=2, j=4, k=8, l=8} need_replication={k, l}");
    /* Concatenate: slices of one tensor (and the tensor itself) permute; slices of different
     * tensors, or the same tensor unsliced, need replication. */
    expect_rule(m, "csame",
                "([i, j, k], [i, j, k], [i, j, k])->([i, j, k]) {i=4, j=96, k=256} "
                "permutation={j}");
    expect_rule(m, "cdiff",
                "([i, j, k], [i, j, k], [i, j, k])->([i, j, k]) {i=4, j=96, k=256} "
                "need_replication={j}");
    expect_rule(m, "cself",
                "([i, j, k], [i, j, k], [i, j, k])->([i, j, k]) {i=4, j=120, k=256} "
                "need_replication={j}");
    /* Batch groups: the group count is a factor of the input batch, kernel output feature and
     * output feature dims, before the per-group batch; the input spatial dims split into the
     * number of windows and the window size. */
    expect_rule(m, "cbg",
                "([ij, kl, mn, o], [l, n, o, ip])->([j, k, m, ip]) {i=4, j=2, k=112, l=2, "
                "m=112, n=2, o=192, p=64} reduction={l, n, o} permutation={k, m}");
    expect_rule(m, "qr",
                "([i, j, k])->([i, j, k], [i, l]) {i=8, j=5, k=3, l=3} need_replication={j, k, l}");
    expect_rule(m, "tk",
                "([i, j])->([i, j], [i, j]) {i=16, j=8} need_replication={j} "
                "blocked_propagation={j}");
    expect_rule(m, "pr",
                "([i, j], [i, j], [], [])->([i, k], [i, k]) {i=16, j=8, k=2} "
                "need_replication={k} blocked_propagation={k}");
    /* X64Combine feeding a rng-bit-generator stays whole; so does the generator's state. */
    expect_rule(m, "x64", "([i], [i])->([i]) {i=2} need_replication={i} blocked_propagation={i}");
    expect_rule(m, "rng",
                "([i])->([i], [j, k]) {i=2, j=4, k=1000} need_replication={i} "
                "blocked_propagation={i}");
    expect_rule(m, "vdot", "([j], [j, i])->([i]) {i=16, j=32} reduction={j}");
    /* Dynamic-update-slice: the update's own factors need replication unless every start index
     * is a constant. */
    expect_rule(m, "dusc",
                "([i, j, l], [i, k, m], [], [], [])->([i, j, l]) {i=32, j=4, k=1, l=8, m=2}");
    expect_rule(m, "dusd",
                "([i, j, l], [i, k, m], [], [], [])->([i, j, l]) {i=32, j=4, k=1, l=8, m=2} "
                "need_replication={k, m}");
    expect_rule(m, "ds",
                "([i, j, k], [], [], [])->([i, j, k]) {i=32, j=4, k=8} need_replication={j, k} "
                "blocked_propagation={j, k}");
    expect_rule(m, "fft", "([i, j, k])->([i, j, k]) {i=8, j=32, k=64} need_replication={j, k}");
    expect_rule(m, "rfft",
                "([i, j, k])->([i, j, k]) {i=8, j=32, k=64} need_replication={j, k} "
                "blocked_propagation={k}");
    expect_rule(m, "red", "([i, j, k, l], [])->([i, k, l]) {i=2, j=64, k=1, l=13} reduction={j}");
    expect_rule(m, "rw", "([i, j, k], [])->([i, j, k]) {i=16, j=48, k=3} permutation={i, j}");
    expect_rule(m, "sc",
                "([n, k, m], [i, j, o], [i, j, l, m])->([n, k, m]) {i=2, j=3, k=4, l=2, m=2, "
                "n=3, o=2} reduction={i, j} need_replication={k, l, o}");
    expect_rule(m, "sas",
                "([j, l, n, o], [i, k, m, o], [])->([j, l, n, o]) {i=9, j=10, k=12, l=24, m=12, "
                "n=24, o=64} need_replication={i, k, m} permutation={j, l, n}");
    expect_rule(m, "sort", "([i, j])->([i, j]) {i=4, j=8} need_replication={j}");
    /* Every other dim has size 1: the sort dim also blocks propagation. */
    expect_rule(m, "sort1",
                "([i, j])->([i, j]) {i=1, j=8} need_replication={j} blocked_propagation={j}");
    expect_rule(m, "tsl",
                "([i, l, j], [i, j, k])->([i, l, k]) {i=8, j=3, k=5, l=3} "
                "need_replication={j, k, l}");
    expect_rule(m, "tsr",
                "([i, l, k], [i, j, k])->([i, j, l]) {i=8, j=5, k=3, l=3} "
                "need_replication={j, k, l}");
    expect_rule(m, "zadd", "([i, j, k], [i, j, k])->([i, j, k]) {i=2, j=0, k=4}");
    expect_rule(m, "rsm", "([i, k, mn])->([j, lm, n]) {i=2, j=3, k=3, l=2, m=2, n=4}");
    expect_rule(m, "pad", "([i, j, k], [])->([i, j, k]) {i=28, j=28, k=16} permutation={i, j}");
    /* Ops Shardy's registry leaves without a rule. */
    expect_unregistered(m, "unk", true,
                        "([i, j])->([k, l]) {i=16, j=8, k=16, l=8} "
                        "need_replication={i, j, k, l}");
    expect_unregistered(m, "r0", true,
                        "([i, j, k])->([l, m]) {i=2, j=0, k=4, l=0, m=8} "
                        "need_replication={i, j, k, l, m}");
    expect_unregistered(m, "zf", false, "()->([])");
    expect_unregistered(m, "out", false, "([i, j])->([i, j]) {i=4, j=8}");
    gs_module_free(m);
    gs_source_free(src);
}

/* conservative-propagation=true: no concatenate or convolution spatial factors; pad, slice,
 * reduce-window and select-and-scatter block their permutation dims. */
static void test_rules_conservative(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse("rules2.hlo", MODULE2, &src);
    const gs_op_rule_options cons = {.conservative = true};
    expect_rule_opts(m, "csame", &cons,
                     "([i, k, j], [i, l, j], [i, m, j])->([i, n, j]) {i=4, j=256, k=1, l=1, m=1, "
                     "n=1}");
    expect_rule_opts(m, "cbg", &cons,
                     "([ij, m, n, k], [o, p, k, il])->([j, q, r, il]) {i=4, j=2, k=192, l=64, "
                     "m=1, n=1, o=1, p=1, q=1, r=1} reduction={k}");
    expect_rule_opts(m, "pad", &cons,
                     "([i, j, k], [])->([i, j, k]) {i=28, j=28, k=16} permutation={i, j} "
                     "blocked_propagation={i, j}");
    expect_rule_opts(m, "s1", &cons,
                     "([i, j, k])->([i, j, k]) {i=4, j=40, k=256} permutation={j} "
                     "blocked_propagation={j}");
    expect_rule_opts(m, "rw", &cons,
                     "([i, j, k], [])->([i, j, k]) {i=16, j=48, k=3} permutation={i, j} "
                     "blocked_propagation={i, j}");
    expect_rule_opts(m, "sas", &cons,
                     "([j, l, n, o], [i, k, m, o], [])->([j, l, n, o]) {i=9, j=10, k=12, l=24, "
                     "m=12, n=24, o=64} need_replication={i, k, m} permutation={j, l, n} "
                     "blocked_propagation={i, j, k, l, m, n}");
    /* Options that do not apply change nothing. */
    expect_rule_opts(m, "fft", &cons,
                     "([i, j, k])->([i, j, k]) {i=8, j=32, k=64} need_replication={j, k}");
    gs_module_free(m);
    gs_source_free(src);
}

/* The printer: factor symbols past z (z_1, z_2), the kind lists in Shardy's order, blocked
 * factors, `, custom`, and no `{...}` without factors. */
static void test_rule_print(void **state) {
    (void)state;
    gs_factor f[20];
    for (int k = 0; k < 20; k++) f[k] = (gs_factor){GS_FACTOR_PASS_THROUGH, 2, false};
    f[0].kind = GS_FACTOR_REDUCTION;
    f[18] = (gs_factor){GS_FACTOR_NEED_REPLICATION, 3, true};
    f[19] = (gs_factor){GS_FACTOR_PERMUTATION, 5, false};
    int major[18], minor[2] = {18, 19}, last[1] = {19};
    for (int k = 0; k < 18; k++) major[k] = k;
    gs_dim_factors od[2] = {{18, major}, {2, minor}}, rd[1] = {{1, last}};
    gs_tensor_factors ot = {2, od}, rt = {1, rd};
    gs_op_rule r = {.n_factors = 20,
                    .factors = f,
                    .n_operands = 1,
                    .operands = &ot,
                    .n_results = 1,
                    .results = &rt,
                    .custom = true};
    gs_sb sb = {0};
    gs_op_rule_print(&sb, &r);
    char *got = gs_sb_take(&sb);
    assert_string_equal(got, "([ijklmnopqrstuvwxyz, z_1z_2])->([z_2]) {i=2, j=2, k=2, l=2, m=2, "
                             "n=2, o=2, p=2, q=2, r=2, s=2, t=2, u=2, v=2, w=2, x=2, y=2, z=2, "
                             "z_1=3, z_2=5} reduction={i} need_replication={z_1} "
                             "permutation={z_2} blocked_propagation={z_1}, custom");
    free(got);
    gs_tensor_factors scalar = {0, NULL};
    gs_tensor_factors two[2] = {scalar, scalar};
    gs_op_rule e = {.n_operands = 2, .operands = two, .n_results = 1, .results = &scalar};
    gs_op_rule_print(&sb, &e);
    got = gs_sb_take(&sb);
    assert_string_equal(got, "([], [])->([])");
    free(got);
}

/* Parses text as a rule of instruction name (NULL: no instruction); returns the status and, on
 * success, the printed rule in *printed (malloc'd) or the first error in *printed. */
static gs_status parse_rule(gs_module *m, const char *name, const char *text, char **printed) {
    gs_instr *in = name ? gs_module_find_instr(m, name) : NULL;
    gs_op_rule *r = NULL;
    gs_diags d = {0};
    size_t used = 0;
    gs_status st =
        gs_op_rule_parse(&m->arena, text, strlen(text), in, &r, &used, &d, gs_span_none());
    gs_sb sb = {0};
    if (st == GS_OK) {
        assert_int_equal(used, strlen(text));
        assert_true(r->registered);
        gs_op_rule_print(&sb, r);
    } else {
        assert_true(d.n > 0);
        gs_sb_puts(&sb, d.items[0].message);
    }
    *printed = gs_sb_take(&sb);
    gs_diags_free(&d);
    return st;
}

/* gs_op_rule_parse reads back what gs_op_rule_print writes, for every rule of the second
 * module, and a rule written on an op with `, custom`; bad text and rules that do not fit the
 * op are located errors. */
static void test_rule_parse(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse("rules2.hlo", MODULE2, &src);
    int n = 0;
    for (int k = 0; k < m->entry->n_instrs; k++) {
        const gs_instr *in = m->entry->instrs[k];
        gs_op_rule *r;
        assert_int_equal(gs_op_rule_build(&m->arena, in, &r), GS_OK);
        if (!r->registered) continue;
        gs_sb sb = {0};
        gs_sb_puts(&sb, "#sdy.op_sharding_rule<");
        gs_op_rule_print(&sb, r);
        gs_sb_puts(&sb, ">");
        char *text = gs_sb_take(&sb), *back;
        gs_sb_puts(&sb, text + strlen("#sdy.op_sharding_rule<"));
        char *want = gs_sb_take(&sb);
        want[strlen(want) - 1] = 0;
        gs_status st = parse_rule(m, in->name, text, &back);
        if (st != GS_OK || strcmp(back, want) != 0)
            fprintf(stderr, "%s: %s\n  read back: %s\n", in->name, text, back);
        assert_int_equal(st, GS_OK);
        assert_string_equal(back, want);
        free(text);
        free(want);
        free(back);
        n++;
    }
    assert_true(n > 30);
    char *got;
    assert_int_equal(parse_rule(m, "unk",
                                "<([i, j])->([i, j]) {i=16, j=8} blocked_propagation={j}"
                                ", custom>",
                                &got),
                     GS_OK);
    assert_string_equal(got, "([i, j])->([i, j]) {i=16, j=8} blocked_propagation={j}, custom");
    free(got);
    /* Symbols past z and a dim of several factors, with no instruction to check against. */
    assert_int_equal(parse_rule(m, NULL,
                                "<([ijklmnopqrstuvwxyz, z_1])->([z_1z_2]) {i=1, j=1, k=1, l=1, "
                                "m=1, n=1, o=1, p=1, q=1, r=1, s=1, t=1, u=1, v=1, w=1, x=1, "
                                "y=1, z=1, z_1=2, z_2=3} need_replication={z_2}>",
                                &got),
                     GS_OK);
    assert_string_equal(got, "([ijklmnopqrstuvwxyz, z_1])->([z_1z_2]) {i=1, j=1, k=1, l=1, m=1, "
                             "n=1, o=1, p=1, q=1, r=1, s=1, t=1, u=1, v=1, w=1, x=1, y=1, z=1, "
                             "z_1=2, z_2=3} need_replication={z_2}");
    free(got);
    static const struct {
        const char *instr, *text, *error;
    } bad[] = {
        {NULL, "<([i])->([i])>", "the rule uses a factor it gives no size"},
        {NULL, "<([i])->([i]) {j=2}>", "expected factor i here"},
        {NULL, "<([i, ])->([i]) {i=2}>", "expected factor symbols (i, j, ...)"},
        {NULL, "<([i])->([i]) {i=2} reduction={j}>", "expected a factor of the rule"},
        {NULL, "<([i])->([i]) {i=2}, special>", "expected 'custom'"},
        {NULL, "<([i])=>([i]) {i=2}>", "expected '-' before '>' in '->', found '='"},
        {"unk", "<([i])->([i, j]) {i=16, j=8}>", "operand 0 has rank 2 but the rule maps 1 dims"},
        {"unk", "<([i, j], [k])->([i, j]) {i=16, j=8, k=2}>",
         "the rule maps 2 operand tensors but the op has 1"},
        {"unk", "<([i, j])->([i, i]) {i=16, j=8}>", "result 0 maps a factor twice"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(parse_rule(m, bad[k].instr, bad[k].text, &got), GS_ERR);
        if (strcmp(got, bad[k].error) != 0) fprintf(stderr, "%s: %s\n", bad[k].text, got);
        assert_string_equal(got, bad[k].error);
        free(got);
    }
    gs_module_free(m);
    gs_source_free(src);
}

/* Walks the op table: each family either has a rule or takes the default; the families every
 * pass leans on must have one. */
static void test_op_table_walk(void **state) {
    (void)state;
    static const gs_op_family must[] = {
        GS_FAM_UNARY,       GS_FAM_BINARY,        GS_FAM_TERNARY,       GS_FAM_COMPARE,
        GS_FAM_CONVERT,     GS_FAM_BROADCAST,     GS_FAM_RESHAPE,       GS_FAM_TRANSPOSE,
        GS_FAM_REVERSE,     GS_FAM_SLICE,         GS_FAM_DYNAMIC_SLICE, GS_FAM_DYNAMIC_UPDATE_SLICE,
        GS_FAM_CONCATENATE, GS_FAM_PAD,           GS_FAM_DOT,           GS_FAM_CONVOLUTION,
        GS_FAM_REDUCE,      GS_FAM_REDUCE_WINDOW, GS_FAM_SORT,          GS_FAM_GATHER,
        GS_FAM_PARAMETER,   GS_FAM_CONSTANT,      GS_FAM_IOTA,
    };
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
        if (!gs_op_family_has_rule(must[i]))
            fprintf(stderr, "family %s has no rule\n", gs_op_family_name(must[i]));
        assert_true(gs_op_family_has_rule(must[i]));
    }
    int with = 0, without = 0;
    for (int op = 0; op < GS_N_OPCODES; op++) {
        if (gs_op_family_has_rule(gs_op_info_of((gs_opcode)op)->family))
            with++;
        else
            without++;
    }
    fprintf(stderr, "op table: %d opcodes with a family rule, %d on the default rule\n", with,
            without);
    assert_true(with > without);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_rules_shardy_cases),
        cmocka_unit_test(test_rules_conservative),
        cmocka_unit_test(test_rule_print),
        cmocka_unit_test(test_rule_parse),
        cmocka_unit_test(test_op_table_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
