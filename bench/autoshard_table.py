#!/usr/bin/env python3
"""autoshard_table.py [GSPMD] [--quick] [--only=NAME,...] — issue 27's measures of `gspmd
autoshard`, predicted.

For each program: `gspmd autoshard FILE --mesh M --machine X --ignore-shardings --report` (the
search from the mesh alone) against the program's own shardings (propagated), both predicted
by `gspmd cost`'s model from the partitioned programs: step time, peak memory per device, and
the search's size and solve time.
  - MaxText's train step (../shared/real, 8 devices, h100): issue 27 asks a step <= 1.1x its
    own shardings' at a peak <= 1.3x ideal;
  - the paper's models with rematerialization and their hand shardings (tools/gen.py --remat;
    the dense ones with the paper's 2D sharding, --sharding 2d; the MoE ones with GShard's),
    tpu-v3 with 16 GiB: a step <= 1.0x the hand sharding's, solved in <= 60 s for
    dense-64b-128 and <= 10 min for the 1T models (--quick: dense-64b-128 only; --only: the
    presets named, without MaxText).
Not a test: the figures are the cost model's predictions on this machine's build.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
GEN = os.path.join(ROOT, "tools", "gen.py")

LINE = re.compile(r"predicted \((autoshard|input's)\):\s+step ([0-9.e+-]+) s .*peak ([0-9.e+-]+) GiB")
SEARCH = re.compile(r"search: (\d+) values.*?(\d+) variables.*?; (\w+)(?: in ([0-9.e+-]+) s)?")


TPU_V3_BF16 = 61.5e12  # the tpu-v3 profile's bf16 peak per core (src/cost/machine.c)


def autoshard(gspmd, path, mesh, machine, extra):
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([gspmd, "autoshard", path, "--mesh", mesh, "--machine", machine,
                            "--ignore-shardings", "--report", "-o", os.path.join(tmp, "a.hlo")]
                           + extra, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1:]
    got = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in LINE.finditer(p.stderr)}
    s = SEARCH.search(p.stderr)
    kept = "kept the input's own shardings" in p.stderr
    return (got, s.groups() if s else None, time.time() - t0, kept), None


def main():
    args = sys.argv[1:]
    quick = "--quick" in args
    args = [a for a in args if a != "--quick"]
    mt_only = not any(a.startswith("--only=") for a in args)
    pos = [a for a in args if not a.startswith("--")]
    gspmd = pos[0] if pos else os.path.join(ROOT, "build", "gspmd")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        mt = os.path.join(SHARED, "real", "nv_maxtext_1n1g_jit_train_step_before_optimization.hlo")
        if os.path.exists(mt) and mt_only:
            rows.append(("MaxText train step", mt, "data=8", "h100", [], None))
        presets = ["dense-64b-128"] if quick else [
            "dense-64b-128", "dense-128b-256", "dense-256b-512", "dense-512b-1024",
            "dense-1t-2048", "moe-78b-128", "moe-309b-512", "moe-1t-2048"]
        only = [a[len("--only="):] for a in args if a.startswith("--only=")]
        if only:
            presets = [p for p in presets if p in only[0].split(",")]
        for name in presets:
            out = os.path.join(tmp, name + ".hlo")
            shard = ["--sharding", "2d"] if name.startswith("dense") else []
            g = subprocess.run([sys.executable, GEN, "preset", name, "--train", "--dtype", "bf16",
                                "--remat", "-o", out] + shard,
                               capture_output=True, text=True)
            mesh = re.search(r"devices \d+ \(([^)]*)\)", g.stderr)
            if g.returncode != 0 or not mesh:
                print("gen.py %s failed: %s" % (name, g.stderr.strip()[-200:]))
                continue
            mf = re.search(r"model FLOPs/step ([0-9.e+]+)", g.stderr)
            nd = re.search(r"devices (\d+)", g.stderr)
            mfu = float(mf.group(1)) / int(nd.group(1)) / TPU_V3_BF16 if mf and nd else None
            rows.append((name + (" (2d, remat)" if shard else " (remat)"), out, mesh.group(1),
                         "tpu-v3", ["--memory-limit", "16Gi"], mfu))
        print("| program | mesh, machine | search (autoshard's wall time) | autoshard: step, peak "
              "(MFU) | its own: step, peak (MFU) | step ratio |")
        print("|---|---|---|---|---|---|")
        for label, path, mesh, machine, extra, mfu in rows:
            res, err = autoshard(gspmd, path, mesh, machine, extra)
            if not res:
                print("| %s | %s, %s | failed: %s | | | |" % (label, mesh, machine, err))
                continue
            got, s, wall, kept = res
            a, b = got.get("autoshard"), got.get("input's")
            search = "%s values, %s variables, %s%s (%.0f s)" % (
                s[0], s[1], s[2], " %.1f s" % float(s[3]) if s[3] else "", wall) if s else "?"
            if kept:  # not found from the mesh alone: the hand sharding was better and kept
                search += "; KEPT THE HAND SHARDING"
            ma = " (%.0f%%)" % (100 * mfu / a[0]) if mfu else ""
            mb = " (%.0f%%)" % (100 * mfu / b[0]) if mfu else ""
            print("| %s | %s, %s | %s | %.4g s, %.3g GiB%s | %.4g s, %.3g GiB%s | %.3f |" % (
                label, mesh, machine, search, a[0], a[1], ma, b[0], b[1], mb, a[0] / b[0]),
                flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
