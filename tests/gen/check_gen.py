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
One line per case; exit 1 if any fails.
"""
import os
import re
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
LARGE_SECONDS = 30.0
LARGE_TEXT_BYTES = 64 * 1024
TIMEOUT = 120


def run(cmd):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=TIMEOUT)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", "timed out after %d s" % TIMEOUT
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
    rc, out, err, t = run([gspmd, "partition", path, "--num-partitions", str(n), "--propagate"])
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
    rc, out, err, t = run([gspmd, "partition", path, "--num-partitions", str(n), "--propagate"])
    if rc != 0:
        raise ValueError("partition exited %d after %.1fs: %s" % (rc, t, last_line(err)))
    if t >= LARGE_SECONDS:
        raise ValueError("partition took %.1fs (limit %.0fs)" % (t, LARGE_SECONDS))
    params = re.search(r"params \d+ \(([^;)]+)", summary)
    return "%s params, %d devices, %d bytes of text, partition %.2fs" % (
        params.group(1) if params else "?", n, size, t)


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
        for name, fn in cases:
            try:
                print("PASS %-22s %s" % (name, fn()), flush=True)
            except ValueError as e:
                failed += 1
                print("FAIL %-22s %s" % (name, e), flush=True)
    print("%d of %d cases passed" % (len(cases) - failed, len(cases)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
