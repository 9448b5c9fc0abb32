#!/usr/bin/env python3
"""run_resnet.py [GSPMD] — issue 28's ResNet-50 measure: the forward pass of
../shared/real/resnet50_keras_jax_f32.hlo (batch 1, its 25M random parameters included), end to
end, best of 3:
  eval   OPENBLAS_NUM_THREADS=1 gspmd eval FILE
  run    gspmd run FILE --mesh h=2 --shard data.1=None,h,None,None   (height split over 2)
and per step (`--steps 5`, the mean after the first), and what `run --verify` adds beyond the
run (it prints the reference's share). The issue asks run >= 1.5x eval end to end.
A timing: on a shared machine, compare ratios from one run."""
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from autoshard_run import step_times  # noqa: E402

MODEL = os.path.join(ROOT, "..", "shared", "real", "resnet50_keras_jax_f32.hlo")
SPLIT = ["--mesh", "h=2", "--shard", "data.1=None,h,None,None"]


def wall(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr.strip()[-400:]))
    return time.perf_counter() - t0, p.stderr


def main():
    gspmd = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "gspmd")
    one = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    ev = min(wall([gspmd, "eval", MODEL], one)[0] for _ in range(3))
    rn = min(wall([gspmd, "run", MODEL] + SPLIT)[0] for _ in range(3))
    es = step_times([gspmd, "eval", MODEL, "--steps", "5"], one)[0]
    rs = step_times([gspmd, "run", MODEL, "--steps", "5"] + SPLIT)[0]
    _, err = wall([gspmd, "run", MODEL, "--verify"] + SPLIT)
    m = re.search(r"verify: ([0-9.e+-]+) s beyond the run", err)
    print("| ResNet-50 forward | eval, 1 thread | run, 2 devices (height) | eval / run |")
    print("|---|---|---|---|")
    print("| end to end (best of 3) | %.3f s | %.3f s | %.2f |" % (ev, rn, ev / rn))
    print("| per step (--steps 5) | %.4f s | %.4f s | %.2f |" % (es, rs, es / rs))
    print("| run --verify's extra time | | %s s | |" % (m.group(1) if m else "?"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
