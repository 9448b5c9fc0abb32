#!/usr/bin/env python3
"""Every module of the shared corpus (conformance cases and real dumps) parses, and printing is a
fixed point: parse(print(parse(f))) prints the same text. Also runs `gspmd verify` on the real
dumps. Usage: corpus_roundtrip.py GSPMD SHARED_DIR"""
import glob
import os
import subprocess
import sys

gspmd, shared = sys.argv[1], sys.argv[2]
files = sorted(glob.glob(os.path.join(shared, "conformance", "*", "*", "module.hlo")))
files += sorted(glob.glob(os.path.join(shared, "real", "*.hlo")))
bad = []
for f in files:
    p = subprocess.run([gspmd, "parse", f], capture_output=True, text=True)
    if p.returncode != 0:
        bad.append("%s: parse failed: %s" % (f, p.stderr.strip().splitlines()[:1]))
        continue
    q = subprocess.run([gspmd, "parse", "-"], input=p.stdout, capture_output=True, text=True)
    if q.returncode != 0 or q.stdout != p.stdout:
        bad.append("%s: printing is not a fixed point" % f)
for f in sorted(glob.glob(os.path.join(shared, "real", "*.hlo"))):
    p = subprocess.run([gspmd, "verify", f], capture_output=True, text=True)
    if p.returncode != 0:
        bad.append("%s: verify failed: %s" % (f, p.stderr.strip().splitlines()[:1]))
print("%d modules, %d problems" % (len(files), len(bad)))
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
