#!/usr/bin/env python3
"""Propagation tests: each FILE.hlo in the folder starts with `//` lines saying how to run it and
what must come out:

  // FLAGS: --spmd ...           extra arguments of `gspmd propagate FILE`
  // EXPECT: NAME SHARDING        instruction NAME prints exactly this sharding (metadata ignored)
  // EXPECT: NAME none            instruction NAME has no sharding
  // ERROR: TEXT                  the command exits 1 and the first stderr line is TEXT (FILE is
                                  replaced by the file name)
  // EXPLAIN: NAME                also run with --explain NAME ...
  // EXPLAIN-HAS: TEXT            ... and its output must contain TEXT

Shardings are compared as text: gspmd prints XLA's canonical form (iota tile assignments), so the
expectation is written that way. Usage: check_propagate.py GSPMD DIR"""
import glob
import os
import re
import subprocess
import sys

INSTR_RE = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")


def shardings(text):
    out = {}
    for line in text.splitlines():
        m = INSTR_RE.match(line)
        if not m:
            continue
        name, rest = m.group(1), m.group(2)
        i = rest.find("sharding={")
        if i < 0:
            out[name] = None
            continue
        j = i + len("sharding=")
        depth, k = 0, j
        while k < len(rest):
            depth += rest[k] == "{"
            depth -= rest[k] == "}"
            if depth == 0:
                break
            k += 1
        out[name] = strip_metadata(rest[j:k + 1])
    return out


def strip_metadata(s):
    while True:
        i = s.find(" metadata={")
        if i < 0:
            return s
        depth, k = 0, i + len(" metadata=")
        while k < len(s):
            depth += s[k] == "{"
            depth -= s[k] == "}"
            if depth == 0:
                break
            k += 1
        s = s[:i] + s[k + 1:]


gspmd, folder = os.path.abspath(sys.argv[1]), sys.argv[2]
bad = 0
files = sorted(glob.glob(os.path.join(folder, "*.hlo")))
for f in files:
    name = os.path.basename(f)
    flags, expects, error, explain, explain_has = [], [], None, None, []
    for line in open(f).read().splitlines():
        if not line.startswith("//"):
            break
        body = line[2:].strip()
        key, _, val = body.partition(": ")
        if key == "FLAGS":
            flags += val.split()
        elif key == "EXPECT":
            n, _, s = val.partition(" ")
            expects.append((n, s.strip()))
        elif key == "ERROR":
            error = val.replace("FILE", name)
        elif key == "EXPLAIN":
            explain = val.strip()
        elif key == "EXPLAIN-HAS":
            explain_has.append(val)
    p = subprocess.run([gspmd, "propagate", name] + flags, capture_output=True, text=True,
                       cwd=folder, timeout=60)
    problems = []
    if error is not None:
        got = p.stderr.splitlines()
        if p.returncode != 1 or not got or got[0] != error:
            problems.append("expected exit 1 with '%s', got exit %d: %s" %
                            (error, p.returncode, got[0] if got else ""))
    elif p.returncode != 0:
        problems.append("exit %d: %s" % (p.returncode, p.stderr.strip()[:300]))
    else:
        got = shardings(p.stdout)
        for n, want in expects:
            if n not in got:
                problems.append("%s: not in the output" % n)
                continue
            have = got[n]
            if want == "none":
                if have is not None:
                    problems.append("%s: expected no sharding, got %s" % (n, have))
            elif have != want:
                problems.append("%s: expected %s, got %s" % (n, want, have))
        if explain:
            q = subprocess.run([gspmd, "propagate", name, "--explain", explain] + flags,
                               capture_output=True, text=True, cwd=folder, timeout=60)
            for t in explain_has:
                if t not in q.stdout:
                    problems.append("--explain %s: no '%s' in:\n%s" % (explain, t, q.stdout))
    if problems:
        bad += 1
        print("FAIL %s\n  %s" % (name, "\n  ".join(problems)))
print("%d files, %d failures" % (len(files), bad))
sys.exit(1 if bad else 0)
