#!/usr/bin/env python3
"""Checks tools/gen.py against gspmd: the generated benchmark models parse, partition and run.

Usage: check_gen.py GSPMD     (GSPMD: the gspmd binary, e.g. build/gspmd)

Tiny presets (tiny-transformer, tiny-moe; as training steps, forward only, and one in bf16):
generate, then `gspmd partition FILE --num-partitions N --propagate` and
`gspmd run FILE --num-partitions N --verify` must exit 0; the partitioned program must hold the
collective the sharding calls for (all-reduce for the Megatron transformer, all-to-all for MoE
dispatch); the dot FLOPs gen.py prints "as written" must equal those of the independent counter
../shared/tools/flops.py when that exists. Large presets (dense-1t-2048, moe-1t-2048 training
steps): the module stays small as text and `partition --propagate` exits 0 in under 30 s.

Pipelined Transformer (gen.py pipeline, the paper's Section 3.3: stages vectorised along a
stage dim split over the `stage` mesh axis, a buffer shifted by collective-permute): tiny ones
(tiny-pipeline S=4 M=8 forward and training step, a stage x data mesh, other formulations of the
feed and the last stage's read, bf16) and pipeline-64b-128 (128 devices) must
  - partition with --propagate --stats: exit 0, per-device FLOPs ratio 1.000 (each device
    computes only its stage), no warning, nothing computed whole, no full rematerialisation;
  - hold, in every while body of the partitioned program, at least one collective-permute (the
    shift) and no all-gather (the buffer and the weights are never gathered); the other
    collectives there are reported (an all-reduce reading the last stage's output is expected);
  - cost --json --machine tpu-v3: matmul_flops x N equals the loop FLOPs gen.py prints (while
    loops run their trip count; none unknown), and 1 - useful / (matmul_flops x N) equals the
    bubble fraction (S-1)/(M+S-1) within 1e-9;
  - (tiny) run --verify on threads, and under mpirun (--backend mpi, 4 ranks) when it exists;
    and (f32) compute what the unpipelined model computes: the output for given inputs equals
    every microbatch sent through all S x L layers in order, and with --train the loss and the
    SGD-updated weights equal those of a pure-Python backward pass (no numpy needed).
3D U-Net with spatial partitioning (gen.py unet3d: NDHWC volumes split along depth x height x
width, 3x3x3 convolutions, strided-convolution or max-pool downsampling, transposed-convolution
or broadcast-reshape upsampling, skip connections; weights replicated): tiny ones (tiny-unet3d on
8 devices, forward and training step, bf16, 4 devices with the other down/up formulations, and
volumes the mesh does not divide evenly) and unet3d-256-256 / unet3d-256-512 (256^3 volumes on
4x8x8 and 8x8x8 devices) must
  - partition with --propagate --stats: exit 0, no warning, nothing computed whole, no default
    action, no full rematerialisation; per-device FLOPs ratio 1.000 (at most a bound for uneven
    splits, whose shards are padded); at least one collective-permute, no all-to-all, and no
    all-gather (activations are never gathered; only the uneven training case, whose filter
    gradients the partitioner computes on gathered activations along the uneven dims, reports
    them instead); every collective-permute a halo, one voxel thick along some spatial dim
    (even splits);
  - cost --json --machine tpu-v3: model_flops equals the conv FLOPs gen.py prints, the
    per-site matmul FLOPs equal flops.py's count of the partitioned program (when flops.py
    exists), MFU in (0, 1]; the predicted step time, MFU and peak memory are reported;
  - (tiny) run --verify on threads (and under mpirun with 4 ranks for the 4-device case), and
    (f32 training steps) the weight gradients, read from the SGD update, agree with central
    finite differences of the loss along each weight's gradient direction.
autoshard (issue 27) on tiny-transformer and tiny-moe, their shardings ignored: its choice runs
--verify on the 8 devices as threads, and under mpirun as 2 ranks of 4 devices.
Dense Transformer with the paper's finalized 2D sharding (gen.py transformer --sharding 2d:
weights over data x model, all-gathered per layer; activations over both) and per-layer
rematerialization (--train --remat; --no-remat saves every residual instead):
  - tiny ones (4 devices data=2,model=2 and tiny-transformer on 8; forward, training steps
    with each backward form, bf16; Megatron and MoE with --remat / --no-remat) partition with
    --propagate --stats: exit 0, no warning, FLOPs ratio 1.000, nothing computed whole; with
    2d every weight stack is split N ways (per-device elements x N = its elements), and every
    loop body holds at least one all-gather per weight and a reduce-scatter, and no
    all-reduce, all-to-all or collective-permute; as-written dot FLOPs = flops.py; run
    --verify (and under mpirun on 4 ranks); the f32 2d training steps' gradients agree with
    central finite differences of the loss;
  - the variants of one training step (default, --remat, --no-remat; Megatron and 2d; and
    tiny-moe's) give the same loss and updated weights on the reference interpreter (`gspmd
    eval`, same seeded inputs, within 1e-5 relative); --remat's forward saves only each
    layer's input; executed dot FLOPs fall from the default to --remat to --no-remat;
  - the paper's dense presets (dense-64b-128 .. dense-1t-2048) as bf16 training steps with
    --sharding 2d --remat: small text, partition with the 2D pattern above, and `cost
    --machine tpu-v3` predicts a peak per device that fits 16 GiB, with one all-reduce per step
    (the loss); the Megatron form's peak, the step time and MFU are reported, not checked;
  - moe-78b-128 with --remat and --no-remat: partition without warnings and `cost` knows every
    loop's trip count (the saved stacks reach the backward loop unresharded); --remat fits;
  - gen.py rejects --sharding 2d for MoE, --remat without --train, and --remat for a pipeline.
One line per case; exit 1 if any fails.
"""
import ast
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GEN = os.path.join(ROOT, "tools", "gen.py")
FLOPS = os.path.join(os.path.dirname(ROOT), "shared", "tools", "flops.py")

# (case name, gen.py arguments, a collective the partitioned program must contain)
TINY = [
    ("tiny-transformer train", ["preset", "tiny-transformer"], "all-reduce"),
    ("tiny-transformer fwd", ["preset", "tiny-transformer", "--no-train"], "all-reduce"),
    ("tiny-moe train", ["preset", "tiny-moe"], "all-to-all"),
    ("tiny-moe fwd", ["preset", "tiny-moe", "--no-train"], "all-to-all"),
    ("tiny-moe train bf16", ["preset", "tiny-moe", "--dtype", "bf16"], "all-to-all"),
]
LARGE = [
    ("dense-1t-2048 train", ["preset", "dense-1t-2048", "--train"]),
    ("moe-1t-2048 train", ["preset", "moe-1t-2048", "--train"]),
]
# (case name, gen.py arguments, run under mpirun too, check the values against pure Python)
PIPE_TINY = [
    ("tiny-pipeline fwd", ["preset", "tiny-pipeline"], True, True),
    ("tiny-pipeline train", ["preset", "tiny-pipeline", "--train"], True, True),
    ("pipeline stage x data train", [
        "pipeline", "--stages", "4", "--microbatches", "6", "--layers-per-stage", "2",
        "--microbatch-size", "4", "--seq", "2", "--model", "8", "--ffn", "16",
        "--mesh", "stage=4,data=2", "--train"], False, True),
    ("pipeline feed=dus collect=dslice", [
        "pipeline", "--stages", "4", "--microbatches", "8", "--layers-per-stage", "2",
        "--microbatch-size", "2", "--seq", "4", "--model", "8", "--ffn", "16",
        "--mesh", "stage=4", "--feed", "dus", "--collect", "dslice"], False, True),
    ("tiny-pipeline train bf16", ["preset", "tiny-pipeline", "--train", "--dtype", "bf16"],
     False, False),
]
PIPE_LARGE = [
    ("pipeline-64b-128 fwd", ["preset", "pipeline-64b-128"]),
    ("pipeline-64b-128 train", ["preset", "pipeline-64b-128", "--train", "--dtype", "bf16"]),
]
# (case name, gen.py arguments, options): ratio: the largest per-device FLOPs ratio allowed
# (None: exactly 1.000); gather: all-gathers allowed (reported); mpi: also under mpirun; grad:
# the finite-difference check of the gradients
UNET_4 = ["unet3d", "--levels", "2", "--channels", "4", "--depth", "16", "--height", "16",
          "--width", "16", "--mesh", "d=2,h=2", "--train"]
UNET_UNEVEN = ["unet3d", "--levels", "2", "--channels", "4", "--depth", "12", "--height", "10",
               "--width", "14", "--mesh", "d=2,h=2,w=2"]
UNET_TINY = [
    ("tiny-unet3d train", ["preset", "tiny-unet3d"], {}),
    ("tiny-unet3d fwd", ["preset", "tiny-unet3d", "--no-train"], {}),
    ("tiny-unet3d train bf16", ["preset", "tiny-unet3d", "--dtype", "bf16"], {}),
    ("unet3d 4 dev conv/transpose", UNET_4, dict(mpi=True, grad=True)),
    ("unet3d 4 dev pool/resize", UNET_4 + ["--down", "pool", "--up", "resize"],
     dict(grad=True)),
    ("unet3d 8 dev pool/transpose", [
        "unet3d", "--levels", "3", "--channels", "4", "--depth", "32", "--height", "32",
        "--width", "32", "--mesh", "d=2,h=2,w=2", "--down", "pool", "--train"], {}),
    ("unet3d uneven fwd", UNET_UNEVEN, dict(ratio=1.10)),
    ("unet3d uneven train", UNET_UNEVEN + ["--train"], dict(ratio=1.10, gather=True)),
]
UNET_LARGE = [
    ("unet3d-256-256 train", ["preset", "unet3d-256-256"]),
    ("unet3d-256-512 train", ["preset", "unet3d-256-512"]),
    ("unet3d-256-512 train bf16", ["preset", "unet3d-256-512", "--dtype", "bf16"]),
    ("unet3d-256-512 fwd bf16", ["preset", "unet3d-256-512", "--no-train", "--dtype", "bf16"]),
]
# Dense Transformer with the paper's finalized 2D sharding (--sharding 2d) and per-layer
# rematerialization (--remat; --no-remat saves every residual instead).
T4 = ["transformer", "--layers", "2", "--batch", "4", "--seq", "8", "--model", "16", "--ffn",
      "32", "--heads", "4", "--mesh", "data=2,model=2"]
# (case name, gen.py arguments, options): mpi: also under mpirun; grad: the finite-difference
# check of the gradients
DENSE_TINY = [
    ("transformer 2d fwd", T4 + ["--sharding", "2d"], {}),
    ("transformer 2d train", T4 + ["--sharding", "2d", "--train"], {}),
    ("transformer 2d remat", T4 + ["--sharding", "2d", "--train", "--remat"],
     dict(mpi=True, grad=True)),
    ("transformer 2d no-remat", T4 + ["--sharding", "2d", "--train", "--no-remat"],
     dict(grad=True)),
    ("transformer remat", T4 + ["--train", "--remat"], {}),
    ("transformer no-remat", T4 + ["--train", "--no-remat"], {}),
    ("tiny-transformer 2d remat", ["preset", "tiny-transformer", "--sharding", "2d", "--remat"],
     {}),
    ("tiny-transformer 2d bf16", ["preset", "tiny-transformer", "--sharding", "2d", "--remat",
                                  "--dtype", "bf16"], {}),
    ("tiny-moe no-remat", ["preset", "tiny-moe", "--no-remat"], {}),
]
# (case name, gen.py arguments, the variants' own arguments): same loss and weights
REMAT_SAME = [
    ("transformer variants", T4 + ["--train"],
     [[], ["--remat"], ["--no-remat"], ["--sharding", "2d"], ["--sharding", "2d", "--remat"],
      ["--sharding", "2d", "--no-remat"]]),
    ("moe variants", ["preset", "tiny-moe"], [[], ["--remat"], ["--no-remat"]]),
]
DENSE_LARGE = ["dense-64b-128", "dense-128b-256", "dense-256b-512", "dense-512b-1024",
               "dense-1t-2048"]
# (case name, gen.py arguments, must fit 16 GiB)
MOE_LARGE = [
    ("moe-78b-128 remat", ["preset", "moe-78b-128", "--train", "--dtype", "bf16", "--remat"],
     True),
    ("moe-78b-128 no-remat", ["preset", "moe-78b-128", "--train", "--dtype", "bf16",
                              "--no-remat"], False),
]
REJECTED = [
    ("moe --sharding 2d", ["preset", "tiny-moe", "--sharding", "2d"], "dense transformers only"),
    ("--remat without --train", ["preset", "tiny-transformer", "--no-train", "--remat"],
     "need --train"),
    ("pipeline --remat", ["preset", "tiny-pipeline", "--remat"], "transformer and moe presets"),
]
MPI_RANKS = 4
LR = 0.01  # gen.py's SGD step
LARGE_SECONDS = 30.0
LARGE_TEXT_BYTES = 64 * 1024
TIMEOUT = 120


def run(cmd, timeout=TIMEOUT):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", "timed out after %d s" % timeout
    return rc, out, err, time.monotonic() - t0


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


def generate(args, path):
    """Runs gen.py; returns (devices, dot FLOPs as written, summary) or raises ValueError."""
    rc, _, err, _ = run([sys.executable, GEN] + args + ["-o", path])
    if rc != 0:
        raise ValueError("gen.py exited %d: %s" % (rc, last_line(err)))
    m = re.search(r"devices (\d+)", err)
    w = re.search(r"(\d+) as written", err)
    if not m or not w:
        raise ValueError("gen.py printed no summary: %s" % last_line(err))
    return int(m.group(1)), int(w.group(1)), last_line(err)


def check_tiny(gspmd, name, args, coll, tmp):
    path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".hlo")
    n, written, _ = generate(args, path)
    notes = ["%d devices" % n]
    rc, out, err, t = run([gspmd, "partition", path, "--num-partitions", str(n), "--propagate",
                           "--reduce-scatter"])
    if rc != 0:
        raise ValueError("partition exited %d: %s" % (rc, last_line(err)))
    notes.append("partition %.2fs" % t)
    if coll not in out:
        raise ValueError("the partitioned program has no %s" % coll)
    rc, out, err, t = run([gspmd, "run", path, "--num-partitions", str(n), "--verify"])
    if rc != 0:
        raise ValueError("run --verify exited %d: %s" % (rc, last_line(err) or last_line(out)))
    notes.append("run --verify %.2fs" % t)
    if os.path.exists(FLOPS):
        rc, out, err, _ = run([sys.executable, FLOPS, path])
        if rc != 0:
            raise ValueError("flops.py exited %d: %s" % (rc, last_line(err)))
        counted = int(out.split()[0])
        if counted != written:
            raise ValueError("dot FLOPs: gen.py says %d, flops.py counts %d" % (written, counted))
        notes.append("dot FLOPs %d = flops.py" % written)
    return ", ".join(notes)


def check_large(gspmd, name, args, tmp):
    path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".hlo")
    n, _, summary = generate(args, path)
    size = os.path.getsize(path)
    if size > LARGE_TEXT_BYTES:
        raise ValueError("module is %d bytes of text (limit %d)" % (size, LARGE_TEXT_BYTES))
    rc, out, err, t = run([gspmd, "partition", path, "--num-partitions", str(n), "--propagate",
                           "--reduce-scatter"])
    if rc != 0:
        raise ValueError("partition exited %d after %.1fs: %s" % (rc, t, last_line(err)))
    if t >= LARGE_SECONDS:
        raise ValueError("partition took %.1fs (limit %.0fs)" % (t, LARGE_SECONDS))
    params = re.search(r"params \d+ \(([^;)]+)", summary)
    return "%s params, %d devices, %d bytes of text, partition %.2fs" % (
        params.group(1) if params else "?", n, size, t)


# ----------------------------------------------------------------------------------------------
# Pipelined Transformer


def save_npy(path, dims, vals):
    """A little-endian f32 .npy file, written without numpy."""
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(
        "%d," % d for d in dims)
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode("latin1"))
        f.write(struct.pack("<%df" % len(vals), *vals))


def load_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError("%s is not an .npy file" % path)
    if data[6] == 1:
        n, off = struct.unpack("<H", data[8:10])[0], 10
    else:
        n, off = struct.unpack("<I", data[8:12])[0], 12
    h = ast.literal_eval(data[off:off + n].decode("latin1"))
    if h["descr"] != "<f4" or h["fortran_order"]:
        raise ValueError("%s: expected C-order <f4, not %s" % (path, h))
    cnt = 1
    for d in h["shape"]:
        cnt *= d
    return list(h["shape"]), list(struct.unpack("<%df" % cnt, data[off + n:off + n + 4 * cnt]))


def pipe_dims(summary):
    """S, M, L, B, T, D, F, train from gen.py's pipeline summary."""
    m = re.search(r"pipeline( train)?: stages (\d+), microbatches (\d+), layers per stage (\d+) "
                  r"\(\d+ layers\), microbatch \[(\d+),(\d+),(\d+)\], ffn (\d+)", summary)
    if not m:
        raise ValueError("no pipeline dims in gen.py's summary: %s" % summary)
    return [int(g) for g in m.groups()[1:]] + [bool(m.group(1))]


def pipe_flops(summary):
    """(useful, executed, bubble as printed) from gen.py's pipeline summary."""
    u = re.search(r"useful model FLOPs (\d+)", summary)
    e = re.search(r"executed loop FLOPs (\d+)", summary)
    b = re.search(r"bubble fraction \(S-1\)/\(M\+S-1\) = \d+/\d+ = ([0-9.]+)", summary)
    if not (u and e and b):
        raise ValueError("gen.py's summary lacks the pipeline FLOPs: %s" % summary)
    return int(u.group(1)), int(e.group(1)), float(b.group(1))


def while_bodies(text):
    """{body computation name: its text} for every while of a (partitioned) module."""
    names = set(re.findall(r"\bwhile\(.*?\bbody=%?([\w.\-]+)", text))
    comps, cur, lines = {}, None, []
    for line in text.splitlines():
        h = re.match(r"^(?:ENTRY\s+)?%([\w.\-]+)\s*\(", line)
        if h and line.rstrip().endswith("{"):
            cur, lines = h.group(1), []
        elif line.startswith("}") and cur is not None:
            comps[cur] = "\n".join(lines)
            cur = None
        elif cur is not None:
            lines.append(line)
    return {n: comps.get(n, "") for n in sorted(names)}


COLLECTIVES = ("collective-permute", "all-gather", "all-reduce", "reduce-scatter", "all-to-all",
               "collective-broadcast")


def count_collectives(body):
    counts = {}
    for c in COLLECTIVES:
        k = len(re.findall(r"\s%s(?:-start)?\(" % re.escape(c), body))
        if k:
            counts[c] = k
    return counts


def permuted_elements(body):
    """Elements the collective-permutes of a computation move (per device, summed)."""
    n = 0
    for dims in re.findall(r"=\s*\w+\[([\d,]*)\]\S*\s+collective-permute(?:-start)?\(", body):
        k = 1
        for d in dims.split(","):
            k *= int(d) if d else 1
        n += k
    return n


def pipe_reference(dims, x, w1, w2):
    """Every microbatch row through all S x L MLP layers in order (pure Python, float64); with
    train also the loss mean(y^2) and the weight gradients, as gen.py's step computes them."""
    S, M, L, B, T, D, F, train = dims
    rows = M * B * T
    y = []
    g1, g2 = [0.0] * len(w1), [0.0] * len(w2)
    loss = 0.0
    n_el = rows * D
    for r in range(rows):
        v = x[r * D:(r + 1) * D]
        tape = []
        for o in range(S * L):  # layer o = s * L + l
            h0 = [sum(v[d] * w1[(o * D + d) * F + f] for d in range(D)) for f in range(F)]
            h = [max(0.0, a) for a in h0]
            tape.append((o, v, h0, h))
            v = [v[d] + sum(h[f] * w2[(o * F + f) * D + d] for f in range(F)) for d in range(D)]
        y += v
        if not train:
            continue
        loss += sum(a * a for a in v)
        g = [2.0 * a / n_el for a in v]
        for o, xin, h0, h in reversed(tape):
            for f in range(F):
                for d in range(D):
                    g2[(o * F + f) * D + d] += h[f] * g[d]
            dh = [sum(g[d] * w2[(o * F + f) * D + d] for d in range(D)) if h0[f] > 0 else 0.0
                  for f in range(F)]
            for d in range(D):
                for f in range(F):
                    g1[(o * D + d) * F + f] += xin[d] * dh[f]
            g = [g[d] + sum(dh[f] * w1[(o * D + d) * F + f] for f in range(F)) for d in range(D)]
    return y, loss / n_el, g1, g2


def close(got, want, rel, what):
    scale = max([abs(a) for a in want] + [1e-30])
    err = max(abs(a - b) for a, b in zip(got, want))
    if len(got) != len(want) or err > rel * scale:
        raise ValueError("%s: max error %.3g of max |value| %.3g (limit %.1g relative)"
                         % (what, err, scale, rel))
    return err / scale


def check_semantics(gspmd, path, n, dims, tmp):
    """Runs the pipelined module on given inputs and compares with the unpipelined model."""
    S, M, L, B, T, D, F, train = dims
    rng = random.Random(1)
    x = [rng.gauss(0, 1) for _ in range(M * B * T * D)]
    w1 = [rng.gauss(0, 1) / D ** 0.5 for _ in range(S * L * D * F)]
    w2 = [rng.gauss(0, 1) / F ** 0.5 for _ in range(S * L * F * D)]
    # the values the run sees are the f32 ones
    x, w1, w2 = ([struct.unpack("<f", struct.pack("<f", v))[0] for v in a] for a in (x, w1, w2))
    d = os.path.join(tmp, "sem")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name, shape, vals in (("x", [M, B, T, D], x), ("w1s", [S, L, D, F], w1),
                              ("w2s", [S, L, F, D], w2)):
        save_npy(os.path.join(d, name + ".npy"), shape, vals)
    out = os.path.join(d, "out")
    rc, o, err, _ = run([gspmd, "run", path, "--num-partitions", str(n), "--output-dir", out]
                        + sum([["--input", "%s=%s" % (nm, os.path.join(d, nm + ".npy"))]
                               for nm in ("x", "w1s", "w2s")], []))
    if rc != 0:
        raise ValueError("run --input exited %d: %s" % (rc, last_line(err) or last_line(o)))
    y, loss, g1, g2 = pipe_reference(dims, x, w1, w2)
    if not train:
        shape, got = load_npy(os.path.join(out, "out0.npy"))
        if shape != [M, B, T, D]:
            raise ValueError("output shape %s, expected %s" % (shape, [M, B, T, D]))
        e = close(got, y, 1e-5, "pipelined output vs all layers in order")
        return "output = %d microbatches through %d layers in order (rel. error %.1e)" % (
            M, S * L, e)
    _, got_loss = load_npy(os.path.join(out, "out0.npy"))
    _, n1 = load_npy(os.path.join(out, "out1.npy"))
    _, n2 = load_npy(os.path.join(out, "out2.npy"))
    close(got_loss, [loss], 1e-5, "loss")
    e1 = close([(a - b) / LR for a, b in zip(w1, n1)], g1, 1e-3, "dW1 (from the SGD update)")
    e2 = close([(a - b) / LR for a, b in zip(w2, n2)], g2, 1e-3, "dW2 (from the SGD update)")
    return "loss and SGD-updated weights = pure-Python backward (rel. error %.1e)" % max(e1, e2)


def partition_stats(gspmd, path, n, tiny):
    """`partition --propagate --stats` of path for n devices: (program, stats, seconds); a large
    module must partition within LARGE_SECONDS."""
    rc, out, err, t = run([gspmd, "partition", path, "--num-partitions", str(n), "--propagate",
                           "--reduce-scatter", "--stats"])
    if rc != 0:
        raise ValueError("partition exited %d: %s" % (rc, last_line(err)))
    if not tiny and t >= LARGE_SECONDS:
        raise ValueError("partition took %.1fs (limit %.0fs)" % (t, LARGE_SECONDS))
    return out, err, t


def check_pipeline(gspmd, name, args, tmp, tiny=True, mpi=False, semantics=False):
    path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".hlo")
    n, written, summary = generate(args, path)
    dims = pipe_dims(summary)
    S, M = dims[0], dims[1]
    useful, executed, bubble = pipe_flops(summary)
    notes = ["S=%d M=%d, %d devices" % (S, M, n)]
    # gen.py's own arithmetic: executed = useful x (M + S - 1) / M
    if useful * (M + S - 1) != executed * M or abs(bubble - (S - 1) / (M + S - 1)) > 1e-9:
        raise ValueError("gen.py's FLOPs disagree: useful %d, executed %d, bubble %.9f"
                         % (useful, executed, bubble))
    if not tiny:
        size = os.path.getsize(path)
        if size > LARGE_TEXT_BYTES:
            raise ValueError("module is %d bytes of text (limit %d)" % (size, LARGE_TEXT_BYTES))
    # 1. partition: each device computes only its stage; the shift is a collective-permute
    out, err, t = partition_stats(gspmd, path, n, tiny)
    ratio = re.search(r"per-device FLOPs: .*ratio ([0-9.]+)", err)
    if not ratio or ratio.group(1) != "1.000":
        raise ValueError("per-device FLOPs ratio %s, expected 1.000"
                         % (ratio.group(1) if ratio else "missing"))
    warn = [l for l in err.splitlines() if "warning" in l]
    if warn:
        raise ValueError("partition warns: %s" % warn[0])
    for what in ("default action", "computed whole", "full remat"):
        m = re.search(r"^%s\s+(\d+)" % what, err, re.M)
        if not m or m.group(1) != "0":
            raise ValueError("%s: %s" % (what, m.group(1) if m else "not printed"))
    bodies = while_bodies(out)
    if not bodies:
        raise ValueError("the partitioned program has no while loop")
    # the shift moves one slot of the buffer per device: [1, B / data, T, D]
    X = re.search(r"devices \d+ \([^)]*\bdata=(\d+)", summary)
    X = int(X.group(1)) if X else 1
    slot = -(-dims[3] // X) * dims[4] * dims[5]
    desc = []
    for body, text in bodies.items():
        c = count_collectives(text)
        if c.get("collective-permute", 0) < 1:
            raise ValueError("while body %s has no collective-permute (%s)" % (body, c or "none"))
        if c.get("all-gather", 0):
            raise ValueError("while body %s all-gathers (%s)" % (body, c))
        moved = permuted_elements(text)
        if moved > slot:
            raise ValueError("while body %s: its %d collective-permutes move %d elements per "
                             "device, more than the one buffer slot of %d the shift needs"
                             % (body, c["collective-permute"], moved, slot))
        desc.append("%s: %s" % (body, ", ".join("%d %s" % (k, c_) for c_, k in c.items())))
    notes.append("ratio 1.000, partition %.2fs; in the loops: %s" % (t, "; ".join(desc)))
    # 3. the cost model: executed FLOPs and the bubble fraction
    rc, out, err, _ = run([gspmd, "cost", path, "--num-partitions", str(n), "--json",
                           "--machine", "tpu-v3"])
    if rc != 0:
        raise ValueError("cost exited %d: %s" % (rc, last_line(err)))
    cost = json.loads(out)
    mf = cost["matmul_flops"]
    if cost.get("unknown_trip_counts", 0):
        raise ValueError("cost: %d while loops of unknown trip count" % cost["unknown_trip_counts"])
    if (mf * n != executed) if isinstance(mf, int) else (abs(mf * n - executed) > 1e-12 * executed):
        raise ValueError("cost: matmul_flops %r x %d = %r, gen.py executes %d" % (
            mf, n, mf * n, executed))
    cb = 1.0 - useful / float(mf * n)
    if abs(cb - (S - 1) / float(M + S - 1)) > 1e-9:
        raise ValueError("cost: 1 - useful/(matmul_flops x N) = %.12f, bubble (S-1)/(M+S-1) = "
                         "%.12f" % (cb, (S - 1) / float(M + S - 1)))
    notes.append("cost matmul_flops x %d = %d = executed, bubble %.9f = %d/%d" % (
        n, executed, cb, S - 1, M + S - 1))
    if os.path.exists(FLOPS):
        rc, out, err, _ = run([sys.executable, FLOPS, path])
        if rc != 0 or int(out.split()[0]) != written:
            raise ValueError("dot FLOPs as written: gen.py %d, flops.py %s" % (
                written, out.split()[0] if rc == 0 else "failed"))
    if not tiny:
        return ", ".join(notes)
    # 2. run on threads (and MPI), verified against the reference interpreter
    notes.extend(run_verified(gspmd, path, n, mpi))
    if semantics:
        notes.append(check_semantics(gspmd, path, n, dims, tmp))
    return ", ".join(notes)


# ----------------------------------------------------------------------------------------------
# 3D U-Net, spatially partitioned


def stats_collectives(err):
    """{collective: (count, bytes)} from partition --stats."""
    got = {}
    for c in COLLECTIVES:
        m = re.search(r"^%s\s+(\d+)\s+(\d+) bytes" % re.escape(c), err, re.M)
        if m:
            got[c] = (int(m.group(1)), int(m.group(2)))
    return got


def halo_thickness(text):
    """The thickest collective-permute of a partitioned NDHWC program: for each permute the
    smallest of its spatial dims (1..3), the largest of those (1: every permute a face)."""
    worst = 0
    for dims in re.findall(r"=\s*\w+\[([\d,]*)\]\S*\s+collective-permute(?:-start)?\(", text):
        d = [int(x) for x in dims.split(",") if x]
        worst = max(worst, min(d[1:4]) if len(d) == 5 else max(d + [1]))
    return worst


def entry_params(text):
    """[(name, dims)] of the entry computation's f32 parameters, in order."""
    entry = text[text.index("ENTRY"):]
    return [(m.group(1), [int(d) for d in m.group(2).split(",") if d]) for m in
            re.finditer(r"%([\w.\-]+) = f32\[([\d,]*)\]\S* parameter\((\d+)\)", entry)]


def unet_gradients(gspmd, path, n, tmp, eps=1e-3, rel=2e-2):
    """Each weight's gradient (read from the SGD update w - LR dw) against a central finite
    difference of the loss along it: (L(w + eps v) - L(w - eps v)) / 2 eps = dw . v for
    v = dw scaled to the weight's size. Independent of how gen.py writes the backward pass."""
    params = entry_params(open(path).read())
    rng = random.Random(3)

    def f32(a):
        return [struct.unpack("<f", struct.pack("<f", v))[0] for v in a]

    vals = {}
    for name, dims in params:
        cnt = 1
        for d in dims:
            cnt *= d
        scale = 1.0 if name == "x" else (2.0 * dims[-1] / cnt) ** 0.5  # He: 2 / fan-in
        vals[name] = f32([rng.gauss(0, 1) * scale for _ in range(cnt)])
    k = [0]

    def run_with(v, outputs):
        k[0] += 1
        d = os.path.join(tmp, "grad%d" % k[0])
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        args = []
        for name, dims in params:
            f = os.path.join(d, name + ".npy")
            save_npy(f, dims, v[name])
            args += ["--input", "%s=%s" % (name, f)]
        rc, o, err, _ = run([gspmd, "run", path, "--num-partitions", str(n), "--output-dir",
                             os.path.join(d, "out")] + args)
        if rc != 0:
            raise ValueError("run --input exited %d: %s" % (rc, last_line(err) or last_line(o)))
        return [load_npy(os.path.join(d, "out", "out%d.npy" % i))[1] for i in range(outputs)]

    weights = [nm for nm, _ in params if nm != "x"]
    outs = run_with(vals, 1 + len(weights))
    worst = 0.0
    for i, nm in enumerate(weights):
        dw = [(a - b) / LR for a, b in zip(vals[nm], outs[1 + i])]
        norm = (sum(a * a for a in dw) / len(dw)) ** 0.5
        wsz = (sum(a * a for a in vals[nm]) / len(dw)) ** 0.5
        if norm == 0:
            raise ValueError("the gradient of %s is zero" % nm)
        v = [a / norm * wsz for a in dw]
        want = sum(a * b for a, b in zip(dw, v))
        lp = run_with(dict(vals, **{nm: f32([a + eps * b for a, b in zip(vals[nm], v)])}), 1)
        lm = run_with(dict(vals, **{nm: f32([a - eps * b for a, b in zip(vals[nm], v)])}), 1)
        got = (lp[0][0] - lm[0][0]) / (2 * eps)
        e = abs(got - want) / abs(want)
        if e > rel:
            raise ValueError("d loss / d %s along its gradient: %.6g from the SGD update, %.6g "
                             "by finite differences (rel. error %.2g, limit %g)"
                             % (nm, want, got, e, rel))
        worst = max(worst, e)
    return "gradients of %d weights = finite differences (rel. error <= %.1e)" % (
        len(weights), worst)


def run_verified(gspmd, path, n, mpi):
    """`run --verify` on n device threads, and on n MPI ranks when asked and mpirun exists."""
    rc, out, err, t = run([gspmd, "run", path, "--num-partitions", str(n), "--verify"])
    if rc != 0:
        raise ValueError("run --verify exited %d: %s" % (rc, last_line(err) or last_line(out)))
    notes = ["run --verify %.2fs" % t]
    if mpi and shutil.which("mpirun") and n == MPI_RANKS:
        notes.append(mpirun_verify(gspmd, path, n))
    return notes


def mpirun_verify(gspmd, path, n):
    """`run --verify` of path on n MPI ranks (Open MPI's own allocations are not leak-checked)."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               ASAN_OPTIONS="detect_leaks=0")
    t0 = time.monotonic()
    try:
        p = subprocess.run([shutil.which("mpirun"), "--oversubscribe", "-np", str(n), gspmd, "run",
                            path, "--num-partitions", str(n), "--backend", "mpi", "--verify"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT, env=env)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", "timed out after %d s" % TIMEOUT
    if rc != 0 or "matches the reference" not in out:
        raise ValueError("mpirun -np %d run --verify exited %d: %s"
                         % (n, rc, last_line(err) or last_line(out)))
    return "mpirun -np %d --verify %.2fs" % (n, time.monotonic() - t0)


# autoshard on the tiny models (issue 27): (case name, preset, mesh)
AUTO_TINY = [
    ("auto tiny-transformer", "tiny-transformer", "data=2,model=4"),
    ("auto tiny-moe", "tiny-moe", "data=2,expert=4"),
]


def check_auto(gspmd, name, preset, mesh, tmp):
    """The preset with its shardings ignored, autoshard's choice on the mesh: run --verify on
    its 8 devices as threads, and under mpirun (2 ranks of 4 devices) when it exists."""
    path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".hlo")
    n, _, _ = generate(["preset", preset], path)
    auto = path + ".auto.hlo"
    # (a solve of some 90,000 variables: slow under the sanitizers, on a shared machine)
    rc, _, err, t = run([gspmd, "autoshard", path, "--mesh", mesh, "--ignore-shardings",
                         "--machine", "h100", "-o", auto], timeout=600)
    if rc != 0:
        raise ValueError("autoshard exited %d: %s" % (rc, last_line(err)))
    notes = ["autoshard %.2fs" % t]
    rc, out, err, t = run([gspmd, "run", auto, "--num-partitions", str(n), "--no-propagate",
                           "--verify"])
    if rc != 0 or "matches the reference" not in out:
        raise ValueError("run --verify exited %d: %s" % (rc, last_line(err) or last_line(out)))
    notes.append("run --verify %.2fs on %d threads" % (t, n))
    if shutil.which("mpirun"):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   ASAN_OPTIONS="detect_leaks=0")
        t0 = time.monotonic()
        try:
            p = subprocess.run([shutil.which("mpirun"), "--oversubscribe", "-np", "2", gspmd,
                                "run", auto, "--num-partitions", str(n), "--no-propagate",
                                "--backend", "mpi", "--devices-per-rank", str(n // 2),
                                "--verify"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=TIMEOUT, env=env)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            rc, out, err = 124, "", "timed out after %d s" % TIMEOUT
        if rc != 0 or "matches the reference" not in out:
            raise ValueError("mpirun -np 2 run --verify exited %d: %s"
                             % (rc, last_line(err) or last_line(out)))
        notes.append("mpirun -np 2 (%d devices each) --verify %.2fs"
                     % (n // 2, time.monotonic() - t0))
    return ", ".join(notes)


def check_unet(gspmd, name, args, tmp, tiny=True, ratio=None, gather=False, mpi=False,
               grad=False):
    path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".hlo")
    n, written, summary = generate(args, path)
    m = re.search(r"conv FLOPs/step (\d+)", summary)
    if not m or int(m.group(1)) != written:
        raise ValueError("gen.py's summary: conv FLOPs/step %s, %d as written"
                         % (m.group(1) if m else "missing", written))
    mesh = re.search(r"devices \d+ \(([^)]*)\)", summary)
    notes = ["%d devices (%s)" % (n, mesh.group(1) if mesh else "?")]
    size = os.path.getsize(path)
    if not tiny and size > LARGE_TEXT_BYTES:
        raise ValueError("module is %d bytes of text (limit %d)" % (size, LARGE_TEXT_BYTES))
    # 1. partition: halo exchanges, no gathered activation, nothing computed whole
    out, err, t = partition_stats(gspmd, path, n, tiny)
    r = re.search(r"per-device FLOPs: .*ratio ([0-9.]+)", err)
    if not r:
        raise ValueError("partition --stats printed no FLOPs ratio")
    if (r.group(1) != "1.000") if ratio is None else (float(r.group(1)) > ratio):
        raise ValueError("per-device FLOPs ratio %s, expected %s" % (
            r.group(1), "1.000" if ratio is None else "at most %.3f" % ratio))
    warn = [l for l in err.splitlines() if "warning" in l]
    if warn:
        raise ValueError("partition warns (%d): %s" % (len(warn), warn[0]))
    for what in ("default action", "computed whole", "full remat"):
        m = re.search(r"^%s\s+(\d+)" % what, err, re.M)
        if not m or m.group(1) != "0":
            raise ValueError("%s: %s" % (what, m.group(1) if m else "not printed"))
    coll = stats_collectives(err)
    if coll.get("collective-permute", (0, 0))[0] < 1:
        raise ValueError("no collective-permute (no halo exchange): %s" % coll)
    if coll.get("all-to-all", (0, 0))[0]:
        raise ValueError("%d all-to-alls" % coll["all-to-all"][0])
    if coll.get("all-gather", (0, 0))[0] and not gather:
        raise ValueError("%d all-gathers (%d bytes): an activation gathered, not halo-exchanged"
                         % coll["all-gather"])
    thick = halo_thickness(out)
    if ratio is None and thick > 1:
        raise ValueError("a collective-permute %d voxels thick in every spatial dim: more than "
                         "a halo" % thick)
    notes.append("ratio %s, partition %.2fs, %s; halos %d voxel%s thick" % (
        r.group(1), t, ", ".join("%d %s" % (c[0], k) for k, c in coll.items() if c[0]),
        thick, "" if thick == 1 else "s"))
    # 3. the cost model and the independent FLOP counter
    program = os.path.join(tmp, "p.hlo")
    with open(program, "w") as f:
        f.write(out)
    rc, o, e, _ = run([gspmd, "cost", path, "--num-partitions", str(n), "--json", "--machine",
                       "tpu-v3"])
    if rc != 0:
        raise ValueError("cost exited %d: %s" % (rc, last_line(e)))
    cost = json.loads(o)
    if cost["model_flops"] != written:
        raise ValueError("cost: model_flops %r, gen.py's conv FLOPs %d" % (cost["model_flops"],
                                                                           written))
    if not 0 < cost.get("mfu", 0) <= 1:
        raise ValueError("cost: MFU %r outside (0, 1]" % cost.get("mfu"))
    if os.path.exists(FLOPS):
        rc, o, e, _ = run([sys.executable, FLOPS, path])
        if rc != 0 or int(o.split()[0]) != written:
            raise ValueError("conv FLOPs as written: gen.py %d, flops.py %s" % (
                written, o.split()[0] if rc == 0 else "failed"))
        rc, o, e, _ = run([sys.executable, FLOPS, program])
        if rc != 0:
            raise ValueError("flops.py exited %d on the partitioned program" % rc)
        if abs(cost["site_matmul_flops"] - int(o.split()[0])) > 1e-9 * int(o.split()[0]):
            raise ValueError("cost: site_matmul_flops %r, flops.py counts %s in the partitioned "
                             "program" % (cost["site_matmul_flops"], o.split()[0]))
    notes.append("tpu-v3: step %.4g s, MFU %.1f%%, peak %.1f MiB%s" % (
        cost["step_s"], 100 * cost["mfu"], cost["peak_bytes"] / 2.0 ** 20,
        ", site FLOPs = flops.py" if os.path.exists(FLOPS) else ""))
    if not tiny:
        return ", ".join(notes)
    # 2. run, verified against the reference interpreter
    notes.extend(run_verified(gspmd, path, n, mpi))
    if grad:
        notes.append(unet_gradients(gspmd, path, n, tmp))
    return ", ".join(notes)


# ----------------------------------------------------------------------------------------------
# Dense Transformer: the paper's finalized 2D sharding and per-layer rematerialization


def arrays(text, entry_only=True):
    """[(name, dtype, dims)] of a module's entry parameters, in order."""
    entry = text[text.index("ENTRY"):] if entry_only else text
    return [(m.group(1), m.group(2), [int(d) for d in m.group(3).split(",") if d]) for m in
            re.finditer(r"%([\w.\-]+) = (\w+)\[([\d,]*)\]\S* parameter\(\d+\)", entry)]


def numel(dims):
    k = 1
    for d in dims:
        k *= d
    return k


def check_2d_collectives(out, n_weights):
    """The paper's 2D pattern in every loop body of the partitioned program: at least one
    all-gather per weight (each layer all-gathers its weights along `data`) and a
    reduce-scatter (dots producing the model dim, weight gradients), no all-reduce (nothing
    summed whole), no all-to-all or collective-permute (no resharding by moving shards)."""
    bodies = while_bodies(out)
    if not bodies:
        raise ValueError("the partitioned program has no while loop")
    desc = []
    for body, text in bodies.items():
        c = count_collectives(text)
        bad = [k for k in ("all-reduce", "all-to-all", "collective-permute") if c.get(k)]
        if bad or c.get("all-gather", 0) < n_weights or not c.get("reduce-scatter"):
            raise ValueError("while body %s: %s (want >= %d all-gathers, reduce-scatters, no "
                             "%s)" % (body, c or "no collectives", n_weights, ", ".join(bad)
                                      or "all-reduce"))
        desc.append("%s: %s" % (body, ", ".join("%d %s" % (k, c_) for c_, k in c.items())))
    return "; ".join(desc)


def check_weights_2d(path, out, n):
    """Each device holds 1/n of every weight stack (split over data x model, not replicated
    along either axis): per-device elements x n = the stack's elements."""
    whole = {nm: numel(d) for nm, _, d in arrays(open(path).read()) if nm != "x"}
    part = {nm: numel(d) for nm, _, d in arrays(out) if nm in whole}
    if not whole or set(part) != set(whole):
        raise ValueError("weight parameters %s, partitioned %s" % (sorted(whole), sorted(part)))
    for nm in whole:
        if part[nm] * n != whole[nm]:
            raise ValueError("%s: %d of %d elements per device on %d devices (not split over "
                             "both axes)" % (nm, part[nm], whole[nm], n))
    return "%d weight stacks split %d ways" % (len(whole), n)


def check_dense(gspmd, name, args, tmp, mpi=False, grad=False):
    path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".hlo")
    n, written, summary = generate(args, path)
    two_d = "sharding 2d" in summary
    notes = ["%d devices" % n]
    out, err, t = partition_stats(gspmd, path, n, True)
    r = re.search(r"per-device FLOPs: .*ratio ([0-9.]+)", err)
    if not r or r.group(1) != "1.000":
        raise ValueError("per-device FLOPs ratio %s, expected 1.000"
                         % (r.group(1) if r else "missing"))
    warn = [l for l in err.splitlines() if "warning" in l]
    if warn:
        raise ValueError("partition warns: %s" % warn[0])
    for what in ("default action", "computed whole", "full remat"):
        m = re.search(r"^%s\s+(\d+)" % what, err, re.M)
        if not m or m.group(1) != "0":
            raise ValueError("%s: %s" % (what, m.group(1) if m else "not printed"))
    notes.append("ratio 1.000, partition %.2fs" % t)
    if two_d:
        notes.append(check_weights_2d(path, out, n))
        notes.append("in the loops: " + check_2d_collectives(out, 6))
    if os.path.exists(FLOPS):
        rc, o, e, _ = run([sys.executable, FLOPS, path])
        if rc != 0 or int(o.split()[0]) != written:
            raise ValueError("dot FLOPs as written: gen.py %d, flops.py %s" % (
                written, o.split()[0] if rc == 0 else "failed"))
        notes.append("dot FLOPs = flops.py")
    notes.extend(run_verified(gspmd, path, n, mpi))
    if grad:
        notes.append(unet_gradients(gspmd, path, n, tmp))
    return ", ".join(notes)


def random_inputs(path, d, seed):
    """Seeded f32 values for every entry parameter of path (x ~ N(0,1), a weight stack
    [L, K, ...] ~ N(0, 1/K)), written to d; the --input arguments that pass them."""
    rng = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    args = []
    for nm, dt, dims in arrays(open(path).read()):
        if dt != "f32":
            raise ValueError("parameter %s is %s, not f32" % (nm, dt))
        cnt = numel(dims)
        scale = 1.0 if nm == "x" else dims[1] ** -0.5  # [L, fan-in, ...]
        f = os.path.join(d, nm + ".npy")
        save_npy(f, dims, [rng.gauss(0, 1) * scale for _ in range(cnt)])
        args += ["--input", "%s=%s" % (nm, f)]
    return args


def check_remat_same(gspmd, name, base, variants, tmp, rel=1e-5):
    """The training step's variants (sharding, remat) compute the same loss and updated weights
    on the reference interpreter (`gspmd eval`, same inputs), each within rel of the first's
    largest value, and with rematerialization the forward saves only each layer's input; the
    executed dot FLOPs fall from the default (whole forward recomputed) to --remat (only what
    the gradients read) to --no-remat (nothing recomputed)."""
    ref, flops, bitwise, worst = None, {}, True, 0.0
    for k, extra in enumerate(variants):
        path = os.path.join(tmp, "%s_%d.hlo" % (re.sub(r"\W+", "_", name), k))
        _, _, summary = generate(base + extra, path)
        ex = re.search(r"(\d+) per step executed", summary)
        flops[" ".join(extra)] = int(ex.group(1))
        if "--remat" in extra:
            saved = re.search(r"the forward saves (\d+) elements per layer", summary)
            x = [d for nm, _, d in arrays(open(path).read()) if nm == "x"][0]
            if not saved or int(saved.group(1)) != numel(x):
                raise ValueError("%s: the forward saves %s elements per layer, not the layer "
                                 "input's %d" % (extra, saved.group(1) if saved else "?",
                                                 numel(x)))
        d = os.path.join(tmp, "same%d" % k)
        shutil.rmtree(d, ignore_errors=True)
        inputs = random_inputs(path, os.path.join(d, "in"), 5)
        rc, o, err, _ = run([gspmd, "eval", path, "--output-dir", os.path.join(d, "out")] +
                            inputs)
        if rc != 0:
            raise ValueError("eval %s exited %d: %s" % (extra, rc, last_line(err)))
        outs = []
        i = 0
        while os.path.exists(os.path.join(d, "out", "out%d.npy" % i)):
            outs.append(load_npy(os.path.join(d, "out", "out%d.npy" % i)))
            i += 1
        if ref is None:
            ref = outs
            if not all(math.isfinite(v) for _, a in outs for v in a):
                raise ValueError("%s: non-finite outputs" % extra)
            continue
        if [s_ for s_, _ in outs] != [s_ for s_, _ in ref]:
            raise ValueError("%s: output shapes %s, expected %s" % (
                extra, [s_ for s_, _ in outs], [s_ for s_, _ in ref]))
        for j, ((_, a), (_, b)) in enumerate(zip(outs, ref)):
            bitwise = bitwise and a == b
            worst = max(worst, close(a, b, rel, "%s out%d vs %s" % (
                " ".join(extra) or "default", j, " ".join(variants[0]) or "default")))
    for pre in sorted(set(v.replace("--remat", "").replace("--no-remat", "").strip()
                          for v in flops)):
        f = [flops.get((pre + " " + r).strip()) for r in ("", "--remat", "--no-remat")]
        if None not in f and not f[0] > f[1] > f[2]:
            raise ValueError("%sexecuted dot FLOPs default %d, --remat %d, --no-remat %d: "
                             "expected decreasing" % (pre and pre + ": ", f[0], f[1], f[2]))
    return "%d variants agree (%s), executed dot FLOPs %s" % (
        len(variants), "bitwise" if bitwise else "max rel. error %.1e" % worst,
        ", ".join("%s %d" % (k or "default", v) for k, v in flops.items()))


def check_dense_large(gspmd, name, preset, tmp):
    """A paper-sized dense preset as a bf16 training step with --sharding 2d --remat: small
    text, partitions quickly with the 2D pattern, and its predicted peak per device fits a TPU
    v3 core (`cost --machine tpu-v3`); the Megatron form's peak is reported beside it."""
    path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".hlo")
    args = ["preset", preset, "--train", "--dtype", "bf16"]
    n, _, summary = generate(args + ["--sharding", "2d", "--remat"], path)
    size = os.path.getsize(path)
    if size > LARGE_TEXT_BYTES:
        raise ValueError("module is %d bytes of text (limit %d)" % (size, LARGE_TEXT_BYTES))
    out, err, t = partition_stats(gspmd, path, n, False)
    if [l for l in err.splitlines() if "warning" in l]:
        raise ValueError("partition warns: %s" % [l for l in err.splitlines()
                                                  if "warning" in l][0])
    check_weights_2d(path, out, n)
    check_2d_collectives(out, 6)
    model = re.search(r"model FLOPs/step ([0-9.e+]+)", summary).group(1)
    peaks = []
    for p in (path, os.path.join(tmp, "megatron.hlo")):
        if p != path:
            generate(args, p)
        rc, o, e, _ = run([gspmd, "cost", p, "--num-partitions", str(n), "--json", "--machine",
                           "tpu-v3", "--model-flops", model])
        if rc != 0:
            raise ValueError("cost exited %d: %s" % (rc, last_line(e)))
        c = json.loads(o)
        peaks.append(c)
    c, meg = peaks
    if c.get("unknown_trip_counts", 0):
        raise ValueError("cost: %d while loops of unknown trip count" % c["unknown_trip_counts"])
    if not c["fits"] or c["peak_bytes"] > 16 * 2 ** 30:
        raise ValueError("peak %.2f GiB per device does not fit a 16 GiB TPU v3 core"
                         % (c["peak_bytes"] / 2.0 ** 30))
    if c["collectives"]["all-reduce"]["count"] != 1:
        raise ValueError("%d all-reduces per step (only the loss's expected)"
                         % c["collectives"]["all-reduce"]["count"])
    return ("%d devices, %d bytes, partition %.2fs; tpu-v3: peak %.2f GiB (megatron %.1f GiB), "
            "step %.3g s, MFU %.1f%% (megatron %.3g s, %.1f%%)" % (
                n, size, t, c["peak_bytes"] / 2.0 ** 30, meg["peak_bytes"] / 2.0 ** 30,
                c["step_s"], 100 * c["mfu"], meg["step_s"], 100 * meg["mfu"]))


def check_moe_large(gspmd, name, args, tmp, fits):
    """A paper-sized MoE preset with --remat or --no-remat: partitions without warnings, the
    saved stacks need no resharding at the backward loop (`cost` knows both loops' trip counts:
    its init is the tuple gen.py wrote), and with --remat the predicted peak fits 16 GiB."""
    path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".hlo")
    n, _, summary = generate(args, path)
    out, err, t = partition_stats(gspmd, path, n, False)
    if [l for l in err.splitlines() if "warning" in l]:
        raise ValueError("partition warns: %s" % [l for l in err.splitlines()
                                                  if "warning" in l][0])
    model = re.search(r"model FLOPs/step ([0-9.e+]+)", summary).group(1)
    rc, o, e, _ = run([gspmd, "cost", path, "--num-partitions", str(n), "--json", "--machine",
                       "tpu-v3", "--model-flops", model])
    if rc != 0:
        raise ValueError("cost exited %d: %s" % (rc, last_line(e)))
    c = json.loads(o)
    if c.get("unknown_trip_counts", 0):
        raise ValueError("cost: %d while loops of unknown trip count (a saved stack resharded "
                         "before the backward loop?)" % c["unknown_trip_counts"])
    if fits and not c["fits"]:
        raise ValueError("peak %.2f GiB per device does not fit 16 GiB"
                         % (c["peak_bytes"] / 2.0 ** 30))
    return "%d devices, partition %.2fs; tpu-v3: peak %.2f GiB, step %.3g s, MFU %.1f%%" % (
        n, t, c["peak_bytes"] / 2.0 ** 30, c["step_s"], 100 * c["mfu"])


def check_rejected(args, message):
    rc, _, err, _ = run([sys.executable, GEN] + args + ["-o", os.devnull])
    if rc == 0 or message not in err:
        raise ValueError("gen.py %s: exit %d, %r (want an error saying %r)"
                         % (" ".join(args), rc, last_line(err), message))
    return "rejected: %s" % last_line(err)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    gspmd = os.path.abspath(sys.argv[1])
    if not os.access(gspmd, os.X_OK):
        print("FAIL: %s is not an executable" % gspmd)
        return 1
    failed = 0
    with tempfile.TemporaryDirectory(prefix="check_gen.") as tmp:
        cases = [(name, lambda a=args, c=coll, nm=name: check_tiny(gspmd, nm, a, c, tmp))
                 for name, args, coll in TINY]
        cases += [(name, lambda a=args, nm=name: check_large(gspmd, nm, a, tmp))
                  for name, args in LARGE]
        cases += [(name, lambda a=args, nm=name, mp=mp, sem=sem: check_pipeline(
            gspmd, nm, a, tmp, True, mp, sem)) for name, args, mp, sem in PIPE_TINY]
        cases += [(name, lambda a=args, nm=name: check_pipeline(gspmd, nm, a, tmp, False))
                  for name, args in PIPE_LARGE]
        cases += [(name, lambda a=args, nm=name, o=opts: check_unet(gspmd, nm, a, tmp, True, **o))
                  for name, args, opts in UNET_TINY]
        cases += [(name, lambda a=args, nm=name: check_unet(gspmd, nm, a, tmp, False))
                  for name, args in UNET_LARGE]
        cases += [(name, lambda a=args, nm=name, o=opts: check_dense(gspmd, nm, a, tmp, **o))
                  for name, args, opts in DENSE_TINY]
        cases += [(name, lambda b=base, v=var, nm=name: check_remat_same(gspmd, nm, b, v, tmp))
                  for name, base, var in REMAT_SAME]
        cases += [(p + " 2d remat", lambda p=p: check_dense_large(gspmd, p + " 2d", p, tmp))
                  for p in DENSE_LARGE]
        cases += [(name, lambda a=args, nm=name, f=fits: check_moe_large(gspmd, nm, a, tmp, f))
                  for name, args, fits in MOE_LARGE]
        cases += [(name, lambda a=args, msg=msg: check_rejected(a, msg))
                  for name, args, msg in REJECTED]
        cases += [(name, lambda p=preset, m=mesh, nm=name: check_auto(gspmd, nm, p, m, tmp))
                  for name, preset, mesh in AUTO_TINY]
        for name, fn in cases:
            try:
                print("PASS %-22s %s" % (name, fn()), flush=True)
            except (ValueError, KeyError, OSError) as e:
                failed += 1
                print("FAIL %-22s %s" % (name, e), flush=True)
    print("%d of %d cases passed" % (len(cases) - failed, len(cases)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
