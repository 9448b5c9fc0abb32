#!/usr/bin/env python3
"""HLO <-> StableHLO round trip of the test files (ctest mlir.roundtrip, label mlir).

Usage: mlir_roundtrip.py GSPMD DIR... [--verbose] [--eval-timeout S] [--max-memory BYTES]
  Every *.hlo under each DIR (recursively) and every *.mlir that `gspmd parse` reads (ctest
  runs it over tests/; pointed at ../shared/conformance/xla or ../shared/real it measures those,
  the figures in docs/status.md):
  1. `parse F --emit mlir` prints StableHLO text M;
  2. printing is a fixed point: `parse M --emit mlir` prints M again;
  3. `parse M --emit hlo` evaluates (`gspmd eval --seed 0`) to bit-identical outputs as F
     (when F itself evaluates on one device);
  4. where F is a partitioning case (a case.json beside it with num_devices, or a module with
     num_partitions > 1), `parse M --emit hlo` partitions to the same per-device shapes of the
     entry's parameters and root and the same collectives (opcode and shape, as a multiset) as F.
  Files that fail a step for a reason listed in EXPECTED are counted, not failures; an
  expected exception that no longer fails is reported (the list should shrink). Exits 1 on any
  unexpected failure.
"""
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile

# Known gaps, each as (regular expression on the failure, why): `printer:` what gspmd's printer
# does not write, `reader:` what src/mlir/ops.c and reader.c do not read back yet. A failure matching one is
# expected; the list should only shrink.
EXPECTED = [
    (r"no StableHLO form", "printer: ops StableHLO has no op for (async halves, a topk of the smallest, scan, "
                           "tuple all-to-all, replica groups of unequal "
                           "sizes, a recv of a tuple, an infeed of nested tuples)"),
    (r"elided \(\{\.\.\.\}\) cannot be printed", "printer: a constant whose values a dump "
                                                 "elided has no value to write"),
    (r"has a one-value while", "reader: a while of one value (it reads a one-element tuple)"),
    (r"error: too many operands", "reader: an op or return of more than 256 values"),
    (r"partition: root \S+ became",
     "printer: an unsharded root copy of a sharded op prints as the op (StableHLO has no copy), "
     "whose sharding the output then takes where HLO leaves it to propagation"),
    (r"the sharding splits \d+ dimensions, the tensor has rank",
     "reader: a sharding that does not fit its tensor is an error when read (the HLO parser "
     "leaves it to propagation and partitioning)"),
]

# Where printing is not yet a fixed point: removed from both texts before comparing them, and
# the count of files that needed it is reported. The reader puts a function's result sharding
# on the root instruction (as XLA's import does), which then prints as the op's own sharding
# too; where the printer dropped a root copy or changed num_partitions text, the two differ.
READER_DROPS = [
    (re.compile(r' \{mhlo\.sharding = "(?:[^"\\]|\\.)*"\}'), ""),
    (re.compile(r', mhlo\.sharding = "(?:[^"\\]|\\.)*"'), ""),
    (re.compile(r'\{mhlo\.sharding = "(?:[^"\\]|\\.)*", '), "{"),
    (re.compile(r"mhlo\.num_partitions = \d+"), "mhlo.num_partitions = N"),
    (re.compile(r"mhlo\.num_replicas = \d+"), "mhlo.num_replicas = N"),
]


def normalize(text):
    for rx, rep in READER_DROPS:
        text = rx.sub(rep, text)
    return text


EVAL_TIMEOUT = 300
MAX_MEMORY = "8G"


def run(args, stdin=None, timeout=300):
    try:
        return subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def first_error(p):
    if p is None:
        return "timed out"
    lines = [l for l in p.stderr.splitlines() if "error" in l]
    return (lines or p.stderr.splitlines() or ["exit %d" % p.returncode])[0]


def eval_outputs(gspmd, path, text, tmp, tag):
    """The bytes of each output .npy of `gspmd eval`, or None when it fails."""
    out = os.path.join(tmp, tag)
    os.makedirs(out, exist_ok=True)
    src = path
    if text is not None:
        src = os.path.join(tmp, tag + ".hlo")
        with open(src, "w") as f:
            f.write(text)
    p = run([gspmd, "eval", src, "--seed", "0", "--output-dir", out, "--max-memory", MAX_MEMORY],
            timeout=EVAL_TIMEOUT)
    if p is None or p.returncode != 0:
        return None, first_error(p)
    res = {}
    for n in sorted(os.listdir(out)):
        with open(os.path.join(out, n), "rb") as f:
            res[n] = f.read()
    return res, None


def print_twice(gspmd, path, fmt):
    """`parse --emit fmt` of path, then of that output: (first, second, None), or a reason."""
    first = run([gspmd, "parse", path, "--emit", fmt])
    if first is None or first.returncode != 0:
        return None, None, ("print as hlo: " if fmt == "hlo" else "print: ") + first_error(first)
    second = run([gspmd, "parse", "-", "--emit", fmt], stdin=first.stdout)
    if second is None or second.returncode != 0:
        if fmt == "hlo":
            return None, None, "hlo read back: " + first_error(second)
        if re.search(r'"stablehlo\.(if|case)"', first.stdout):
            return None, None, "read back (the text has stablehlo.if/case): " + first_error(second)
        return None, None, "read back: " + first_error(second)
    return first, second, None


COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
               "ragged-all-to-all", "collective-broadcast")
INSTR = re.compile(r"^\s*(ROOT )?%\S+ = (.*?) ([a-z][a-z0-9-]*)\(")


def partition_setup(path):
    """(num_partitions, extra args) when path is a partitioning case, else None."""
    case = os.path.join(os.path.dirname(path), "case.json")
    if os.path.exists(case):
        import json
        with open(case) as f:
            c = json.load(f)
        if c.get("kind") != "partition" or not c.get("num_devices"):
            return None
        extra = ["--propagate"] if c.get("fixture") == "DotHandlerTest" else []
        return int(c["num_devices"]), extra
    with open(path, errors="replace") as f:
        head = f.read(4096)
    m = re.search(r"num_partitions\s*=\s*(\d+)", head)
    if m and int(m.group(1)) > 1:
        # `partition` propagates a .mlir file by default (with Shardy's rules when it has
        # a mesh), an HLO one when asked (a test's `// ARGS:` with --propagate: StableHLO has
        # no place for the shardings of a loop body's tuple elements, so such a test has them
        # propagated): both sides are compared after GSPMD's propagation
        a = re.search(r"^// ARGS:(.*)$", head, re.M)
        asked = a is not None and "--propagate" in a.group(1).split()
        return int(m.group(1)), (["--propagate", "--algorithm", "gspmd"]
                                 if path.endswith(".mlir") or asked else [])
    return None


LAYOUT = re.compile(r"\{[0-9,]*(:[^}]*)?\}")


def partition_signature(text):
    """Per-device shapes of the entry's parameters and root, and the multiset of collectives
    (shapes without their layouts: the StableHLO text has none)."""
    entry, params, root, colls = False, [], None, []
    for line in text.splitlines():
        if line.startswith("ENTRY "):
            entry = True
            continue
        if entry and line.startswith("}"):
            entry = False
        m = INSTR.match(line)
        if not m:
            continue
        shape, op = LAYOUT.sub("", m.group(2)), m.group(3)
        if op.endswith("-start"):
            op = op[:-len("-start")]
        if op in COLLECTIVES:
            colls.append("%s %s" % (op, shape))
        if entry and op == "parameter":
            params.append(shape)
        if entry and m.group(1):
            root = shape
    return params, root, sorted(colls)


def check(gspmd, path, tmp, stats):
    """None when the file round-trips, else the reason it does not; 'skip' when it does not
    parse at all (a bad-input test). Counts in stats what was compared."""
    p = run([gspmd, "parse", path])
    if p is not None and p.returncode not in (0, 1):
        return "parse crashed (exit %d)" % p.returncode  # bad input is exit 1, never a crash
    if p is None or p.returncode != 0:
        return "skip"
    # as HLO text, every file (StableHLO ones too) prints text that parses to the same print
    h1, h2, why = print_twice(gspmd, path, "hlo")
    if why:
        return why
    if h2.stdout != h1.stdout:
        return "hlo printing is not a fixed point"
    m1, m2, why = print_twice(gspmd, path, "mlir")
    if why:
        return why
    one_value_while = re.search(r"stablehlo\.while\(%\w+ = [^,)]+\) :", m1.stdout)
    if m2.stdout != m1.stdout and normalize(m2.stdout) == normalize(m1.stdout):
        stats["modulo"] += 1
    elif m2.stdout != m1.stdout:
        a, b = normalize(m1.stdout).splitlines(), normalize(m2.stdout).splitlines()
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                why = "at line %d: %r became %r" % (i + 1, x.strip()[:100], y.strip()[:100])
                break
        else:
            why = "%d lines became %d" % (len(a), len(b))
        tag = " (the text has a one-value while)" if one_value_while else ""
        return "not a fixed point%s %s" % (tag, why)
    h = run([gspmd, "parse", "-", "--emit", "hlo"], stdin=m1.stdout)
    if h is None or h.returncode != 0:
        return "to hlo: " + first_error(h)
    setup = partition_setup(path)
    if setup:
        n, extra = setup
        pa = run([gspmd, "partition", path, "--num-partitions", str(n)] + extra)
        if pa is not None and pa.returncode == 0:
            os.makedirs(tmp, exist_ok=True)
            back = os.path.join(tmp, "back.hlo")
            with open(back, "w") as f:
                f.write(h.stdout)
            pb = run([gspmd, "partition", back, "--num-partitions", str(n)] + extra)
            if pb is None or pb.returncode != 0:
                return "partition after the round trip: " + first_error(pb)
            sa, sb = partition_signature(pa.stdout), partition_signature(pb.stdout)
            if sa[0] != sb[0]:
                return "partition: entry parameters %s became %s" % (sa[0], sb[0])
            if sa[1] != sb[1]:
                return "partition: root %s became %s" % (sa[1], sb[1])
            if sa[2] != sb[2]:
                ca, cb = collections.Counter(sa[2]), collections.Counter(sb[2])
                gone, new = sorted((ca - cb).elements())[:3], sorted((cb - ca).elements())[:3]
                return "partition: collectives differ (%s lost, %s new)" % (gone, new)
            stats["partition"] += 1
        else:
            stats["no_partition"] += 1
    want, err = eval_outputs(gspmd, path, None, tmp, "a")
    if want is None:
        stats["no_eval"] += 1
        return None  # the original does not evaluate on one device: nothing to compare
    got, err = eval_outputs(gspmd, path, h.stdout, tmp, "b")
    if got is None:
        return "eval after the round trip: " + err
    if sorted(got) != sorted(want):
        return "eval: outputs %s became %s" % (sorted(want), sorted(got))
    for k in want:
        if want[k] != got[k]:
            return "eval: %s differs" % k
    stats["eval"] += 1
    return None


def main():
    global EVAL_TIMEOUT, MAX_MEMORY
    argv, args = sys.argv[1:], []
    verbose = False
    while argv:
        a = argv.pop(0)
        if a == "--verbose":
            verbose = True
        elif a == "--eval-timeout":
            EVAL_TIMEOUT = float(argv.pop(0))
        elif a == "--max-memory":
            MAX_MEMORY = argv.pop(0)
        else:
            args.append(a)
    gspmd, dirs = args[0], args[1:]
    files = []
    for d in dirs:
        if os.path.isfile(d):
            files.append(d)
            continue
        files += sorted(glob.glob(os.path.join(d, "**", "*.hlo"), recursive=True))
        files += sorted(glob.glob(os.path.join(d, "**", "*.mlir"), recursive=True))
    ok = skipped = 0
    stats = {"modulo": 0, "eval": 0, "no_eval": 0, "partition": 0, "no_partition": 0}
    expected, unexpected = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i, f in enumerate(files):
            why = check(gspmd, f, os.path.join(tmp, str(i)), stats)
            if why == "skip":
                skipped += 1
            elif why is None:
                ok += 1
            elif any(re.search(rx, why) for rx, _ in EXPECTED):
                expected.append((f, why))
            else:
                unexpected.append((f, why))
    print("%d files (%d do not parse: bad-input tests), %d round-trip, %d expected exceptions, "
          "%d failures" % (len(files), skipped, ok, len(expected), len(unexpected)))
    print("  of the round trips: %d evaluate bit-identically after hlo -> mlir -> hlo, %d do not "
          "evaluate on one device; %d are fixed points only up to what the reader drops "
          "(mhlo.sharding, num_partitions)" % (stats["eval"], stats["no_eval"], stats["modulo"]))
    print("  partitioning cases: %d partition to the same per-device shapes and collectives after "
          "the round trip, %d do not partition before it" % (stats["partition"],
                                                              stats["no_partition"]))
    for rx, why in EXPECTED:
        k = sum(1 for _, w in expected if re.search(rx, w))
        print("  expected: %3d  %s" % (k, why))
    if verbose:
        for f, why in expected:
            print("  expected: %s: %s" % (f, why))
    for f, why in unexpected:
        print("  FAIL %s: %s" % (f, why))
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
