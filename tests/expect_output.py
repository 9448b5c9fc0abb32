#!/usr/bin/env python3
"""Runs one command and compares what it prints with what is expected (ctest sdy/*, label mlir).

Usage: expect_output.py [--expected FILE] [--exit N] [--stderr-has TEXT] [--fixed-point GSPMD]
                        -- COMMAND ARGS...
  --expected FILE     standard output must equal FILE's text exactly (a diff is printed if not)
  --exit N            the exit status must be N (default 0); with 0, standard error must be empty
  --stderr-has TEXT   standard error must contain TEXT
  --fixed-point GSPMD standard output, read back by `GSPMD parse - --emit mlir`, prints the same
                      text (the printed StableHLO reads back to itself)
Needs no FileCheck: the expected files are gspmd's whole output, reviewed by hand when they change.
"""
import difflib
import subprocess
import sys


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit(__doc__)
    cmd = argv[argv.index("--") + 1:]
    opts = argv[:argv.index("--")]
    expected, status, has, gspmd = None, 0, [], None
    while opts:
        o = opts.pop(0)
        if o == "--expected":
            expected = opts.pop(0)
        elif o == "--exit":
            status = int(opts.pop(0))
        elif o == "--stderr-has":
            has.append(opts.pop(0))
        elif o == "--fixed-point":
            gspmd = opts.pop(0)
        else:
            sys.exit("expect_output.py: unknown option %s" % o)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    failed = []
    if p.returncode != status:
        failed.append("exit status %d, expected %d" % (p.returncode, status))
    if status == 0 and p.stderr:
        failed.append("standard error is not empty:\n" + p.stderr)
    for t in has:
        if t not in p.stderr:
            failed.append("standard error lacks %r:\n%s" % (t, p.stderr))
    if expected is not None:
        with open(expected) as f:
            want = f.read()
        if p.stdout != want:
            diff = difflib.unified_diff(want.splitlines(True), p.stdout.splitlines(True),
                                        expected, "output")
            failed.append("output differs from the expected text:\n" + "".join(diff))
    if gspmd and not failed:
        q = subprocess.run([gspmd, "parse", "-", "--emit", "mlir"], input=p.stdout,
                           capture_output=True, text=True, timeout=120)
        if q.returncode != 0 or q.stdout != p.stdout:
            diff = difflib.unified_diff(p.stdout.splitlines(True), q.stdout.splitlines(True),
                                        "printed", "read back and printed")
            failed.append("not a fixed point (exit %d): %s\n%s" % (q.returncode, q.stderr,
                                                                  "".join(diff)))
    for f in failed:
        print("FAIL %s: %s" % (" ".join(cmd), f))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
