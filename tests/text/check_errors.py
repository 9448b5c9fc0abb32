#!/usr/bin/env python3
"""Bad-input tests: each FILE.hlo in the folder starts with `// EXPECT: TEXT` (and optionally
`// COMMAND: verify` to run `gspmd verify` instead of `gspmd parse`). The command must exit 1, and
the first line of its stderr must be exactly TEXT with FILE replaced by the file's path as given.
Also checks that the caret line follows. Usage: check_errors.py GSPMD DIR"""
import glob
import os
import subprocess
import sys

gspmd, folder = sys.argv[1], sys.argv[2]
bad = 0
files = sorted(glob.glob(os.path.join(folder, "*.hlo")))
for f in files:
    lines = open(f).read().splitlines()
    want = lines[0].split("// EXPECT: ", 1)[1]
    cmd = "parse"
    if len(lines) > 1 and lines[1].startswith("// COMMAND: "):
        cmd = lines[1].split("// COMMAND: ", 1)[1].strip()
    name = os.path.basename(f)
    p = subprocess.run([gspmd, cmd, name], capture_output=True, text=True, cwd=folder, timeout=20)
    got = p.stderr.splitlines()
    ok = p.returncode == 1 and got and got[0] == want.replace("FILE", name)
    if ok and ":" in want.split(" error:")[0] and len(got) < 3:
        ok = False  # a located error must show the source line and a caret
    if ok and len(got) >= 3 and not got[2].lstrip().startswith("^"):
        ok = False
    if not ok:
        bad += 1
        print("FAIL %s\n  expected: %s\n  got (exit %d): %s" % (name, want, p.returncode, "\n  ".join(got[:3])))
print("%d files, %d failures" % (len(files), bad))
sys.exit(1 if bad else 0)
