#!/usr/bin/env python3
"""Shardy's propagation cases run: every module of ../shared/conformance/shardy (group
`propagation`) that fits is partitioned with the shardings Shardy's propagation gives it and run
against the reference interpreter (issue 26: "the program is correct whatever the shardings").

Usage: sdy_verify.py GSPMD SHARDY_CORPUS [--verbose]

For each case: `gspmd run module.mlir --num-partitions N --algorithm shardy --verify`, N the
device count of the meshes it uses. A case does not fit (and is counted, not failed) when its meshes
have different device counts, or when gspmd declines it with a located error (exit 1): an op the
reader, the partitioner or the interpreter does not support (listed with --verbose). A wrong
result, a crash or a hang fails the test.
"""
import glob
import json
import os
import re
import subprocess
import sys


def devices(text):
    """The device counts of the meshes the module's shardings use."""
    counts = set()
    for m in re.finditer(r'sdy\.mesh @(\S+) = <\[([^\]]*)\]', text):
        if len(re.findall(r'@%s\b' % re.escape(m.group(1)), text)) < 2:
            continue  # declared, never used
        k = 1
        for s in re.findall(r'=(\d+)', m.group(2)):
            k *= int(s)
        counts.add(k)
    return counts


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    verbose = "--verbose" in sys.argv
    gspmd, root = args[0], args[1]
    ok, skipped, declined, failed = [], [], [], []
    for d in sorted(glob.glob(os.path.join(root, "*"))):
        cj = os.path.join(d, "case.json")
        if not os.path.exists(cj) or json.load(open(cj))["group"] != "propagation":
            continue
        name = os.path.basename(d)
        path = os.path.join(d, "module.mlir")
        counts = devices(open(path).read())
        if len(counts) > 1:
            skipped.append((name, "meshes of %s devices" % sorted(counts)))
            continue
        n = counts.pop() if counts else 1
        try:
            p = subprocess.run([gspmd, "run", path, "--num-partitions", str(n), "--algorithm",
                                "shardy", "--verify"], capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            failed.append((name, "timed out"))
            continue
        errors = [l for l in p.stderr.splitlines() if "error" in l]
        if p.returncode == 0:
            ok.append(name)
        elif p.returncode == 1 and "differs" not in p.stdout + p.stderr and errors:
            declined.append((name, errors[0]))
        else:
            failed.append((name, "exit %d: %s" % (p.returncode, (p.stdout + p.stderr)[-400:])))
    print("shardy cases: %d verified, %d declined with an error, %d with meshes of several "
          "device counts, %d failed" % (len(ok), len(declined), len(skipped), len(failed)))
    if verbose:
        for name, why in declined + skipped:
            print("  not run %s: %s" % (name, why))
    for name, why in failed:
        print("  FAIL %s: %s" % (name, why))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
