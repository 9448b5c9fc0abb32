#!/usr/bin/env python3
"""autoshard_table.py [GSPMD] [--quick] — issue 27's measures of `gspmd autoshard`, predicted.

For each program: `gspmd autoshard FILE --mesh M --machine X --ignore-shardings --report` (the
search from the mesh alone) against the program's own shardings (propagated), both predicted
by `gspmd cost`'s model from the partitioned programs: step time, peak memory per device, and
the search's size and solve time.
  - MaxText's train step (../shared/real, 8 devices, h100): issue 27 asks a step <= 1.1x its
    own shardings' at a peak <= 1.3x ideal;
  - the paper's dense Transformers with the 2D sharding and rematerialization by hand
    (tools/gen.py --sharding 2d --remat, tpu-v3, 16 GiB): a step <= 1.0x the hand sharding's,
    solved in <= 60 s for dense-64b-128 (--quick: that one only).
Not a test: the figures are the cost model's predictions on this machine's build.
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
GEN = os.path.join(ROOT, "tools", "gen.py")

LINE = re.compile(r"predicted \((autoshard|input's)\):\s+step ([0-9.e+-]+) s .*peak ([0-9.e+-]+) GiB")
SEARCH = re.compile(r"search: (\d+) values.*?(\d+) variables.*?; (\w+)(?: in ([0-9.e+-]+) s)?")


def autoshard(gspmd, path, mesh, machine, extra):
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([gspmd, "autoshard", path, "--mesh", mesh, "--machine", machine,
                            "--ignore-shardings", "--report", "-o", os.path.join(tmp, "a.hlo")]
                           + extra, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1:]
    got = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in LINE.finditer(p.stderr)}
    s = SEARCH.search(p.stderr)
    return (got, s.groups() if s else None), None


def main():
    args = sys.argv[1:]
    quick = "--quick" in args
    args = [a for a in args if a != "--quick"]
    gspmd = args[0] if args else os.path.join(ROOT, "build", "gspmd")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        mt = os.path.join(SHARED, "real", "nv_maxtext_1n1g_jit_train_step_before_optimization.hlo")
        if os.path.exists(mt):
            rows.append(("MaxText train step", mt, "data=8", "h100", []))
        presets = ["dense-64b-128"] if quick else ["dense-64b-128", "dense-128b-256",
                                                   "dense-256b-512"]
        for name in presets:
            out = os.path.join(tmp, name + ".hlo")
            g = subprocess.run([sys.executable, GEN, "preset", name, "--train", "--dtype", "bf16",
                                "--sharding", "2d", "--remat", "-o", out],
                               capture_output=True, text=True)
            mesh = re.search(r"devices \d+ \(([^)]*)\)", g.stderr)
            if g.returncode != 0 or not mesh:
                print("gen.py %s failed: %s" % (name, g.stderr.strip()[-200:]))
                continue
            rows.append((name + " (2d, remat)", out, mesh.group(1), "tpu-v3", ["--memory-limit", "16Gi"]))
        print("| program | mesh, machine | search | autoshard: step, peak | its own: step, peak | step ratio |")
        print("|---|---|---|---|---|---|")
        for label, path, mesh, machine, extra in rows:
            res, err = autoshard(gspmd, path, mesh, machine, extra)
            if not res:
                print("| %s | %s, %s | failed: %s | | | |" % (label, mesh, machine, err))
                continue
            got, s = res
            a, b = got.get("autoshard"), got.get("input's")
            search = "%s values, %s variables, %s%s" % (s[0], s[1], s[2], " %.1f s" % float(s[3]) if s[3] else "") if s else "?"
            print("| %s | %s, %s | %s | %.4g s, %.3g GiB | %.4g s, %.3g GiB | %.3f |" % (
                label, mesh, machine, search, a[0], a[1], b[0], b[1], a[0] / b[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
