#!/usr/bin/env python3
"""Generates the GSPMD paper's benchmark models as sharded XLA HLO text for gspmd.

The model families of Xu et al. 2021 (GSPMD, arXiv 2105.04663, Section 5), parameterised by
size and mesh, written the way JAX emits a scanned model: the layers run in a `while` over
weight stacks f32[L,...] that the body `dynamic-slice`s by the loop counter (as in
examples/transformer_scan.hlo). Weights are entry parameters, never constants, so even a
1T-parameter module is a few hundred lines and partitions in moments.

Usage:
  tools/gen.py transformer --layers L --batch B --seq S --model D --ffn F --heads H \\
      --mesh data=X,model=Y [--sharding megatron|2d] [--dtype f32|bf16] \\
      [--train [--remat | --no-remat]] [-o FILE]
  tools/gen.py moe --layers L --batch B --seq S --model D --ffn F --experts E \\
      [--capacity C] [--top 1|2] [--heads H] --mesh data=X,expert=Y \\
      [--dtype f32|bf16] [--train [--remat | --no-remat]] [-o FILE]
  tools/gen.py pipeline --stages S --microbatches M --layers-per-stage L --microbatch-size B \\
      --seq T --model D --ffn F --mesh stage=S[,data=X] [--dtype f32|bf16] [--train] \\
      [--shift pad|concat|pad-slice|rotate] [--feed select|dus|concat] \\
      [--collect reduce|slice|dslice] [-o FILE]
  tools/gen.py unet3d --levels K --channels C --depth D --height H --width W [--batch B] \\
      [--in-channels I] [--classes N] --mesh d=X,h=Y[,w=Z][,data=M] [--down conv|pool] \\
      [--up transpose|resize] [--dtype f32|bf16] [--train] [-o FILE]
  tools/gen.py --list-presets
  tools/gen.py preset NAME [--dtype f32|bf16] [--train | --no-train] [--sharding megatron|2d]
      [--remat | --no-remat] [-o FILE]

The module goes to stdout (or FILE); a one-line summary goes to stderr: the parameter count,
the model FLOPs per step (2 x params x tokens forward, 6 x with --train; for MoE the params
one token uses), the exact dot FLOPs emitted (executed per step: loop bodies x trip count; and
as written: each computation once, the way ../shared/tools/flops.py counts them), and the
device count. Partition or run the output with N = the product of the mesh axes:
  build/gspmd partition FILE --num-partitions N --propagate
  build/gspmd run FILE --num-partitions N --verify          (tiny sizes only)

transformer: each layer is a layer-norm-free attention block (Q, K, V projections by `dot`,
scores Q K^T per head scaled by 1/sqrt(head dim), softmax by max/exp/reduce/divide, context =
scores V, output projection, residual add) and an MLP block (dot, relu by `maximum`, dot,
residual add). --sharding megatron (the default): activations [batch, seq, model] split over
`data` along the batch; the heads of Wq/Wk/Wv/Wo and the hidden dim of W1/W2 split over `model`
(replicated over `data`). The shardings are written on the entry parameters only; gspmd's
propagation gives every other instruction one. --sharding 2d: the paper's finalized 2D sharding
of its dense models (Section 5.1, Figure 7): every weight split over both mesh axes, its model
dim M over `data` and its heads or hidden dim over `model` (Wq/Wk/Wv [M,H,Dh]: M over data, H
over model; Wo [H,Dh,M]: H over model, M over data; W1 [M,F]: M over data, F over model; W2
[F,M]: F over model, M over data), so each layer all-gathers its weights along `data` inside
the loop body (as FSDP / ZeRO-3 do) and its weight gradients are reduce-scattered back; the
activations [batch, seq, model] between and within layers split over both axes (batch over
data, M over model; q/k/v, scores, context and the MLP's hidden layer: batch over data, heads
or hidden dim over model), all-gathered along `model` before a dot that contracts M and
reduce-scattered after the dots that produce M. Besides the entry parameters, the loop bodies
carry the annotations the paper's model code writes: the per-layer weight slices (stored and
all-gathered, the latter as a `Sharding` custom-call, jax.lax.with_sharding_constraint), the
activations of each dot, and the gathered layer inputs (`Sharding` custom-calls); no
all-reduce is left in the loops.

moe: GShard's MoE Transformer layer: an optional attention block (--heads; weights replicated,
pure data parallelism) and a mixture-of-experts FFN: gating logits = tokens x Wg [M,E],
softmax, top-1 or top-2 routing with expert capacity C (position in an expert's buffer by a
cumulative sum along the group, `reduce-window`), one-hot dispatch and combine tensors
[G,S,E,C]; expert inputs = einsum GSEC,GSM->EGCM (a `dot` with G a batch dim, then a
transpose), the expert FFN on [E,G,C,M] with Wi [E,M,F] and Wo [E,F,M] split over `expert`,
and the combine einsum GSEC,EGCM->GSM. Groups G are the batch rows, split over all devices
(data x expert); the dispatched tensor carries the sharding {G over data, E over expert}, so the
partitioner moves tokens to their experts' devices by all-to-all and back.

pipeline: the paper's "pipelining as sharding" (Section 3.3). S stages of L MLP layers (dot,
relu, dot, residual) with weight stacks w1s [S,L,D,F] and w2s [S,L,F,D] split over the `stage`
mesh axis; M microbatches x [M,B,T,D]; a buffer [S,B,T,D] (dim 0 over `stage`, B over `data`)
runs through a `while` of M + S - 1 iterations (counter from 0 compared with a constant). At
iteration i: stage 0's slot takes microbatch i while i < M (dynamic-slice at a clamped index,
select; --feed select: an iota mask over the stage dim, as praxis does); all stages compute at
once, the stage dim a batch dim of every dot, so each device computes only its stage; the last
stage's slot (--collect reduce: masked by iota and summed over the stage dim, one all-reduce)
goes to the output buffer at row i - (S - 1) once i >= S - 1; the buffer shifts one stage on
(--shift pad: slice of stages 0..S-2 padded by one zero slot in front, one collective-permute).
The other --shift/--feed/--collect forms are kept for comparison: concat and rotate shifts are
partitioned by gathering the buffer (warned "computed whole"), pad-slice by several permutes
that move the whole buffer, --collect slice and --feed concat warn too. --train: loss =
mean(y^2), a backward `while` over the forward iterations in reverse, each stage recomputing its
layers from the stage input the forward loop saved per iteration ([M+S-1,S,B,T,D]) and the
gradient buffer shifting the other way; weight gradients are accumulated per stage (and, with
a data axis dividing B, per data shard, summed once after the loop), then SGD. The summary
gives the useful FLOPs (M microbatches through all S x L layers, once each), the FLOPs the loop
executes ((M+S-1) iterations x S stages x L layers: the bubbles compute garbage) and the bubble
fraction (S-1)/(M+S-1) = 1 - useful / executed.

unet3d: the paper's spatially partitioned 3D U-Net (image segmentation). Volumes [B,D,H,W,I]
(NDHWC; convolutions dim_labels=b012f_012io->b012f, kernels DHWIO, no loops: each level has
its own weights). K levels of C x 2^l channels: per level two 3x3x3 convolutions (padding 1)
with relu (maximum with 0); between levels a downsampling by 2 (--down conv: a 2x2x2 stride-2
convolution; pool: a 2x2x2 max-pool, reduce-window) and on the way up an upsampling by 2 (--up
transpose: a 2x2x2 transposed convolution, lhs_dilate=2 as jax.lax.conv_transpose emits it;
resize: nearest neighbour, broadcast + reshape), the skip connection concatenated along the
channels, two 3x3x3 convolutions; a 1x1x1 head to N classes. The volume (entry parameter x) is
split along depth, height and width over the mesh axes d, h, w (and the batch over data);
the weights are replicated; propagation does the rest, and the partitioner keeps every
convolution spatially split, exchanging halos by collective-permute. --train: loss = mean(y^2)
and the backward pass as JAX's transpose rules write it: each convolution's input gradient (dy
by the reversed kernel, labels b012f_012oi->b012f, strides and lhs dilation exchanged, padding
as _conv_general_vjp_lhs_padding; none for x) and filter gradient (x by dy, labels
f012b_i012o->012bf, the window dy's spatial size, rhs dilation = the strides; its partial sums
all-reduced), relu's by select, max-pool's by select-and-scatter, the resize's by reshape +
reduce, the concatenate's by slices; then SGD. The summary counts convolution FLOPs as
flops.py and `gspmd cost` do: 2 x output elements x kernel elements per output feature
(windows over padding and dilation holes included, so the transposed convolution, its
filter gradient and the strided convolution's input gradient, all over lhs-dilated volumes,
count 8x their useful multiply-adds). Volume sides must be multiples of 2^(K-1); a mesh axis
that does not divide a side leaves uneven, padded shards.

--train (transformer, moe) adds the backward pass and an SGD update: loss = mean(y^2), a
second `while` running the layers in reverse over what the forward loop saved
(dynamic-update-slice into [L,...] stacks), differentiating every weight (attention, MLP or
experts and the router), accumulating the gradients into stacks; the entry returns (loss, new
weights). What the forward saves:
  (default)    each layer's input [B,S,M] only: rematerialization per layer, as
               jax.checkpoint(layer) inside a scan; the backward body recomputes the layer's
               whole forward from it, including its output dot that no gradient reads (the
               form every earlier version wrote, kept byte for byte)
  --remat      each layer's input only, and the backward body recomputes only what the
               gradients read (not the output dot and residual add, which XLA's dead-code
               elimination would drop): fewer dot FLOPs than the default, no more memory
  --no-remat   every residual of every layer (x, q, k, v, probs, context, the MLP's input and
               hidden layer before and after relu; for MoE the router's and experts' values):
               the backward recomputes nothing (3 x the forward's dot FLOPs in all) but holds
               all of them, the [L,B,N,S,S] attention probabilities included; each residual
               stack carries the sharding the forward computes it with (no resharding between
               the loops)
With --remat or --no-remat, MoE's dispatch and combine tensors carry the tokens' sharding
(which the default leaves to propagation from the combine dot). All three compute the same loss
and weights (bitwise on the reference interpreter).
Without --train the entry returns the activations after the last layer.
"""
import argparse
import math
import sys

# ----------------------------------------------------------------------------------------------
# HLO text builder


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def shape_str(shape):
    """shape: (dtype, dims) for an array, or a list of shapes for a tuple."""
    if isinstance(shape, list):
        return "(" + ", ".join(shape_str(s) for s in shape) + ")"
    dt, dims = shape
    return "%s[%s]" % (dt, ",".join(str(d) for d in dims))


def dims_str(ds):
    return "{" + ",".join(str(d) for d in ds) + "}"


class Comp:
    """One HLO computation: instructions appended in order, names unique, shapes tracked."""

    def __init__(self, name, entry=False):
        self.name = name
        self.entry = entry
        self.params = []  # (name, shape)
        self.lines = []
        self.shapes = {}
        self.index = {}  # instruction name -> line index
        self.dot_flops = 0
        self.n_dots = 0
        self.conv_flops = 0
        self.n_convs = 0
        self.hole_flops = 0
        self.root = None

    def _fresh(self, base):
        name, k = base, 1
        while name in self.shapes:
            k += 1
            name = "%s.%d" % (base, k)
        return name

    def emit(self, base, shape, rhs, sharding=None):
        name = self._fresh(base)
        self.shapes[name] = shape
        line = "%%%s = %s %s" % (name, shape_str(shape), rhs)
        if sharding:
            line += ", sharding=" + sharding
        self.index[name] = len(self.lines)
        self.lines.append(line)
        return name

    def param(self, base, shape, sharding=None):
        name = self.emit(base, shape, "parameter(%d)" % len(self.params), sharding)
        self.params.append((name, shape))
        return name

    def set_root(self, name, sharding=None):
        i = self.index[name]
        line = self.lines[i]
        if sharding:
            line += ", sharding=" + sharding
        self.lines[i] = "ROOT " + line
        self.root = name
        # the root must be the last instruction
        self.lines.append(self.lines.pop(i))

    def text(self):
        sig = ", ".join("%s: %s" % (n, shape_str(s)) for n, s in self.params)
        head = "%s%%%s (%s) -> %s {" % ("ENTRY " if self.entry else "", self.name, sig,
                                        shape_str(self.shapes[self.root]))
        return "\n".join([head] + ["  " + l for l in self.lines] + ["}"])

    # -- shapes
    def dt(self, x):
        return self.shapes[x][0]

    def dims(self, x):
        return list(self.shapes[x][1])

    # -- ops
    def const(self, dt, value, base="c"):
        if dt in ("f32", "bf16", "f16"):
            if value == float("-inf"):
                v = "-inf"
            else:
                v = repr(float(value))
        elif dt == "pred":
            v = "true" if value else "false"
        else:
            v = str(int(value))
        return self.emit(base, (dt, []), "constant(%s)" % v)

    def bcast(self, x, dims, dimensions=(), base=None, sharding=None):
        return self.emit(base or (x + ".b"), (self.dt(x), list(dims)),
                         "broadcast(%%%s), dimensions=%s" % (x, dims_str(dimensions)), sharding)

    def full(self, dt, value, dims, base="full", sharding=None):
        return self.bcast(self.const(dt, value), dims, (), base, sharding)

    def binop(self, op, a, b, base=None, dt=None, sharding=None):
        assert self.dims(a) == self.dims(b), (op, a, b, self.dims(a), self.dims(b))
        return self.emit(base or op, (dt or self.dt(a), self.dims(a)),
                         "%s(%%%s, %%%s)" % (op, a, b), sharding)

    def add(self, a, b, base=None, sharding=None):
        return self.binop("add", a, b, base, sharding=sharding)

    def sub(self, a, b, base=None):
        return self.binop("subtract", a, b, base)

    def mul(self, a, b, base=None):
        return self.binop("multiply", a, b, base)

    def div(self, a, b, base=None):
        return self.binop("divide", a, b, base)

    def unop(self, op, x, base=None):
        return self.emit(base or op, self.shapes[x], "%s(%%%s)" % (op, x))

    def compare(self, a, b, direction, base=None):
        assert self.dims(a) == self.dims(b)
        return self.emit(base or "cmp", ("pred", self.dims(a)),
                         "compare(%%%s, %%%s), direction=%s" % (a, b, direction))

    def select(self, p, a, b, base=None):
        return self.emit(base or "sel", self.shapes[a], "select(%%%s, %%%s, %%%s)" % (p, a, b))

    def convert(self, x, dt, base=None, sharding=None):
        return self.emit(base or (x + ".c"), (dt, self.dims(x)), "convert(%%%s)" % x, sharding)

    def iota(self, dt, dims, dim, base="iota"):
        return self.emit(base, (dt, list(dims)), "iota(), iota_dimension=%d" % dim)

    def reshape(self, x, dims, base=None, sharding=None):
        assert prod(dims) == prod(self.dims(x))
        return self.emit(base or (x + ".r"), (self.dt(x), list(dims)), "reshape(%%%s)" % x,
                         sharding)

    def transpose(self, x, perm, base=None, sharding=None):
        d = self.dims(x)
        return self.emit(base or (x + ".t"), (self.dt(x), [d[p] for p in perm]),
                         "transpose(%%%s), dimensions=%s" % (x, dims_str(perm)), sharding)

    def reduce(self, x, init, dims, comp, base=None):
        d = self.dims(x)
        out = [d[i] for i in range(len(d)) if i not in dims]
        return self.emit(base or (x + ".red"), (self.dt(x), out),
                         "reduce(%%%s, %%%s), dimensions=%s, to_apply=%%%s"
                         % (x, init, dims_str(dims), comp))

    def cumsum(self, x, dim, init, comp, base=None):
        """Inclusive prefix sum along dim, as XLA lowers cumsum: a reduce-window."""
        d = self.dims(x)
        size = "x".join(str(d[i]) if i == dim else "1" for i in range(len(d)))
        pad = "x".join(("%d_0" % (d[i] - 1)) if i == dim else "0_0" for i in range(len(d)))
        return self.emit(base or (x + ".cs"), self.shapes[x],
                         "reduce-window(%%%s, %%%s), window={size=%s pad=%s}, to_apply=%%%s"
                         % (x, init, size, pad, comp))

    def dot(self, a, b, lb, rb, lc, rc, base="dot", sharding=None):
        da, db = self.dims(a), self.dims(b)
        assert [da[i] for i in lb] == [db[i] for i in rb], ("batch", a, b)
        assert [da[i] for i in lc] == [db[i] for i in rc], ("contract", a, b, da, db, lc, rc)
        out = ([da[i] for i in lb] + [da[i] for i in range(len(da)) if i not in lb + lc]
               + [db[i] for i in range(len(db)) if i not in rb + rc])
        attrs = []
        if lb:
            attrs.append("lhs_batch_dims=" + dims_str(lb))
            attrs.append("rhs_batch_dims=" + dims_str(rb))
        attrs.append("lhs_contracting_dims=" + dims_str(lc))
        attrs.append("rhs_contracting_dims=" + dims_str(rc))
        self.dot_flops += 2 * prod(out) * prod(da[i] for i in lc)
        self.n_dots += 1
        return self.emit(base, (self.dt(a), out),
                         "dot(%%%s, %%%s), %s" % (a, b, ", ".join(attrs)), sharding)

    def conv(self, lhs, rhs, win, labels, base="conv", sharding=None):
        """A convolution: win a Window over the spatial dims, labels XLA's dim_labels
        (b012f_012io->b012f). Counts 2 x output elements x the kernel's elements per output
        feature, as ../shared/tools/flops.py and `gspmd cost` do (window positions over padding
        and dilation holes included)."""
        ll, rest = labels.split("_")
        rl, ol = rest.split("->")
        dl, dr = self.dims(lhs), self.dims(rhs)
        ns = len(win.size)
        assert len(ll) == len(dl) and len(rl) == len(dr) and len(ol) == len(dl), labels
        assert [dr[rl.index(str(i))] for i in range(ns)] == win.size, ("window", rhs, labels)
        assert dl[ll.index("f")] == dr[rl.index("i")], ("features", lhs, rhs, labels)
        sp = win.out([dl[ll.index(str(i))] for i in range(ns)])
        out = [dl[ll.index("b")] if ch == "b" else dr[rl.index("o")] if ch == "f" else sp[int(ch)]
               for ch in ol]
        assert all(d > 0 for d in out), ("empty convolution", lhs, rhs, out)
        flops = 2 * prod(out) * prod(dr) // dr[rl.index("o")]
        self.conv_flops += flops
        self.n_convs += 1
        # an lhs-dilated volume: all but one in prod(dilation) window positions read a hole
        self.hole_flops += flops - flops // prod(win.lhs_dil)
        name = self.emit(base, (self.dt(lhs), out), "convolution(%%%s, %%%s), window=%s, "
                         "dim_labels=%s" % (lhs, rhs, win.text(), labels), sharding)
        return name, flops

    def reverse(self, x, dims, base=None):
        return self.emit(base or (x + ".rev"), self.shapes[x],
                         "reverse(%%%s), dimensions=%s" % (x, dims_str(dims)))

    def reduce_window(self, x, init, size, stride, comp, base=None):
        """A reduce-window without padding (a pooling layer)."""
        out = [(n - k) // s + 1 for n, k, s in zip(self.dims(x), size, stride)]
        return self.emit(base or (x + ".rw"), (self.dt(x), out),
                         "reduce-window(%%%s, %%%s), window={size=%s stride=%s}, to_apply=%%%s"
                         % (x, init, "x".join(map(str, size)), "x".join(map(str, stride)),
                            comp))

    def select_and_scatter(self, x, src, init, size, stride, select, scatter, base=None):
        """The gradient of a max-pool (XLA's, as JAX's select_and_scatter_add lowers)."""
        return self.emit(base or (x + ".sas"), self.shapes[x],
                         "select-and-scatter(%%%s, %%%s, %%%s), window={size=%s stride=%s}, "
                         "select=%%%s, scatter=%%%s"
                         % (x, src, init, "x".join(map(str, size)), "x".join(map(str, stride)),
                            select, scatter))

    def tuple(self, xs, base="tuple"):
        return self.emit(base, [self.shapes[x] for x in xs],
                         "tuple(%s)" % ", ".join("%" + x for x in xs))

    def gte(self, t, i, base=None):
        return self.emit(base or ("%s.%d" % (t, i)), self.shapes[t][i],
                         "get-tuple-element(%%%s), index=%d" % (t, i))

    def constrain(self, x, sharding, base=None):
        """jax.lax.with_sharding_constraint: x resharded to `sharding` (XLA's Sharding
        custom-call)."""
        return self.emit(base or (x + ".g"), self.shapes[x],
                         'custom-call(%%%s), custom_call_target="Sharding"' % x, sharding)

    def dslice(self, x, starts, sizes, base=None):
        return self.emit(base or (x + ".ds"), (self.dt(x), list(sizes)),
                         "dynamic-slice(%s), dynamic_slice_sizes=%s"
                         % (", ".join("%" + s for s in [x] + starts), dims_str(sizes)))

    def dus(self, x, upd, starts, base=None):
        return self.emit(base or (x + ".dus"), self.shapes[x], "dynamic-update-slice(%s)"
                         % ", ".join("%" + s for s in [x, upd] + starts))

    def slice_(self, x, starts, limits, base=None):
        d = self.dims(x)
        assert len(starts) == len(limits) == len(d)
        spec = ",".join("[%d:%d]" % (a, b) for a, b in zip(starts, limits))
        return self.emit(base or (x + ".sl"), (self.dt(x), [b - a for a, b in zip(starts, limits)]),
                         "slice(%%%s), slice={%s}" % (x, spec))

    def concat(self, xs, dim, base="concat"):
        d = self.dims(xs[0])
        d[dim] = sum(self.dims(x)[dim] for x in xs)
        return self.emit(base, (self.dt(xs[0]), d), "concatenate(%s), dimensions={%d}"
                         % (", ".join("%" + x for x in xs), dim))

    def pad(self, x, value, lo_hi, base=None):
        """lo_hi: one (low, high) per dim (edge padding only)."""
        d = [n + lo + hi for n, (lo, hi) in zip(self.dims(x), lo_hi)]
        return self.emit(base or (x + ".pad"), (self.dt(x), d), "pad(%%%s, %%%s), padding=%s"
                         % (x, value, "x".join("%d_%d" % lh for lh in lo_hi)))

    def while_(self, init, cond, body, base="while"):
        return self.emit(base, self.shapes[init],
                         "while(%%%s), condition=%%%s, body=%%%s" % (init, cond, body))


def scalar_comp(name, dt, op):
    c = Comp(name)
    a = c.param("a", (dt, []))
    b = c.param("b", (dt, []))
    c.set_root(c.binop(op, a, b, "r"))
    return c


# ----------------------------------------------------------------------------------------------
# Shardings: a JAX PartitionSpec over a named mesh, written as XLA iota tile assignments.


def sharding(spec, mesh):
    """spec: one entry per tensor dim, None, an axis name or a tuple of axis names.
    mesh: [(name, size)], devices numbered row-major over the axes (as JAX's mesh)."""
    sizes = dict(mesh)
    active = [n for n, s in mesh if s > 1]
    used, tiles = [], []
    for ax in spec:
        axes = () if ax is None else (ax if isinstance(ax, tuple) else (ax,))
        axes = tuple(a for a in axes if sizes[a] > 1)
        used += axes
        tiles.append(prod(sizes[a] for a in axes))
    if prod(tiles) == 1:
        return "{replicated}"
    rest = [a for a in active if a not in used]
    rep = prod(sizes[a] for a in rest)
    perm = [active.index(a) for a in used + rest]
    if perm == sorted(perm):
        dev = "<=[%d]" % prod(sizes[a] for a in active)
    else:
        dev = "<=[%s]T(%s)" % (",".join(str(sizes[a]) for a in active),
                               ",".join(str(p) for p in perm))
    tdims = tiles + ([rep] if rep > 1 else [])
    return "{devices=[%s]%s%s}" % (",".join(str(t) for t in tdims), dev,
                                   " last_tile_dim_replicate" if rep > 1 else "")


# ----------------------------------------------------------------------------------------------
# Model description


# The paper's finalized 2D sharding of a dense Transformer's activations (Section 5.1, Figure
# 7): batch over `data`, and the model dim, the heads or the hidden dim over `model`.
ACT_SPECS = {
    "bsm": ("data", None, "model"),  # [B,S,M]: layer inputs and outputs, residual adds
    "bsnd": ("data", None, "model", None),  # [B,S,N,Dh]: q, k, v
    "bnsx": ("data", "model", None, None),  # [B,N,S,S] scores, [B,N,S,Dh] context
    "bsf": ("data", None, "model"),  # [B,S,F]: the MLP's hidden layer
    "bsm_g": ("data", None, None),  # [B,S,M] gathered along `model` for a dot contracting M
}


SHARDINGS = ("megatron", "2d")


class Weight:
    def __init__(self, name, dims, spec, expert=False):
        self.name = name  # stack name (entry parameter)
        self.dims = dims  # per-layer dims
        self.spec = spec  # PartitionSpec of the per-layer dims (layer dim replicated)
        self.expert = expert  # an expert weight (only k of E used per token)


class Model:
    def __init__(self, a):
        self.kind = a.kind
        self.L, self.B, self.S, self.M, self.F = a.layers, a.batch, a.seq, a.model, a.ffn
        self.H = a.heads or 0
        self.dt = a.dtype
        self.train = a.train
        self.mesh = a.mesh
        self.devices = prod(s for _, s in a.mesh)
        # --sharding: megatron (weights over `model` only) or 2d (the paper's finalized 2D
        # sharding: weights over data x model, activations over both); --remat: None (the
        # default: the backward recomputes each layer's whole forward, its discarded output
        # included), True (only what the gradients need) or False (--no-remat: the forward
        # saves every residual, the backward recomputes nothing)
        self.sharding = getattr(a, "sharding", None) or "megatron"
        self.remat = getattr(a, "remat", None)
        if self.remat is not None and not self.train:
            raise SystemExit("gen.py: --remat / --no-remat need --train")
        names = [n for n, _ in a.mesh]
        if self.H:
            if self.M % self.H:
                raise SystemExit("gen.py: --model %d is not a multiple of --heads %d"
                                 % (self.M, self.H))
            self.Dh = self.M // self.H
        self.weights = []
        if a.kind == "transformer":
            if not self.H:
                raise SystemExit("gen.py: transformer needs --heads")
            for ax in ("data", "model"):
                if ax not in names:
                    raise SystemExit("gen.py: transformer needs a mesh with axes data and model")
            self.tok_spec = ("data", None, None)
            att = "model"
            if self.sharding == "2d":
                self.tok_spec = ACT_SPECS["bsm"]
        else:
            if self.sharding != "megatron":
                raise SystemExit("gen.py: --sharding %s is for dense transformers only"
                                 % self.sharding)
            for ax in ("data", "expert"):
                if ax not in names:
                    raise SystemExit("gen.py: moe needs a mesh with axes data and expert")
            self.E, self.k = a.experts, a.top
            self.C = a.capacity or max(1, -(-self.k * self.S // self.E))
            self.tok_spec = (("data", "expert"), None, None)
            att = None
        # 2d: the model dim M of every weight over `data` as well (all-gathered per layer)
        md = "data" if self.sharding == "2d" else None
        if self.H:
            N, Dh, M = self.H, self.Dh, self.M
            for w in ("wq", "wk", "wv"):
                self.weights.append(Weight(w, [M, N, Dh], (md, att, None)))
            self.weights.append(Weight("wo", [N, Dh, M], (att, None, md)))
        if a.kind == "transformer":
            self.weights.append(Weight("w1", [self.M, self.F], (md, "model")))
            self.weights.append(Weight("w2", [self.F, self.M], ("model", md)))
        else:
            self.weights.append(Weight("wg", [self.M, self.E], (None, None)))
            self.weights.append(Weight("wi", [self.E, self.M, self.F], ("expert", None, None),
                                       True))
            self.weights.append(Weight("we", [self.E, self.F, self.M], ("expert", None, None),
                                       True))

    def ann(self, kind):
        """The sharding annotation of an activation of kind ACT_SPECS[kind] inside the layer
        (2d only: Megatron leaves every activation to propagation)."""
        return sharding(ACT_SPECS[kind], self.mesh) if self.sharding == "2d" else None

    def wann(self, name, gathered=False):
        """The sharding annotation of one layer's slice of weight stack `name` (2d only);
        gathered: as the layer's dots read it, all-gathered along `data`."""
        if self.sharding != "2d":
            return None
        spec = [w for w in self.weights if w.name == name][0].spec
        if gathered:
            spec = tuple(None if ax == "data" else ax for ax in spec)
        return sharding(spec, self.mesh)

    def gather(self, c, x):
        """2d: the activation x [B,S,M] all-gathered along `model` (a sharding constraint)
        before a dot that contracts M, as the paper's finalized 2D sharding does; otherwise x."""
        if self.sharding != "2d":
            return x
        return c.constrain(x, self.ann("bsm_g"))

    def params(self):
        return sum(self.L * prod(w.dims) for w in self.weights)

    def active_params(self):
        n = 0
        for w in self.weights:
            p = self.L * prod(w.dims)
            n += p * self.k // self.E if w.expert else p
        return n

    def tokens(self):
        return self.B * self.S


# ----------------------------------------------------------------------------------------------
# Layer blocks: forward (returns the values the backward needs) and backward


def attn_fwd(c, m, x, w):
    fd, B, S, N, Dh = m.dt, m.B, m.S, m.H, m.Dh
    a = m.ann
    xg = m.gather(c, x)
    q = c.dot(xg, w["wq"], [], [], [2], [0], "q", a("bsnd"))  # [B,S,N,Dh]
    k = c.dot(xg, w["wk"], [], [], [2], [0], "k", a("bsnd"))
    v = c.dot(xg, w["wv"], [], [], [2], [0], "v", a("bsnd"))
    sc = c.dot(q, k, [0, 2], [0, 2], [3], [3], "scores", a("bnsx"))  # [B,N,S,S]
    scale = c.full(fd, 1.0 / math.sqrt(Dh), [B, N, S, S], "scale")
    s = c.mul(sc, scale, "scaled")
    mx = c.reduce(s, c.const(fd, float("-inf"), "ninf"), [3], "max_" + fd, "smax")
    sh = c.sub(s, c.bcast(mx, [B, N, S, S], [0, 1, 2]), "shifted")
    ex = c.unop("exponential", sh, "ex")
    sm = c.reduce(ex, c.const(fd, 0, "zero"), [3], "add_" + fd, "ssum")
    p = c.div(ex, c.bcast(sm, [B, N, S, S], [0, 1, 2]), "probs")
    ctx = c.dot(p, v, [0, 1], [0, 2], [3], [1], "ctx", a("bnsx"))  # [B,N,S,Dh]
    proj = c.dot(ctx, w["wo"], [], [], [1, 3], [0, 1], "proj", a("bsm"))  # [B,S,M]
    x1 = c.add(x, proj, "x1", a("bsm"))
    return x1, dict(x=x, xg=xg, q=q, k=k, v=v, p=p, ctx=ctx)


def attn_bwd(c, m, sv, w, g):
    fd, B, S, N = m.dt, m.B, m.S, m.H
    a = m.ann
    dw = {}
    gg = m.gather(c, g)
    dw["wo"] = c.dot(sv["ctx"], gg, [], [], [0, 2], [0, 1], "dwo", m.wann("wo"))  # [N,Dh,M]
    dctx = c.dot(gg, w["wo"], [], [], [2], [2], "dctx", a("bsnd"))  # [B,S,N,Dh]
    dp = c.dot(dctx, sv["v"], [0, 2], [0, 2], [3], [3], "dprobs", a("bnsx"))  # [B,N,S,S']
    dv = c.dot(sv["p"], dctx, [0, 1], [0, 2], [2], [1], "dv", a("bnsx"))  # [B,N,S',Dh]
    t = c.reduce(c.mul(dp, sv["p"], "dpp"), c.const(fd, 0, "zero"), [3], "add_" + fd, "dpsum")
    ds = c.mul(sv["p"], c.sub(dp, c.bcast(t, [B, N, S, S], [0, 1, 2]), "dpc"), "dscaled")
    ds = c.mul(ds, c.full(fd, 1.0 / math.sqrt(m.Dh), [B, N, S, S], "scale"), "dscores")
    dq = c.dot(ds, sv["k"], [0, 1], [0, 2], [3], [1], "dq", a("bnsx"))  # [B,N,S,Dh]
    dk = c.dot(ds, sv["q"], [0, 1], [0, 2], [2], [1], "dk", a("bnsx"))  # [B,N,S',Dh]
    dx = g
    for name, d in (("wq", dq), ("wk", dk), ("wv", dv)):
        dw[name] = c.dot(sv["xg"], d, [], [], [0, 1], [0, 2], "d" + name,
                         m.wann(name))  # [M,N,Dh]
        dx = c.add(dx, c.dot(d, w[name], [], [], [1, 3], [1, 2], "dx" + name[1], a("bsm")),
                   "dxa", a("bsm"))
    return dx, dw


def mlp_fwd(c, m, x1, w, out=True):
    """out=False: only what the backward needs (the layer's output dot is left out)."""
    a = m.ann
    x1g = m.gather(c, x1)
    h0 = c.dot(x1g, w["w1"], [], [], [2], [0], "h0", a("bsf"))  # [B,S,F]
    zero = c.full(m.dt, 0, c.dims(h0), "zeros")
    h = c.binop("maximum", h0, zero, "h")
    saved = dict(x1=x1, x1g=x1g, h0=h0, h=h, zero=zero)
    if not out:
        return None, saved
    y = c.dot(h, w["w2"], [], [], [2], [0], "y", a("bsm"))
    return c.add(x1, y, "out", a("bsm")), saved


def mlp_bwd(c, m, sv, w, g):
    a = m.ann
    dw = {}
    gg = m.gather(c, g)
    dw["w2"] = c.dot(sv["h"], gg, [], [], [0, 1], [0, 1], "dw2", m.wann("w2"))  # [F,M]
    dh = c.dot(gg, w["w2"], [], [], [2], [1], "dh", a("bsf"))  # [B,S,F]
    dh0 = c.select(c.compare(sv["h0"], sv["zero"], "GT", "active"), dh, sv["zero"], "dh0")
    dw["w1"] = c.dot(sv["x1g"], dh0, [], [], [0, 1], [0, 1], "dw1", m.wann("w1"))  # [M,F]
    dx = c.add(g, c.dot(dh0, w["w1"], [], [], [2], [1], "dxm", a("bsm")), "dx1", a("bsm"))
    return dx, dw


def moe_fwd(c, m, x1, w, out=True):
    fd, G, S, E, C = m.dt, m.B, m.S, m.E, m.C
    gse = [G, S, E]
    lg = c.dot(x1, w["wg"], [], [], [2], [0], "logits")  # [G,S,E]
    mx = c.reduce(lg, c.const(fd, float("-inf"), "ninf"), [2], "max_" + fd, "lmax")
    ex = c.unop("exponential", c.sub(lg, c.bcast(mx, gse, [0, 1]), "lshift"), "lexp")
    sm = c.reduce(ex, c.const(fd, 0, "zero"), [2], "add_" + fd, "lsum")
    gates = c.div(ex, c.bcast(sm, gse, [0, 1]), "gates")
    # top-1: the expert with the largest gate (one-hot), its position in that expert's buffer
    g1 = c.reduce(gates, c.const(fd, float("-inf"), "ninf"), [2], "max_" + fd, "g1")
    m1 = c.compare(gates, c.bcast(g1, gse, [0, 1]), "EQ", "mask1")
    m1i = c.convert(m1, "s32", "mask1.i")
    zi = c.const("s32", 0, "zi")
    one = c.full("s32", 1, gse, "ones")
    pos = c.sub(c.cumsum(m1i, 1, zi, "add_s32", "cum1"), one, "pos1")
    mask = m1
    if m.k == 2:
        # top-2: the best remaining expert; its positions come after all top-1 tokens
        gates2 = c.select(m1, c.full(fd, 0, gse, "zeros"), gates, "gates2")
        g2 = c.reduce(gates2, c.const(fd, float("-inf"), "ninf"), [2], "max_" + fd, "g2")
        m2 = c.compare(gates2, c.bcast(g2, gse, [0, 1]), "EQ", "mask2")
        m2i = c.convert(m2, "s32", "mask2.i")
        cnt1 = c.reduce(m1i, zi, [1], "add_s32", "count1")  # [G,E]
        pos2 = c.add(c.sub(c.cumsum(m2i, 1, zi, "add_s32", "cum2"), one, "pos2a"),
                     c.bcast(cnt1, gse, [0, 2]), "pos2")
        pos = c.select(m1, pos, pos2, "pos")
        mask = c.binop("or", m1, m2, "mask")
    keep = c.binop("and", mask, c.compare(pos, c.full("s32", C, gse, "cap"), "LT", "fits"),
                   "keep")
    gsec = [G, S, E, C]
    onehot = c.compare(c.bcast(pos, gsec, [0, 1, 2]), c.iota("s32", gsec, 3, "slot"), "EQ",
                       "onehot")
    disp_p = c.binop("and", onehot, c.bcast(keep, gsec, [0, 1, 2]), "dispatch.p")
    # --remat / --no-remat pin the dispatch and combine tensors to the tokens' sharding (G over
    # data x expert): the default form leaves that to propagation from the combine dot, which
    # --remat's backward does not recompute
    gs = sharding(m.tok_spec + (None,), m.mesh) if m.remat is not None else None
    disp = c.convert(disp_p, fd, "dispatch", gs)  # [G,S,E,C]
    comb = c.binop("multiply", disp, c.bcast(gates, gsec, [0, 1, 2]), "combine", sharding=gs)
    # GSEC,GSM->EGCM: tokens to their experts (all-to-all: G over data x expert -> E over expert)
    ge = sharding(("data", "expert", None, None), m.mesh)
    ein_g = c.dot(disp, x1, [0], [0], [1], [1], "expert_in.g", ge)  # [G,E,C,M]
    ein = c.transpose(ein_g, [1, 0, 2, 3], "expert_in")  # [E,G,C,M]
    h0 = c.dot(ein, w["wi"], [0], [0], [3], [1], "eh0")  # [E,G,C,F]
    zero = c.full(fd, 0, c.dims(h0), "ezeros")
    h = c.binop("maximum", h0, zero, "eh")
    eo = c.dot(h, w["we"], [0], [0], [3], [1], "expert_out")  # [E,G,C,M]
    saved = dict(x1=x1, gates=gates, disp=disp, comb=comb, ein=ein, h0=h0, h=h, eo=eo,
                 zero=zero)
    if not out:
        return None, saved
    # GSEC,EGCM->GSM: back to the tokens, weighted by their gates
    y = c.dot(comb, eo, [0], [1], [2, 3], [0, 2], "moe_y")  # [G,S,M]
    return c.add(x1, y, "out"), saved


def moe_bwd(c, m, sv, w, g):
    fd, G, S, E = m.dt, m.B, m.S, m.E
    dw = {}
    ge = sharding(("data", "expert", None, None), m.mesh)
    deo_g = c.dot(sv["comb"], g, [0], [0], [1], [1], "dexpert_out.g", ge)  # [G,E,C,M]
    deo = c.transpose(deo_g, [1, 0, 2, 3], "dexpert_out")  # [E,G,C,M]
    dw["we"] = c.dot(sv["h"], deo, [0], [0], [1, 2], [1, 2], "dwe")  # [E,F,M]
    dh = c.dot(deo, w["we"], [0], [0], [3], [2], "deh")  # [E,G,C,F]
    dh0 = c.select(c.compare(sv["h0"], sv["zero"], "GT", "eactive"), dh, sv["zero"], "deh0")
    dw["wi"] = c.dot(sv["ein"], dh0, [0], [0], [1, 2], [1, 2], "dwi")  # [E,M,F]
    dein = c.dot(dh0, w["wi"], [0], [0], [3], [2], "dexpert_in")  # [E,G,C,M]
    dxm = c.dot(sv["disp"], dein, [0], [1], [2, 3], [0, 2], "dx_moe")  # [G,S,M]
    # the router: d combine -> d gates -> softmax backward -> Wg and the tokens
    dcomb = c.dot(g, sv["eo"], [0], [1], [2], [3], "dcombine")  # [G,S,E,C]
    dg = c.reduce(c.mul(dcomb, sv["disp"], "dcd"), c.const(fd, 0, "zero"), [3], "add_" + fd,
                  "dgates")  # [G,S,E]
    t = c.reduce(c.mul(dg, sv["gates"], "dgg"), c.const(fd, 0, "zero"), [2], "add_" + fd,
                 "dgsum")
    dlg = c.mul(sv["gates"], c.sub(dg, c.bcast(t, [G, S, E], [0, 1]), "dgc"), "dlogits")
    dw["wg"] = c.dot(sv["x1"], dlg, [], [], [0, 1], [0, 1], "dwg")  # [M,E]
    dxg = c.dot(dlg, w["wg"], [], [], [2], [1], "dx_gate")  # [G,S,M]
    dx = c.add(c.add(g, dxm, "dx1a"), dxg, "dx1")
    return dx, dw


def layer_fwd(c, m, x, w, out=True):
    """The layer's output and the values its backward reads (by block, then by role); out=False
    leaves out the output (its last dot and residual add), which the backward never reads."""
    saved = {}
    if m.H:
        x, saved["attn"] = attn_fwd(c, m, x, w)
    if m.kind == "transformer":
        y, saved["ffn"] = mlp_fwd(c, m, x, w, out)
    else:
        y, saved["ffn"] = moe_fwd(c, m, x, w, out)
    return y, saved


# The values layer_fwd returns for the backward that --no-remat's forward saves, by block and
# role, with their 2d sharding (not `zero`, a constant, nor xg / x1g, the inputs gathered along
# `model`: the backward makes them again)
RESIDUAL_SPECS = {("attn", "x"): "bsm", ("attn", "q"): "bsnd", ("attn", "k"): "bsnd",
                  ("attn", "v"): "bsnd", ("attn", "p"): "bnsx", ("attn", "ctx"): "bnsx",
                  ("ffn", "x1"): "bsm", ("ffn", "h0"): "bsf", ("ffn", "h"): "bsf"}
# the MoE block's: the tokens' [G,S,...] (G over data x expert) and the experts' [E,G,C,...]
# (E over expert, G over data)
MOE_RESIDUALS = {"x1": "tok", "gates": "tok", "disp": "tok", "comb": "tok", "ein": "exp",
                 "h0": "exp", "h": "exp", "eo": "exp"}


def residual_spec(m, blk, role):
    """The PartitionSpec of one layer's saved residual, its leading dims (the rest replicated),
    as the forward computes it, so that the stacks need no resharding between the loops."""
    if m.kind == "moe":
        if blk == "ffn":
            return {"tok": (("data", "expert"),),
                    "exp": ("expert", "data")}[MOE_RESIDUALS[role]]
        return (("data", "expert"),)  # attention: pure data parallelism over the tokens
    spec = ACT_SPECS[RESIDUAL_SPECS[(blk, role)]]
    if m.sharding != "2d" and RESIDUAL_SPECS[(blk, role)] == "bsm":
        spec = ACT_SPECS["bsm_g"]  # Megatron: [B,S,M] split over data only
    return spec


def residuals(m):
    """[(block, role, shape)] of the values one layer's backward reads: what --no-remat's
    forward scan stacks over the layers (the constant zeros excepted)."""
    c = Comp("probe")
    x = c.param("x", (m.dt, [m.B, m.S, m.M]))
    w = {wt.name: c.param(wt.name, (m.dt, wt.dims)) for wt in m.weights}
    _, saved = layer_fwd(c, m, x, w, out=False)
    keep = {blk: MOE_RESIDUALS if m.kind == "moe" and blk == "ffn" else
            [r for b, r in RESIDUAL_SPECS if b == blk] for blk in saved}
    return [(blk, role, c.shapes[v]) for blk in saved for role, v in saved[blk].items()
            if role in keep[blk]]


def layer_bwd(c, m, saved, w, g):
    if m.kind == "transformer":
        g, dw = mlp_bwd(c, m, saved["ffn"], w, g)
    else:
        g, dw = moe_bwd(c, m, saved["ffn"], w, g)
    if m.H:
        g, dwa = attn_bwd(c, m, saved["attn"], w, g)
        dw.update(dwa)
    return g, dw


# ----------------------------------------------------------------------------------------------
# The module


def slice_layer(c, m, stack, i, wt):
    zero = c.const("s32", 0, "z")
    s = c.dslice(stack, [i] + [zero] * len(wt.dims), [1] + wt.dims, wt.name + ".i")
    w = c.reshape(s, wt.dims, wt.name, m.wann(wt.name))
    if m.sharding == "2d":
        # FSDP: the layer's dots read the weight all-gathered along `data`
        w = c.constrain(w, m.wann(wt.name, gathered=True))
    return w


def loop_cond(name, state_shape, L):
    c = Comp(name)
    s = c.param("s", state_shape)
    i = c.gte(s, 0, "i")
    c.set_root(c.compare(i, c.const("s32", L, "n"), "LT", "lt"))
    return c


def build(m):
    fd, L = m.dt, m.L
    act = [m.B, m.S, m.M]
    comps = [scalar_comp("add_" + fd, fd, "add"), scalar_comp("max_" + fd, fd, "maximum")]
    if m.kind == "moe":
        comps.append(scalar_comp("add_s32", "s32", "add"))
    stack_shape = {w.name: (fd, [L] + w.dims) for w in m.weights}
    stack_shard = {w.name: sharding((None,) + w.spec, m.mesh) for w in m.weights}
    wn = [w.name for w in m.weights]
    two_d = m.sharding == "2d"
    # What the forward scan saves for the backward (dynamic-update-slice into [L,...] stacks):
    # with remat (the default, and --remat) each layer's input [B,S,M], from which the backward
    # loop recomputes the layer; with --no-remat every residual the layer's backward reads.
    if not m.train:
        saves = []
    elif m.remat is False:
        saves = [("res_%s_%s" % (blk, role), shape[1], (blk, role))
                 for blk, role, shape in residuals(m)]
    else:
        saves = [("acts", act, None)]
    save_shape = [(fd, [L] + dims) for _, dims, _ in saves]

    def save_shard(key, dims):
        """The saved stacks' sharding: with --no-remat each residual's; the layer inputs' with
        2d (the default and --remat leave Megatron's to propagation)."""
        if key is not None:
            spec = residual_spec(m, *key)
        elif two_d:
            spec = ACT_SPECS["bsm"]
        else:
            return None
        return sharding((None,) + tuple(spec) + (None,) * (len(dims) - len(spec)), m.mesh)

    # forward scan: (i, x, [saved values,] weight stacks...)
    ns = len(saves)
    fstate = [("s32", []), (fd, act)] + save_shape + [stack_shape[n] for n in wn]
    fb = Comp("fwd_body")
    s = fb.param("s", fstate)
    i = fb.gte(s, 0, "i")
    x = fb.gte(s, 1, "x")
    saved_st = [fb.gte(s, 2 + j, nm) for j, (nm, _, _) in enumerate(saves)]
    if m.train and m.remat is not False:
        z = fb.const("s32", 0, "z")
        saved_st = [fb.dus(saved_st[0], fb.reshape(x, [1] + act, "x4"), [i, z, z, z], "acts1")]
    stacks = [fb.gte(s, 2 + ns + j, n + "s") for j, n in enumerate(wn)]
    w = {n: slice_layer(fb, m, st, i, wt) for n, st, wt in zip(wn, stacks, m.weights)}
    y, res = layer_fwd(fb, m, x, w)
    if m.remat is False:
        z = fb.const("s32", 0, "z")
        for j, (nm, dims, (blk, role)) in enumerate(saves):
            v = fb.reshape(res[blk][role], [1] + dims, nm + ".r")
            saved_st[j] = fb.dus(saved_st[j], v, [i] + [z] * len(dims), nm + "1")
    i1 = fb.add(i, fb.const("s32", 1, "one"), "i1")
    fb.set_root(fb.tuple([i1, y] + saved_st + stacks, "t"))
    comps += [loop_cond("fwd_cond", fstate, L), fb]
    bb = None

    if m.train:
        # backward scan: (i, dy, saved values..., weight stacks..., gradient stacks...), layers
        # reversed
        bstate = [("s32", []), (fd, act)] + save_shape + [stack_shape[n] for n in wn] * 2
        bb = Comp("bwd_body")
        s = bb.param("s", bstate)
        i = bb.gte(s, 0, "i")
        g = bb.gte(s, 1, "g")
        saved_st = [bb.gte(s, 2 + j, nm) for j, (nm, _, _) in enumerate(saves)]
        stacks = [bb.gte(s, 2 + ns + j, n + "s") for j, n in enumerate(wn)]
        gstacks = [bb.gte(s, 2 + ns + len(wn) + j, "d" + n + "s") for j, n in enumerate(wn)]
        j_ = bb.sub(bb.const("s32", L - 1, "last"), i, "j")
        z = bb.const("s32", 0, "z")
        if m.remat is False:
            # the residuals of layer j, as the forward computed them
            res = {}
            for st, (nm, dims, (blk, role)) in zip(saved_st, saves):
                v = bb.dslice(st, [j_] + [z] * len(dims), [1] + dims, nm + ".ds")
                res.setdefault(blk, {})[role] = bb.reshape(v, dims, role)
            ffn = res["ffn"]
            ffn["zero"] = bb.full(fd, 0, bb.dims(ffn["h0"]), "zeros")
            if m.kind == "transformer":
                ffn["x1g"] = m.gather(bb, ffn["x1"])
            if m.H:
                res["attn"]["xg"] = m.gather(bb, res["attn"]["x"])
            w = {n: slice_layer(bb, m, st, j_, wt) for n, st, wt in zip(wn, stacks, m.weights)}
        else:
            # recompute layer j's forward from its saved input (with --remat, only what the
            # gradients read: not the layer's output)
            xj = bb.reshape(bb.dslice(saved_st[0], [j_, z, z, z], [1] + act, "xj"), act, "x",
                            m.ann("bsm"))
            w = {n: slice_layer(bb, m, st, j_, wt) for n, st, wt in zip(wn, stacks, m.weights)}
            _, res = layer_fwd(bb, m, xj, w, out=m.remat is None)
        gx, dw = layer_bwd(bb, m, res, w, g)
        new_g = []
        for n, gs, wt in zip(wn, gstacks, m.weights):
            d = bb.reshape(dw[n], [1] + wt.dims, "d" + n + ".r")
            new_g.append(bb.dus(gs, d, [j_] + [z] * len(wt.dims), "d" + n + "s1"))
        i1 = bb.add(i, bb.const("s32", 1, "one"), "i1")
        bb.set_root(bb.tuple([i1, gx] + saved_st + stacks + new_g, "t"))
        comps += [loop_cond("bwd_cond", bstate, L), bb]

    e = Comp("main", entry=True)
    x = e.param("x", (fd, act), sharding(m.tok_spec, m.mesh))
    stacks = [e.param(n + "s", stack_shape[n], stack_shard[n]) for n in wn]
    zi = e.const("s32", 0, "zero")
    init = [zi, x]
    for nm, dims, key in saves:
        init.append(e.full(fd, 0, [L] + dims, nm + "0", save_shard(key, dims)))
    fw = e.while_(e.tuple(init + stacks, "init"), "fwd_cond", "fwd_body", "fwd")
    y = e.gte(fw, 1, "y")
    if not m.train:
        e.set_root(y, sharding(m.tok_spec, m.mesh))
    else:
        saved_st = [e.gte(fw, 2 + j, nm) for j, (nm, _, _) in enumerate(saves)]
        n_el = prod(act)
        sq = e.mul(y, y, "ysq")
        loss = e.mul(e.reduce(sq, e.const(fd, 0, "fzero"), [0, 1, 2], "add_" + fd, "sumsq"),
                     e.const(fd, 1.0 / n_el, "inv_n"), "loss")
        gy = e.mul(y, e.full(fd, 2.0 / n_el, act, "two_inv_n"), "dy")
        zeros = [e.full(fd, 0, stack_shape[n][1], "d%s0" % n,
                        stack_shard[n] if two_d else None) for n in wn]
        bw = e.while_(e.tuple([zi, gy] + saved_st + stacks + zeros, "binit"), "bwd_cond",
                      "bwd_body", "bwd")
        news = []
        for j, n in enumerate(wn):
            d = e.gte(bw, 2 + ns + len(wn) + j, "d" + n + "s")
            upd = e.mul(d, e.full(fd, 0.01, stack_shape[n][1], "lr_" + n), "u" + n)
            news.append(e.sub(stacks[j], upd, n + "s_new"))
        out = e.tuple([loss] + news, "out")
        e.set_root(out, "{" + ", ".join(["{replicated}"] + [stack_shard[n] for n in wn]) + "}")
    comps.append(e)

    kind = "transformer" if m.kind == "transformer" else "moe"
    head = "HloModule gspmd_gen_%s%s" % (kind, "_train" if m.train else "")
    if m.train:  # the updated weights are the next step's (a donated training state)
        head += ", input_output_alias={ %s }" % ", ".join(
            "{%d}: (%d, {}, may-alias)" % (j + 1, j + 1) for j in range(len(wn)))
    text = head + "\n\n" + "\n\n".join(c.text() for c in comps) + "\n"
    fwd_f = fb.dot_flops
    bwd_f = bb.dot_flops if bb else 0
    stats = dict(written=fwd_f + bwd_f, executed=L * (fwd_f + bwd_f),
                 dots=fb.n_dots + (bb.n_dots if bb else 0),
                 saved=sum(prod(d) for _, d, _ in saves))
    return text, stats


# ----------------------------------------------------------------------------------------------
# Pipelining as sharding (GSPMD paper, Section 3.3)


class Pipeline:
    """S stages of L MLP layers each, vectorised along a leading stage dim that the `stage`
    mesh axis splits; M microbatches stream through a buffer [S,B,T,D] that shifts by one stage
    per iteration of a `while` of M + S - 1 iterations."""

    SHIFTS = ("pad", "concat", "pad-slice", "rotate")
    FEEDS = ("select", "dus", "concat")
    COLLECTS = ("reduce", "slice", "dslice")

    def __init__(self, a):
        self.kind = "pipeline"
        self.S, self.M, self.L = a.stages, a.microbatches, a.layers_per_stage
        self.B, self.T, self.D, self.F = a.microbatch_size, a.seq, a.model, a.ffn
        self.dt = a.dtype
        self.train = bool(a.train)
        self.shift = a.shift
        self.feed = a.feed
        self.collect = a.collect
        self.mesh = a.mesh
        self.devices = prod(s for _, s in a.mesh)
        sizes = dict(a.mesh)
        for n in sizes:
            if n not in ("stage", "data"):
                raise SystemExit("gen.py: pipeline's mesh has axes stage and data only, not %r"
                                 % n)
        if sizes.get("stage") != self.S:
            raise SystemExit("gen.py: pipeline needs a mesh axis stage=%d (--stages)" % self.S)
        if self.S < 2:
            raise SystemExit("gen.py: pipeline needs at least 2 stages")
        if "data" not in sizes:
            self.mesh = list(a.mesh) + [("data", 1)]
        # with --train and a data axis dividing the microbatch, each data shard accumulates
        # its own weight gradients ([S,X,...], split over stage x data: no communication in the
        # loop) and one all-reduce sums them after it; else the dots' partial sums are
        # all-reduced every iteration
        self.X = dict(self.mesh)["data"]
        self.split_grads = self.X > 1 and self.B % self.X == 0

    def params(self):
        return self.S * self.L * 2 * self.D * self.F

    def layer_flops(self):
        """Dot FLOPs of one layer on one microbatch: [B,T,D]x[D,F] and [B,T,F]x[F,D]."""
        return 2 * 2 * self.B * self.T * self.D * self.F

    def step_layer_flops(self):
        """Dot FLOPs the step spends on one layer for one microbatch: the forward's 2 dots, and
        with --train the backward loop's 6 (the 2 forward dots recomputed, dW2, dh, dW1, dx)."""
        return self.layer_flops() * (4 if self.train else 1)

    def step_stage_flops(self):
        """Dot FLOPs the step spends on one stage's L layers for one microbatch: with --train,
        less the recompute of the last layer's output dot, which nothing reads."""
        return self.L * self.step_layer_flops() - (self.layer_flops() // 2 if self.train else 0)

    def model_flops(self):
        """The usual count: 2 (forward) or 6 (training) x params x tokens, no recomputation."""
        return (6 if self.train else 2) * self.params() * self.M * self.B * self.T

    def iterations(self):
        return self.M + self.S - 1

    def useful_flops(self):
        return self.M * self.S * self.step_stage_flops()

    def loop_flops(self):
        return self.iterations() * self.S * self.step_stage_flops()

    def state_shapes(self, with_acts):
        """The forward loop's state: (i, buffer, outputs, inputs, w1 stack, w2 stack[, acts])."""
        fd, S, M, L, B, T, D, F = self.dt, self.S, self.M, self.L, self.B, self.T, self.D, self.F
        st = [("s32", []), (fd, [S, B, T, D]), (fd, [M, B, T, D]), (fd, [M, B, T, D]),
              (fd, [S, L, D, F]), (fd, [S, L, F, D])]
        if with_acts:
            st.append((fd, [self.iterations(), S, B, T, D]))
        return st

    def bwd_state_shapes(self):
        """(k, gradient buffer, acts, dy, w1 stack, w2 stack, dW1 per layer..., dW2 ...)."""
        fd, S, L, D, F = self.dt, self.S, self.L, self.D, self.F
        st = self.state_shapes(True)
        x = [self.X] if self.split_grads else []
        return ([st[0], st[1], st[6], st[2], st[4], st[5]] + [(fd, [S] + x + [D, F])] * L +
                [(fd, [S] + x + [F, D])] * L)

    def bubble(self):
        return (self.S - 1) / float(self.M + self.S - 1)


def pipeline_fwd_body(p, with_acts):
    """The forward loop body: feed slot 0, all stages at once, collect the last, shift."""
    fd, S, M, L, B, T, D, F = p.dt, p.S, p.M, p.L, p.B, p.T, p.D, p.F
    mb = [B, T, D]
    st = p.state_shapes(with_acts)
    b = Comp("pipeline_body")
    s = b.param("s", st)
    i = b.gte(s, 0, "i")
    buf = b.gte(s, 1, "buf")
    out = b.gte(s, 2, "outs")
    x = b.gte(s, 3, "x")
    w1 = b.gte(s, 4, "w1s")
    w2 = b.gte(s, 5, "w2s")
    acts = b.gte(s, 6, "acts") if with_acts else None
    z = b.const("s32", 0, "z")
    zeros1 = b.full(fd, 0, [1] + mb, "zeros1")
    # (1) slot 0 takes microbatch i while i < M (the index clamped, zeros after)
    idx = b.binop("minimum", i, b.const("s32", M - 1, "last_mb"), "mb_idx")
    xin = b.dslice(x, [idx, z, z, z], [1] + mb, "mb_in")
    feeding = b.compare(i, b.const("s32", M, "n_mb"), "LT", "feeding")
    slot0 = b.select(b.bcast(feeding, [1] + mb, (), "feeding.b"), xin, zeros1, "slot0")
    stage_id = b.iota("s32", [S] + mb, 0, "stage_id")
    if p.feed == "select":
        # as praxis does: every stage sees the microbatch, stage 0 keeps it (all local)
        first = b.compare(stage_id, b.full("s32", 0, [S] + mb, "zeros_s"), "EQ", "is_first")
        cur = b.select(first, b.bcast(b.reshape(slot0, mb, "slot0.r"), [S] + mb, (1, 2, 3),
                                      "slot0.b"), buf, "stage_in")
    elif p.feed == "dus":
        cur = b.dus(buf, slot0, [z, z, z, z], "stage_in")
    else:
        cur = b.concat([slot0, b.slice_(buf, [1, 0, 0, 0], [S, B, T, D], "buf_rest")], 0,
                       "stage_in")
    if with_acts:
        # the stage inputs of iteration i, for the backward loop (which recomputes the layers)
        acts = b.dus(acts, b.reshape(cur, [1, S] + mb, "stage_in.r"), [i, z, z, z, z], "acts1")
    # (2) every stage runs its L layers at once: the stage dim is a batch dim of every dot
    for l in range(L):
        w1l, w2l = stage_layer(b, p, w1, w2, l)
        cur = stage_mlp_fwd(b, p, cur, w1l, w2l)[0]
    # (3) the last stage's output is microbatch i - (S - 1)'s result, once i >= S - 1
    if p.collect == "reduce":
        # mask all but the last stage and sum over the stage dim (an all-reduce of the slot)
        is_last = b.compare(stage_id, b.full("s32", S - 1, [S] + mb, "last_s"), "EQ", "is_last")
        masked = b.select(is_last, cur, b.full(fd, 0, [S] + mb, "zeros_b"), "last_only")
        last = b.reshape(b.reduce(masked, b.const(fd, 0, "fzero"), [0], "add_" + fd,
                                  "last_stage.r"), [1] + mb, "last_stage")
    elif p.collect == "slice":
        last = b.slice_(cur, [S - 1, 0, 0, 0], [S, B, T, D], "last_stage")
    else:
        last = b.dslice(cur, [b.const("s32", S - 1, "last_s"), z, z, z], [1] + mb, "last_stage")
    j = b.binop("maximum", b.sub(i, b.const("s32", S - 1, "s_minus_1"), "j0"), z, "out_idx")
    prev = b.dslice(out, [j, z, z, z], [1] + mb, "out_prev")
    ready = b.bcast(b.compare(i, b.const("s32", S - 1, "s_minus_1"), "GE", "ready"), [1] + mb,
                    (), "ready.b")
    out1 = b.dus(out, b.select(ready, last, prev, "out_row"), [j, z, z, z], "outs1")
    # (4) the buffer shifts by one stage: stage s's output becomes stage s+1's input
    if p.shift == "concat":
        head = b.slice_(cur, [0, 0, 0, 0], [S - 1, B, T, D], "shifted")
        nxt = b.concat([b.full(fd, 0, [1] + mb, "zeros_slot"), head], 0, "buf_next")
    elif p.shift == "pad":
        head = b.slice_(cur, [0, 0, 0, 0], [S - 1, B, T, D], "shifted")
        nxt = b.pad(head, b.const(fd, 0, "fzero"), [(1, 0), (0, 0), (0, 0), (0, 0)], "buf_next")
    elif p.shift == "pad-slice":
        padded = b.pad(cur, b.const(fd, 0, "fzero"), [(1, 0), (0, 0), (0, 0), (0, 0)],
                       "buf_padded")
        nxt = b.slice_(padded, [0, 0, 0, 0], [S, B, T, D], "buf_next")
    else:  # rotate: the last stage's output wraps round to slot 0, replaced by the next feed
        head = b.slice_(cur, [0, 0, 0, 0], [S - 1, B, T, D], "shifted")
        tail = b.slice_(cur, [S - 1, 0, 0, 0], [S, B, T, D], "wrapped")
        nxt = b.concat([tail, head], 0, "buf_next")
    i1 = b.add(i, b.const("s32", 1, "one"), "i1")
    b.set_root(b.tuple([i1, nxt, out1, x, w1, w2] + ([acts] if with_acts else []), "t"))
    return b


def stage_layer(c, p, w1, w2, l):
    """Layer l of every stage: [S,D,F] and [S,F,D] (a static slice of the [S,L,...] stacks)."""
    S, D, F = p.S, p.D, p.F
    w1l = c.reshape(c.slice_(w1, [0, l, 0, 0], [S, l + 1, D, F], "w1.%d.sl" % l), [S, D, F],
                    "w1.%d" % l)
    w2l = c.reshape(c.slice_(w2, [0, l, 0, 0], [S, l + 1, F, D], "w2.%d.sl" % l), [S, F, D],
                    "w2.%d" % l)
    return w1l, w2l


def stage_mlp_fwd(c, p, x, w1l, w2l, output=True):
    """One MLP layer of all S stages at once (stage dim 0 a batch dim of both dots). Without
    `output` (the backward's recompute of a stage's last layer, whose output nothing reads)
    only what the gradients need: the second dot is not emitted (XLA would remove it)."""
    h0 = c.dot(x, w1l, [0], [0], [3], [1], "h0")  # [S,B,T,F]
    zero = c.full(p.dt, 0, c.dims(h0), "zeros")
    h = c.binop("maximum", h0, zero, "h")
    saved = dict(x=x, h0=h0, h=h, zero=zero)
    if not output:
        return None, saved
    y = c.dot(h, w2l, [0], [0], [3], [1], "y")  # [S,B,T,D]
    return c.add(x, y, "stage_out"), saved


def pipeline_bwd_body(p):
    """The backward loop: forward iterations in reverse, each stage recomputing its layers from
    its saved input and back-propagating the gradient of its output; the gradient buffer shifts
    the other way (stage s+1's input gradient becomes stage s's output gradient)."""
    fd, S, M, L, B, T, D, F = p.dt, p.S, p.M, p.L, p.B, p.T, p.D, p.F
    mb = [B, T, D]
    b = Comp("pipeline_bwd_body")
    s = b.param("s", p.bwd_state_shapes())
    k = b.gte(s, 0, "k")
    gbuf = b.gte(s, 1, "gbuf")
    acts = b.gte(s, 2, "acts")
    dy = b.gte(s, 3, "dy")
    w1 = b.gte(s, 4, "w1s")
    w2 = b.gte(s, 5, "w2s")
    dw1 = [b.gte(s, 6 + l, "dw1_%d" % l) for l in range(L)]
    dw2 = [b.gte(s, 6 + L + l, "dw2_%d" % l) for l in range(L)]
    z = b.const("s32", 0, "z")
    i = b.sub(b.const("s32", p.iterations() - 1, "last_it"), k, "i")  # forward iteration
    # the last stage's output gradient: dy of microbatch i - (S - 1) once i >= S - 1
    j = b.binop("maximum", b.sub(i, b.const("s32", S - 1, "s_minus_1"), "j0"), z, "out_idx")
    dyr = b.reshape(b.dslice(dy, [j, z, z, z], [1] + mb, "dy_row"), mb, "dy_row.r")
    ready = b.bcast(b.compare(i, b.const("s32", S - 1, "s_minus_1"), "GE", "ready"), mb, (),
                    "ready.b")
    dyr = b.select(ready, dyr, b.full(fd, 0, mb, "zeros_mb"), "dy_in")
    stage_id = b.iota("s32", [S] + mb, 0, "stage_id")
    is_last = b.compare(stage_id, b.full("s32", S - 1, [S] + mb, "last_s"), "EQ", "is_last")
    g = b.select(is_last, b.bcast(dyr, [S] + mb, (1, 2, 3), "dy_in.b"), gbuf, "g_out")
    # recompute every stage's layers from the saved stage input of forward iteration i
    x = b.reshape(b.dslice(acts, [i, z, z, z, z], [1, S] + mb, "stage_in.ds"), [S] + mb,
                  "stage_in")
    ws, saved = [], []
    for l in range(L):
        w1l, w2l = stage_layer(b, p, w1, w2, l)
        x, sv = stage_mlp_fwd(b, p, x, w1l, w2l, output=l + 1 < L)
        ws.append((w1l, w2l))
        saved.append(sv)
    new1, new2 = list(dw1), list(dw2)

    def wgrad(a, g, base):
        """sum over B and T of a (x) g per stage: [S,.,.], or [S,X,.,.] per data shard."""
        if not p.split_grads:
            return b.dot(a, g, [0], [0], [1, 2], [1, 2], base)
        X = p.X
        ar = b.reshape(a, [S, X, B // X] + b.dims(a)[2:], a + ".x")
        gr = b.reshape(g, [S, X, B // X] + b.dims(g)[2:], g + ".x")
        return b.dot(ar, gr, [0, 1], [0, 1], [2, 3], [2, 3], base)

    for l in reversed(range(L)):
        w1l, w2l = ws[l]
        sv = saved[l]
        new2[l] = b.add(dw2[l], wgrad(sv["h"], g, "dw2"), "dw2_%d.1" % l)  # [S,(X,)F,D]
        dh = b.dot(g, w2l, [0], [0], [3], [2], "dh")  # [S,B,T,F]
        dh0 = b.select(b.compare(sv["h0"], sv["zero"], "GT", "active"), dh, sv["zero"], "dh0")
        new1[l] = b.add(dw1[l], wgrad(sv["x"], dh0, "dw1"), "dw1_%d.1" % l)  # [S,(X,)D,F]
        g = b.add(g, b.dot(dh0, w1l, [0], [0], [3], [2], "dxm"), "g_in")  # [S,B,T,D]
    # stage s's input gradient is stage s-1's output gradient next (backward) iteration
    head = b.slice_(g, [1, 0, 0, 0], [S, B, T, D], "g_shifted")
    nxt = b.pad(head, b.const(fd, 0, "fzero"), [(0, 1), (0, 0), (0, 0), (0, 0)], "gbuf_next")
    k1 = b.add(k, b.const("s32", 1, "one"), "k1")
    b.set_root(b.tuple([k1, nxt, acts, dy, w1, w2] + new1 + new2, "t"))
    return b


def build_pipeline(p):
    fd, S, M, L, B, T, D, F = p.dt, p.S, p.M, p.L, p.B, p.T, p.D, p.F
    mb = [B, T, D]
    buf_sh = sharding(("stage", "data", None, None), p.mesh)
    io_sh = sharding((None, "data", None, None), p.mesh)
    w_sh = sharding(("stage", None, None, None), p.mesh)
    st = p.state_shapes(p.train)
    buf_shape, io_shape, w1_shape, w2_shape = st[1], st[2], st[4], st[5]

    fb = pipeline_fwd_body(p, p.train)
    comps = [scalar_comp("add_" + fd, fd, "add")] if p.collect == "reduce" or p.train else []
    comps += [loop_cond("pipeline_cond", st, p.iterations()), fb]
    bb = None
    if p.train:
        bb = pipeline_bwd_body(p)
        comps += [loop_cond("pipeline_bwd_cond", p.bwd_state_shapes(), p.iterations()), bb]

    e = Comp("main", entry=True)
    x = e.param("x", io_shape, io_sh)
    w1 = e.param("w1s", w1_shape, w_sh)
    w2 = e.param("w2s", w2_shape, w_sh)

    def zeros(shape, spec, base):
        return e.emit(base, shape, "broadcast(%%%s), dimensions={}" % e.const(fd, 0, "fzero"),
                      sharding(spec, p.mesh))

    init = [e.const("s32", 0, "zero"), zeros(buf_shape, ("stage", "data", None, None), "buf0"),
            zeros(io_shape, (None, "data", None, None), "outs0"), x, w1, w2]
    if p.train:
        init.append(zeros(st[6], (None, "stage", "data", None, None), "acts0"))
    w = e.while_(e.tuple(init, "init"), "pipeline_cond", "pipeline_body", "pipeline")
    y = e.gte(w, 2, "y")
    if not p.train:
        e.set_root(y, io_sh)
    else:
        acts = e.gte(w, 6, "acts")
        n_el = M * B * T * D
        loss = e.mul(e.reduce(e.mul(y, y, "ysq"), e.const(fd, 0, "fzero"), [0, 1, 2, 3],
                              "add_" + fd, "sumsq"), e.const(fd, 1.0 / n_el, "inv_n"), "loss")
        dy = e.mul(y, e.full(fd, 2.0 / n_el, [M] + mb, "two_inv_n"), "dy")
        bst = p.bwd_state_shapes()
        acc_spec = ("stage", "data", None, None) if p.split_grads else ("stage", None, None)
        acc = [zeros(bst[6 + j], acc_spec, "dw%d_0" % (1 + j // L)) for j in range(2 * L)]
        bw = e.while_(e.tuple([e.const("s32", 0, "zero"),
                               zeros(buf_shape, ("stage", "data", None, None), "gbuf0"),
                               acts, dy, w1, w2] + acc, "binit"),
                      "pipeline_bwd_cond", "pipeline_bwd_body", "pipeline_bwd")
        news = []
        for name, wt, base, dims in (("w1s", w1, 6, [D, F]), ("w2s", w2, 6 + L, [F, D])):
            parts = []
            for l in range(L):
                d = e.gte(bw, base + l, "d%s_%d" % (name[:2], l))
                if p.split_grads:  # the data shards' sums, added once (an all-reduce)
                    d = e.reduce(d, e.const(fd, 0, "fzero"), [1], "add_" + fd,
                                 "d%s_%d.sum" % (name[:2], l))
                parts.append(e.reshape(d, [S, 1] + dims, "d%s_%d.r" % (name[:2], l)))
            d = parts[0] if L == 1 else e.concat(parts, 1, "d" + name)
            upd = e.mul(d, e.full(fd, 0.01, [S, L] + dims, "lr_" + name[:2]), "u" + name[:2])
            news.append(e.sub(wt, upd, name + "_new"))
        e.set_root(e.tuple([loss] + news, "out"), "{{replicated}, %s, %s}" % (w_sh, w_sh))
    comps.append(e)

    text = "HloModule gspmd_gen_pipeline%s\n\n" % ("_train" if p.train else "") + \
        "\n\n".join(c.text() for c in comps) + "\n"
    written = fb.dot_flops + (bb.dot_flops if bb else 0)
    assert written == S * p.step_stage_flops()
    stats = dict(written=written, executed=p.iterations() * written,
                 dots=fb.n_dots + (bb.n_dots if bb else 0))
    return text, stats


# ----------------------------------------------------------------------------------------------
# 3D U-Net, spatially partitioned (GSPMD paper, Section 5: 3D image segmentation)


def dilated(n, d):
    return 0 if n == 0 else 1 + d * (n - 1)


class Window:
    """A convolution's window over the spatial dims, as lax.conv_general_dilated takes it:
    kernel sizes, strides, (low, high) padding, lhs (base) and rhs (window) dilation."""

    def __init__(self, size, stride=None, pad=None, lhs_dil=None, rhs_dil=None):
        n = len(size)
        self.size = list(size)
        self.stride = list(stride or [1] * n)
        self.pad = [tuple(p) for p in (pad or [(0, 0)] * n)]
        self.lhs_dil = list(lhs_dil or [1] * n)
        self.rhs_dil = list(rhs_dil or [1] * n)

    def out(self, n_in):
        return [(dilated(n, ld) + lo + hi - dilated(k, rd)) // s + 1 for n, k, s, (lo, hi), ld, rd
                in zip(n_in, self.size, self.stride, self.pad, self.lhs_dil, self.rhs_dil)]

    def text(self):
        def x(v):
            return "x".join(str(i) for i in v)
        parts = ["size=" + x(self.size)]
        if any(s != 1 for s in self.stride):
            parts.append("stride=" + x(self.stride))
        if any(p != (0, 0) for p in self.pad):
            parts.append("pad=" + "x".join("%d_%d" % p for p in self.pad))
        if any(d != 1 for d in self.lhs_dil):
            parts.append("lhs_dilate=" + x(self.lhs_dil))
        if any(d != 1 for d in self.rhs_dil):
            parts.append("rhs_dilate=" + x(self.rhs_dil))
        return "{" + " ".join(parts) + "}"


# NDHWC activations, DHWIO kernels (jax.lax.conv_general_dilated with ("NDHWC", "DHWIO",
# "NDHWC")), and the dim_labels of JAX's two transposes of such a convolution
FWD_LABELS = "b012f_012io->b012f"
LHS_GRAD_LABELS = "b012f_012oi->b012f"  # the input gradient: dy by the reversed kernel
RHS_GRAD_LABELS = "f012b_i012o->012bf"  # the filter gradient: x by dy, batch contracted


def conv_input_grad(c, g, k, win, in_sp, base):
    """jax's _conv_general_dilated_transpose_lhs: dy convolved with the spatially reversed
    kernel (its i and o swapped), strides and lhs dilation exchanged, padding by
    _conv_general_vjp_lhs_padding."""
    out_sp = [c.dims(g)[1 + i] for i in range(3)]
    pad = []
    for n, k_, s, (lo, _), ld, rd, o in zip(in_sp, win.size, win.stride, win.pad, win.lhs_dil,
                                            win.rhs_dil, out_sp):
        before = dilated(k_, rd) - lo - 1
        after = dilated(n, ld) + dilated(k_, rd) - 1 - dilated(o, s) - before
        pad.append((before, after))
    kr = c.reverse(k, [0, 1, 2], k + ".rev")
    tw = Window(win.size, win.lhs_dil, pad, win.stride, win.rhs_dil)
    return c.conv(g, kr, tw, LHS_GRAD_LABELS, base)


def conv_filter_grad(c, x, g, win, base):
    """jax's _conv_general_dilated_transpose_rhs: x convolved with dy (the batch contracted,
    dy's spatial dims the window), rhs dilation = the strides, padding by
    _conv_general_vjp_rhs_padding."""
    in_sp = [c.dims(x)[1 + i] for i in range(3)]
    out_sp = [c.dims(g)[1 + i] for i in range(3)]
    pad = []
    for n, k_, s, (lo, _), ld, rd, o in zip(in_sp, win.size, win.stride, win.pad, win.lhs_dil,
                                            win.rhs_dil, out_sp):
        hi = (dilated(o, s) - dilated(n, ld)) + (dilated(k_, rd) - lo - 1)
        pad.append((lo, hi))
    tw = Window(out_sp, win.rhs_dil, pad, win.lhs_dil, win.stride)
    return c.conv(x, g, tw, RHS_GRAD_LABELS, base)


class UNet3D:
    """K levels; level l has C * 2^l channels. Encoder: per level two 3x3x3 convolutions
    (padding 1) with relu, then (but for the last level) a downsampling by 2 (a 2x2x2 stride-2
    convolution or a 2x2x2 max-pool); decoder: per level an upsampling by 2 (a 2x2x2 transposed
    convolution, i.e. lhs-dilated, or a nearest-neighbour broadcast + reshape), the skip
    connection concatenated along channels, two 3x3x3 convolutions with relu; a 1x1x1 head to
    the classes."""

    AXES = ("data", "d", "h", "w")  # the mesh axes: batch, depth, height, width
    DOWNS = ("conv", "pool")
    UPS = ("transpose", "resize")

    def __init__(self, a):
        self.kind = "unet3d"
        self.K, self.C = a.levels, a.channels
        self.B, self.D, self.H, self.W = a.batch, a.depth, a.height, a.width
        self.Cin, self.NC = a.in_channels, a.classes
        self.dt = a.dtype
        self.train = bool(a.train)
        self.down, self.up = a.down, a.up
        self.mesh = a.mesh
        self.devices = prod(s for _, s in a.mesh)
        names = [n for n, _ in a.mesh]
        for n in names:
            if n not in self.AXES:
                raise SystemExit("gen.py: unet3d's mesh axes are data (batch), d, h, w (the "
                                 "spatial dims), not %r" % n)
        if len(set(names)) != len(names):
            raise SystemExit("gen.py: a mesh axis repeats: %s" % ",".join(names))
        for k in ("levels", "channels", "depth", "height", "width", "batch", "in_channels",
                  "classes"):
            if getattr(a, k) < 1:
                raise SystemExit("gen.py: --%s must be positive" % k.replace("_", "-"))
        f = 2 ** (self.K - 1)
        for n, v in (("depth", self.D), ("height", self.H), ("width", self.W)):
            if v % f:
                raise SystemExit("gen.py: --%s %d is not a multiple of 2^(levels-1) = %d"
                                 % (n, v, f))
        sizes = dict(a.mesh)
        # the volume split along its spatial dims (and the batch over data), weights replicated
        self.x_spec = tuple(ax if ax in sizes else None for ax in self.AXES) + (None,)
        self.weights = []  # (name, [kd, kh, kw, in, out])
        cin = self.Cin
        for l in range(self.K):
            ch = self.ch(l)
            self.weights += [("enc%da" % l, [3, 3, 3, cin, ch]), ("enc%db" % l, [3, 3, 3, ch, ch])]
            if l < self.K - 1 and self.down == "conv":
                self.weights.append(("down%d" % l, [2, 2, 2, ch, ch]))
            cin = ch
        for l in reversed(range(self.K - 1)):
            ch = self.ch(l)
            if self.up == "transpose":
                self.weights.append(("up%d" % l, [2, 2, 2, self.ch(l + 1), ch]))
                cat = 2 * ch
            else:
                cat = self.ch(l + 1) + ch
            self.weights += [("dec%da" % l, [3, 3, 3, cat, ch]), ("dec%db" % l, [3, 3, 3, ch, ch])]
        self.weights.append(("head", [1, 1, 1, self.ch(0), self.NC]))

    def ch(self, l):
        return self.C * 2 ** l

    def params(self):
        return sum(prod(s) for _, s in self.weights)

    def voxels(self):
        return self.B * self.D * self.H * self.W


CONV3 = Window([3, 3, 3], pad=[(1, 1)] * 3)
DOWN2 = Window([2, 2, 2], stride=[2, 2, 2])
# jax.lax.conv_transpose(x, k, (2, 2, 2), "SAME") with a 2x2x2 kernel: lhs dilation 2, padding
# (k - 1, k + s - 2 - (k - 1)) = (1, 1): each input voxel spreads to 2x2x2 outputs
UP2 = Window([2, 2, 2], pad=[(1, 1)] * 3, lhs_dil=[2, 2, 2])
HEAD = Window([1, 1, 1])


def unet_fwd(c, u, x, w, tape, stats):
    """The forward network; records each op on tape for the backward pass."""
    fd = u.dt

    def conv(h, wname, win, base):
        z, f = c.conv(h, w[wname], win, FWD_LABELS, base)
        stats["forward"] += f
        tape.append(("conv", z, h, wname, win))
        return z

    def relu(z, base):
        zero = c.full(fd, 0, c.dims(z), base + ".zeros")
        r = c.binop("maximum", z, zero, base)
        tape.append(("relu", r, z, zero))
        return r

    def block(h, l, side):
        h = relu(conv(h, "%s%da" % (side, l), CONV3, "%s%d.z1" % (side, l)), "%s%d.a1" % (side, l))
        return relu(conv(h, "%s%db" % (side, l), CONV3, "%s%d.z2" % (side, l)),
                    "%s%d.a2" % (side, l))

    skips = []
    h = x
    for l in range(u.K):
        h = block(h, l, "enc")
        if l == u.K - 1:
            break
        skips.append(h)
        if u.down == "conv":
            h = conv(h, "down%d" % l, DOWN2, "down%d.z" % l)
        else:
            p = c.reduce_window(h, c.const(fd, float("-inf"), "ninf"), [1, 2, 2, 2, 1],
                                [1, 2, 2, 2, 1], "max_" + fd, "pool%d" % l)
            tape.append(("pool", p, h))
            h = p
    for l in reversed(range(u.K - 1)):
        if u.up == "transpose":
            up = conv(h, "up%d" % l, UP2, "up%d.z" % l)
        else:
            B, D, H, W, Ch = c.dims(h)
            b = c.bcast(h, [B, D, 2, H, 2, W, 2, Ch], (0, 1, 3, 5, 7), "up%d.b" % l)
            up = c.reshape(b, [B, 2 * D, 2 * H, 2 * W, Ch], "up%d" % l)
            tape.append(("resize", up, h))
        cat = c.concat([up, skips[l]], 4, "skip%d" % l)
        tape.append(("concat", cat, [up, skips[l]]))
        h = block(cat, l, "dec")
    return conv(h, "head", HEAD, "logits")


def unet_bwd(c, u, x, w, tape, y, dy, stats):
    """Reverse-mode through the tape: returns {weight name: gradient}."""
    fd = u.dt
    grads = {y: dy}
    dw = {}

    def acc(v, g):
        grads[v] = c.add(grads[v], g, v + ".g") if v in grads else g

    for rec in reversed(tape):
        kind, out = rec[0], rec[1]
        if out not in grads:
            continue
        g = grads.pop(out)
        if kind == "conv":
            _, _, h, wname, win = rec
            dw[wname], f = conv_filter_grad(c, h, g, win, "d" + wname)
            stats["filter"] += f
            if h != x:  # the input volume needs no gradient
                sp = [c.dims(h)[1 + i] for i in range(3)]
                dh, f = conv_input_grad(c, g, w[wname], win, sp, out + ".dx")
                stats["input"] += f
                acc(h, dh)
        elif kind == "relu":
            _, _, z, zero = rec
            acc(z, c.select(c.compare(z, zero, "GT", out + ".on"), g, zero, out + ".dz"))
        elif kind == "pool":
            h = rec[2]
            acc(h, c.select_and_scatter(h, g, c.const(fd, 0, "fzero"), [1, 2, 2, 2, 1],
                                        [1, 2, 2, 2, 1], "ge_" + fd, "add_" + fd, out + ".dx"))
        elif kind == "resize":
            h = rec[2]
            B, D, H, W, Ch = c.dims(h)
            gr = c.reshape(g, [B, D, 2, H, 2, W, 2, Ch], out + ".g8")
            acc(h, c.reduce(gr, c.const(fd, 0, "fzero"), [2, 4, 6], "add_" + fd, out + ".dx"))
        elif kind == "concat":
            parts = rec[2]
            lo = 0
            for p in parts:
                d = c.dims(p)
                acc(p, c.slice_(g, [0, 0, 0, 0, lo], d[:4] + [lo + d[4]], p + ".dcat"))
                lo += d[4]
    return dw


def build_unet(u):
    fd = u.dt
    comps = [scalar_comp("add_" + fd, fd, "add")]
    if u.down == "pool":
        comps.append(scalar_comp("max_" + fd, fd, "maximum"))
        if u.train:
            ge = Comp("ge_" + fd)
            a = ge.param("a", (fd, []))
            b = ge.param("b", (fd, []))
            ge.set_root(ge.compare(a, b, "GE", "r"))
            comps.append(ge)
    e = Comp("main", entry=True)
    xs = sharding(u.x_spec, u.mesh)
    x = e.param("x", (fd, [u.B, u.D, u.H, u.W, u.Cin]), xs)
    w = {n: e.param(n, (fd, s), "{replicated}") for n, s in u.weights}
    tape = []
    stats = dict(forward=0, input=0, filter=0)
    y = unet_fwd(e, u, x, w, tape, stats)
    if not u.train:
        e.set_root(y, xs)
    else:
        dims = e.dims(y)
        n_el = prod(dims)
        loss = e.mul(e.reduce(e.mul(y, y, "ysq"), e.const(fd, 0, "fzero"), [0, 1, 2, 3, 4],
                              "add_" + fd, "sumsq"), e.const(fd, 1.0 / n_el, "inv_n"), "loss")
        dy = e.mul(y, e.full(fd, 2.0 / n_el, dims, "two_inv_n"), "dy")
        dw = unet_bwd(e, u, x, w, tape, y, dy, stats)
        news = []
        for n, s in u.weights:
            upd = e.mul(dw[n], e.full(fd, 0.01, s, "lr_" + n), "u_" + n)
            news.append(e.sub(w[n], upd, n + "_new"))
        e.set_root(e.tuple([loss] + news, "out"),
                   "{" + ", ".join(["{replicated}"] * (1 + len(news))) + "}")
    comps.append(e)
    text = "HloModule gspmd_gen_unet3d%s\n\n" % ("_train" if u.train else "") + \
        "\n\n".join(c.text() for c in comps) + "\n"
    assert e.conv_flops == stats["forward"] + stats["input"] + stats["filter"]
    stats.update(written=e.conv_flops, executed=e.conv_flops, convs=e.n_convs,
                 holes=e.hole_flops)
    return text, stats


def unet_summary(u, stats):
    chans = "%d" % u.ch(0) if u.K == 1 else "%d..%d" % (u.ch(0), u.ch(u.K - 1))
    parts = "forward %d" % stats["forward"]
    if u.train:
        parts += ", input gradients %d, filter gradients %d" % (stats["input"], stats["filter"])
    return ("gen: unet3d%s: levels %d, channels %s, volume [%d,%d,%d,%d,%d] (NDHWC), classes %d, "
            "down %s, up %s; params %d (%s); conv FLOPs/step %d (%s; %.4g per voxel; 2 x "
            "output x kernel window, padding and dilation holes included; %d of them, %.1f%%, "
            "over the holes of lhs-dilated volumes); conv FLOPs emitted: "
            "%d per step executed (no loops), %d as written (each computation once, %d "
            "convolutions); devices %d (%s)" % (
                " train" if u.train else "", u.K, chans, u.B, u.D, u.H, u.W, u.Cin, u.NC,
                u.down, u.up, u.params(), human(u.params()), stats["written"], parts,
                stats["written"] / float(u.voxels()), stats["holes"],
                100.0 * stats["holes"] / stats["written"], stats["executed"], stats["written"],
                stats["convs"], u.devices, ",".join("%s=%d" % ms for ms in u.mesh)))


# ----------------------------------------------------------------------------------------------
# Presets


def _p(kind, **kw):
    kw["kind"] = kind
    return kw


# The paper (Section 5) scales dense Transformers and GShard-style MoE models from 128 to 2048
# TPUv3 cores, up to one trillion parameters, with the parameters per core roughly constant.
# These presets follow that weak-scaling series at the paper's headline sizes and device counts
# (64B..1T dense, MoE up to 1T on 2048); the individual dimensions are chosen here (not copied
# from the paper's tables) so that heads, hidden and expert dims divide the mesh evenly. The MoE
# ones use GShard's M=1024, F=8192, 16 heads, top-2. --list-presets prints the exact counts.
PRESETS = {
    # dense, 2D (data x model) Megatron sharding, seq 1024
    "dense-64b-128": _p("transformer", layers=48, batch=64, seq=1024, model=8192, ffn=65536,
                        heads=128, mesh="data=8,model=16"),
    "dense-128b-256": _p("transformer", layers=96, batch=128, seq=1024, model=8192, ffn=65536,
                         heads=128, mesh="data=16,model=16"),
    "dense-256b-512": _p("transformer", layers=80, batch=128, seq=1024, model=16384, ffn=65536,
                         heads=128, mesh="data=16,model=32"),
    "dense-512b-1024": _p("transformer", layers=96, batch=256, seq=1024, model=16384,
                          ffn=131072, heads=256, mesh="data=16,model=64"),
    "dense-1t-2048": _p("transformer", layers=80, batch=512, seq=1024, model=32768,
                        ffn=131072, heads=256, mesh="data=16,model=128"),
    # GShard MoE Transformer (M=1024, F=8192, 16 heads, top-2), one group per batch row
    "moe-78b-128": _p("moe", layers=36, batch=256, seq=1024, model=1024, ffn=8192,
                      experts=128, heads=16, top=2, mesh="data=2,expert=64"),
    "moe-309b-512": _p("moe", layers=36, batch=1024, seq=1024, model=1024, ffn=8192,
                       experts=512, heads=16, top=2, mesh="data=2,expert=256"),
    "moe-1t-2048": _p("moe", layers=30, batch=2048, seq=1024, model=1024, ffn=8192,
                      experts=2048, heads=16, top=2, mesh="data=2,expert=1024"),
    # tiny ones that gspmd runs and verifies
    "tiny-transformer": _p("transformer", layers=2, batch=4, seq=8, model=16, ffn=32, heads=4,
                           mesh="data=2,model=4", train=True),
    "tiny-moe": _p("moe", layers=2, batch=8, seq=8, model=16, ffn=32, experts=4, capacity=4,
                   heads=4, top=2, mesh="data=2,expert=4", train=True),
    # pipelining as sharding (Section 3.3): stages vectorised along a dim split over `stage`
    "tiny-pipeline": _p("pipeline", stages=4, microbatches=8, layers_per_stage=2,
                        microbatch_size=2, seq=4, model=8, ffn=16, mesh="stage=4"),
    "pipeline-64b-128": _p("pipeline", stages=16, microbatches=64, layers_per_stage=4,
                           microbatch_size=16, seq=1024, model=8192, ffn=61440,
                           mesh="stage=16,data=8"),
    # 3D U-Net, spatial partitioning: the volume split along depth x height x width, the
    # convolutions' halos exchanged by collective-permute, weights replicated
    "tiny-unet3d": _p("unet3d", levels=3, channels=4, depth=32, height=32, width=32, batch=1,
                      in_channels=1, classes=2, mesh="d=2,h=2,w=2", train=True),
    "unet3d-256-256": _p("unet3d", levels=4, channels=32, depth=256, height=256, width=256,
                         batch=1, in_channels=1, classes=4, mesh="d=4,h=8,w=8", train=True),
    "unet3d-256-512": _p("unet3d", levels=4, channels=32, depth=256, height=256, width=256,
                         batch=1, in_channels=1, classes=4, mesh="d=8,h=8,w=8", train=True),
}


# ----------------------------------------------------------------------------------------------
# Command line


def parse_mesh(text):
    mesh = []
    for part in text.split(","):
        name, _, size = part.partition("=")
        if not name or not size.isdigit() or int(size) < 1:
            raise argparse.ArgumentTypeError("mesh is NAME=SIZE,...: %r" % text)
        mesh.append((name.strip(), int(size)))
    return mesh


def add_common(p):
    p.add_argument("--dtype", choices=["f32", "bf16"], default=None)
    p.add_argument("--train", action="store_true", default=None,
                   help="emit a training step (backward scan + SGD), not only the forward")
    p.add_argument("-o", "--output", help="write the module here (default: stdout)")


def add_dense(p):
    p.add_argument("--sharding", choices=SHARDINGS, default=None,
                   help="megatron (default): weights over `model` only; 2d: the paper's "
                   "finalized 2D sharding, weights over data x model (all-gathered per layer) "
                   "and activations over both")
    add_remat(p)


def add_remat(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--remat", dest="remat", action="store_true", default=None,
                   help="with --train: the backward recomputes each layer from its saved input, "
                   "only what the gradients read (jax.checkpoint of the layer)")
    g.add_argument("--no-remat", dest="remat", action="store_false",
                   help="with --train: the forward saves every residual of every layer, the "
                   "backward recomputes nothing")


def make_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring (head -135 tools/gen.py).")
    ap.add_argument("--list-presets", action="store_true", help="list the presets and exit")
    sub = ap.add_subparsers(dest="cmd")
    t = sub.add_parser("transformer", help="dense Transformer (2D data x model sharding)")
    mo = sub.add_parser("moe", help="GShard MoE Transformer (data x expert sharding)")
    for p in (t, mo):
        p.add_argument("--layers", type=int, required=True)
        p.add_argument("--batch", type=int, required=True)
        p.add_argument("--seq", type=int, required=True)
        p.add_argument("--model", type=int, required=True)
        p.add_argument("--ffn", type=int, required=True)
        p.add_argument("--mesh", type=parse_mesh, required=True)
        add_common(p)
    t.add_argument("--heads", type=int, required=True)
    add_dense(t)
    add_remat(mo)
    mo.add_argument("--heads", type=int, default=0,
                    help="attention heads per layer (default 0: MoE FFN layers only)")
    mo.add_argument("--experts", type=int, required=True)
    mo.add_argument("--capacity", type=int, default=0,
                    help="expert capacity per group (default ceil(top * seq / experts))")
    mo.add_argument("--top", type=int, choices=[1, 2], default=2)
    pp = sub.add_parser("pipeline", help="pipelined MLP stack (pipelining as sharding, "
                        "stage x data)")
    pp.add_argument("--stages", type=int, required=True)
    pp.add_argument("--microbatches", type=int, required=True)
    pp.add_argument("--layers-per-stage", type=int, required=True)
    pp.add_argument("--microbatch-size", type=int, required=True)
    pp.add_argument("--seq", type=int, required=True)
    pp.add_argument("--model", type=int, required=True)
    pp.add_argument("--ffn", type=int, required=True)
    pp.add_argument("--mesh", type=parse_mesh, required=True, help="stage=S[,data=X]")
    pp.add_argument("--shift", choices=Pipeline.SHIFTS, default="pad",
                    help="how the buffer moves one stage on (default pad)")
    pp.add_argument("--feed", choices=Pipeline.FEEDS, default="select",
                    help="how slot 0 takes the next microbatch (default select)")
    pp.add_argument("--collect", choices=Pipeline.COLLECTS, default="reduce",
                    help="how the last stage's output is read (default reduce)")
    add_common(pp)
    un = sub.add_parser("unet3d", help="3D U-Net (spatial partitioning over d x h x w)")
    un.add_argument("--levels", type=int, required=True,
                    help="resolution levels (the volume is halved K-1 times)")
    un.add_argument("--channels", type=int, required=True,
                    help="channels of level 0 (level l has C x 2^l)")
    un.add_argument("--depth", type=int, required=True)
    un.add_argument("--height", type=int, required=True)
    un.add_argument("--width", type=int, required=True)
    un.add_argument("--batch", type=int, default=1)
    un.add_argument("--in-channels", type=int, default=1)
    un.add_argument("--classes", type=int, default=2, help="output channels of the 1x1x1 head")
    un.add_argument("--mesh", type=parse_mesh, required=True,
                    help="d=X,h=Y[,w=Z][,data=B]: the axes splitting depth, height, width "
                    "(and batch)")
    un.add_argument("--down", choices=UNet3D.DOWNS, default="conv",
                    help="downsampling: a 2x2x2 stride-2 convolution (default) or max-pool")
    un.add_argument("--up", choices=UNet3D.UPS, default="transpose",
                    help="upsampling: a 2x2x2 transposed (lhs-dilated) convolution (default) "
                    "or nearest-neighbour broadcast + reshape")
    add_common(un)
    pr = sub.add_parser("preset", help="one of --list-presets")
    pr.add_argument("name")
    add_common(pr)
    pr.add_argument("--no-train", dest="train", action="store_false", default=None,
                    help="forward only, whatever the preset says")
    add_dense(pr)
    return ap


def preset_args(name, dtype=None, train=None, sharding=None, remat=None):
    if name not in PRESETS:
        raise SystemExit("gen.py: unknown preset %r (see --list-presets)" % name)
    d = dict(PRESETS[name])
    a = argparse.Namespace(heads=0, experts=0, capacity=0, top=2, dtype="f32", train=False,
                           shift="pad", feed="select", collect="reduce", in_channels=1,
                           classes=2, down="conv", up="transpose", sharding=None, remat=None)
    for k, v in d.items():
        setattr(a, k, v)
    a.mesh = parse_mesh(d["mesh"])
    if dtype:
        a.dtype = dtype
    if train is not None:
        a.train = train
    if (sharding or remat is not None) and a.kind not in ("transformer", "moe"):
        raise SystemExit("gen.py: --sharding, --remat and --no-remat are for the transformer "
                         "and moe presets, not %s" % name)
    a.sharding = sharding
    a.remat = remat
    return a


def human(n):
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return "%.3g%s" % (n / div, unit)
    return str(n)


def summary(m, stats):
    P, T = m.params(), m.tokens()
    mult = 6 if m.train else 2
    if m.kind == "moe":
        A = m.active_params()
        pdesc = "params %d (%s; %d active per token, top-%d of %d experts, capacity %d)" % (
            P, human(P), A, m.k, m.E, m.C)
    else:
        A = P
        pdesc = "params %d (%s)" % (P, human(P))
    extra = ""
    if m.sharding == "2d":
        extra += ("; sharding 2d (weights over data x model, all-gathered per layer; "
                  "activations [B,S,M] over data x model)")
    if m.remat is not None:
        extra += ("; %s: the forward saves %d elements per layer (%s)" % (
            "remat" if m.remat else "no remat", stats["saved"],
            "its input, the backward recomputes the rest" if m.remat else
            "every residual, the backward recomputes nothing"))
    return ("gen: %s%s: %s; model FLOPs/step %.4g (%d x %s x %d tokens); dot FLOPs emitted: "
            "%d per step executed (loop bodies x %d layers), %d as written (each computation "
            "once, %d dots); devices %d (%s)%s" % (
                m.kind, " train" if m.train else "", pdesc, mult * A * T, mult,
                "active params" if m.kind == "moe" else "params", T, stats["executed"], m.L,
                stats["written"], stats["dots"], m.devices,
                ",".join("%s=%d" % ms for ms in m.mesh), extra))


def pipeline_summary(p, stats):
    assert stats["executed"] == p.loop_flops()
    return ("gen: pipeline%s: stages %d, microbatches %d, layers per stage %d (%d layers), "
            "microbatch [%d,%d,%d], ffn %d, shift %s, feed %s, collect %s; params %d (%s); "
            "model FLOPs/step %.4g (%d x params x %d tokens); useful model "
            "FLOPs %d (%d microbatches x %d stages x %d, each once); executed loop FLOPs %d "
            "(%d iterations x %d stages x %d); bubble fraction (S-1)/(M+S-1) = "
            "%d/%d = %.9f; dot FLOPs emitted: %d per step executed (loop bodies x %d iterations), "
            "%d as written (each computation once, %d dots); devices %d (%s)" % (
                " train" if p.train else "", p.S, p.M, p.L, p.S * p.L, p.B, p.T, p.D, p.F,
                p.shift, p.feed, p.collect, p.params(), human(p.params()), p.model_flops(),
                6 if p.train else 2, p.M * p.B * p.T, p.useful_flops(), p.M, p.S,
                p.step_stage_flops(), p.loop_flops(), p.iterations(), p.S,
                p.step_stage_flops(), p.S - 1,
                p.iterations(), p.bubble(), stats["executed"], p.iterations(),
                stats["written"], stats["dots"], p.devices,
                ",".join("%s=%d" % ms for ms in p.mesh if ms[0] != "data" or ms[1] > 1)))


def main(argv=None):
    ap = make_parser()
    a = ap.parse_args(argv)
    if a.list_presets:
        for name, d in PRESETS.items():
            pa = preset_args(name)
            if pa.kind == "unet3d":
                u = UNet3D(pa)
                print("%-18s %-11s params %-8s devices %-5d K=%d C=%d volume %dx%dx%dx%d "
                      "in=%d classes=%d down=%s up=%s mesh %s%s"
                      % (name, "unet3d", human(u.params()), u.devices, u.K, u.C, u.B, u.D, u.H,
                         u.W, u.Cin, u.NC, u.down, u.up, d["mesh"],
                         " (train)" if u.train else ""))
                continue
            if pa.kind == "pipeline":
                p = Pipeline(pa)
                print("%-18s %-11s params %-8s devices %-5d S=%d M=%d L=%d B=%d T=%d D=%d F=%d "
                      "mesh %s (bubble %.3f)" % (name, "pipeline", human(p.params()), p.devices,
                                                 p.S, p.M, p.L, p.B, p.T, p.D, p.F, d["mesh"],
                                                 p.bubble()))
                continue
            m = Model(pa)
            extra = ""
            if m.kind == "moe":
                extra = " E=%d C=%d top-%d" % (m.E, m.C, m.k)
            print("%-18s %-11s params %-8s devices %-5d L=%d B=%d S=%d M=%d F=%d H=%d%s mesh %s%s"
                  % (name, m.kind, human(m.params()), m.devices, m.L, m.B, m.S, m.M, m.F, m.H,
                     extra, d["mesh"], " (train)" if m.train else ""))
        return 0
    if a.cmd is None:
        ap.print_usage(sys.stderr)
        return 2
    if a.cmd == "preset":
        out = a.output
        a = preset_args(a.name, a.dtype, a.train, a.sharding, a.remat)
        a.output = out
    else:
        a.kind = a.cmd
        a.dtype = a.dtype or "f32"
        a.train = bool(a.train)
    if a.kind == "unet3d":
        u = UNet3D(a)
        text, stats = build_unet(u)
        emit(a, text, unet_summary(u, stats))
        return 0
    if a.kind == "pipeline":
        for k in ("stages", "microbatches", "layers_per_stage", "microbatch_size", "seq", "model",
                  "ffn"):
            if getattr(a, k) < 1:
                raise SystemExit("gen.py: --%s must be positive" % k.replace("_", "-"))
        p = Pipeline(a)
        text, stats = build_pipeline(p)
        emit(a, text, pipeline_summary(p, stats))
        return 0
    for k in ("layers", "batch", "seq", "model", "ffn"):
        if getattr(a, k) < 1:
            raise SystemExit("gen.py: --%s must be positive" % k)
    if a.kind == "moe" and (a.experts < 1 or a.capacity < 0):
        raise SystemExit("gen.py: --experts must be positive")
    m = Model(a)
    text, stats = build(m)
    emit(a, text, summary(m, stats))
    return 0


def emit(a, text, summary_line):
    """Writes the module to -o FILE (or stdout) and its summary to stderr."""
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    print(summary_line, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
