#!/usr/bin/env python3
"""run_cli.py [GSPMD] [--mpi] [--raw S] — issue 28's first measure: what a user typing
`gspmd run` gets per MLP layer, against raw OpenBLAS on one thread.

The bench MLP (x f32[1024,1024]; per layer w1 f32[1024,4096], tanh, w2 f32[4096,1024],
residual; Megatron tensor parallel over 2) is run end to end by
  gspmd run FILE --num-partitions 2 --no-propagate --output-dir D        (threads)
  mpirun -np 2 gspmd run FILE --backend mpi --no-propagate --output-dir D  (--mpi)
for 8 and 2 layers, best of 3 each; per layer = (t8 - t2) / 6, so what does not grow with the
layers cancels. Raw is bench_run's per-layer cblas_sgemm + tanhf + add on one BLAS thread
(build/bench/bench_run 2 6 prints it; --raw S gives it). Also printed: the 8-layer run's user
and system CPU time (the issue asks system < 10% of wall) and the ratio raw / CLI (asks >= 1.6).
A timing: on a shared machine, compare ratios from one run."""
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from autoshard_run import mlp, pop_option  # noqa: E402

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def timed(cmd, env=None):
    """(wall, user, sys) seconds of one run of cmd (its children's CPU time)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr.strip()[-400:]))
    return wall, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime


def raw_per_layer(gspmd):
    b = os.path.join(os.path.dirname(gspmd), "bench", "bench_run")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([b, "2", "6"], capture_output=True, text=True, env=env).stdout
    m = re.search(r"raw OpenBLAS, 1 thread\s+([0-9.]+) s", out)
    if not m:
        raise RuntimeError("bench_run printed no raw figure:\n" + out)
    return float(m.group(1))


def main():
    args = sys.argv[1:]
    use_mpi = "--mpi" in args
    if use_mpi:
        args.remove("--mpi")
    raw = pop_option(args, "--raw", None)
    raw = float(raw) if raw is not None else None
    gspmd = os.path.abspath(args[0] if args else os.path.join(ROOT, "build", "gspmd"))
    if raw is None:
        raw = raw_per_layer(gspmd)
    env = dict(os.environ, **MPI_ENV)
    with tempfile.TemporaryDirectory() as tmp:
        best = {}
        for layers in (8, 2):
            f = os.path.join(tmp, "mlp%d.hlo" % layers)
            with open(f, "w") as h:
                h.write(mlp(layers, "tp"))
            out = os.path.join(tmp, "out%d" % layers)
            if use_mpi:
                cmd = ["mpirun", "--allow-run-as-root", "-np", "2", gspmd, "run", f,
                       "--backend", "mpi", "--no-propagate", "--output-dir", out]
            else:
                cmd = [gspmd, "run", f, "--num-partitions", "2", "--no-propagate",
                       "--output-dir", out]
            best[layers] = min((timed(cmd, env) for _ in range(3)), key=lambda t: t[0])
        per = (best[8][0] - best[2][0]) / 6
        w, u, s = best[8]
        print("| backend | 8 layers (wall, user, sys) | 2 layers | per layer | raw 1 thread | raw / CLI | sys / wall |")
        print("|---|---|---|---|---|---|---|")
        print("| %s | %.3f s, %.3f, %.3f | %.3f s | %.4f s | %.4f s | %.2f | %.1f%% |"
              % ("mpi" if use_mpi else "threads", w, u, s, best[2][0], per, raw, raw / per,
                 100 * s / w))
    return 0


if __name__ == "__main__":
    sys.exit(main())
