#!/usr/bin/env python3
"""run_steps.py [GSPMD] [--steps K] — issue 28's measure of `gspmd run --steps`: per step on 2
devices (threads) against `gspmd eval --steps` on one thread, for
  - the bench MLP (x f32[1024,1024], 8 layers of w1 f32[1024,4096], tanh, w2 f32[4096,1024],
    residual), tensor parallel (Megatron) over 2;
  - a generated Transformer training step (tools/gen.py transformer --layers 2 --batch 8 --seq
    128 --model 512 --ffn 2048 --heads 8 --mesh data=1,model=2 --train), whose updated weights
    are the next step's (input_output_alias).
Both report the mean of the steps after the first. Issue 28 asks run >= 1.8x eval per step.
A timing: on a shared machine, compare ratios from one run."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from autoshard_run import mlp, pop_option, step_times  # noqa: E402


def per_step(cmd, env=None):
    return step_times(cmd, env)[0]


def main():
    args = sys.argv[1:]
    steps = pop_option(args, "--steps", "20")
    gspmd = args[0] if args else os.path.join(ROOT, "build", "gspmd")
    print("| program | eval per step (1 thread) | run per step (2 devices) | eval / run |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        m = os.path.join(tmp, "mlp.hlo")
        with open(m, "w") as f:
            f.write(mlp(8, "tp"))
        t = os.path.join(tmp, "t.hlo")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen.py"), "transformer",
                        "--layers", "2", "--batch", "8", "--seq", "128", "--model", "512",
                        "--ffn", "2048", "--heads", "8", "--mesh", "data=1,model=2", "--train",
                        "-o", t], check=True, capture_output=True)
        for name, path in (("MLP, 8 layers, Megatron", m), ("Transformer step, 2 layers", t)):
            one = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # eval on one thread
            e = per_step([gspmd, "eval", path, "--steps", steps], one)
            r = per_step([gspmd, "run", path, "--num-partitions", "2", "--steps", steps])
            print("| %s | %.4g s | %.4g s | %.2f |" % (name, e, r, e / r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
