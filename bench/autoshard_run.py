#!/usr/bin/env python3
"""autoshard_run.py [GSPMD] [--reps N] [--machine NAME|FILE] — issue 27's measure of `gspmd autoshard` on this machine:
the auto-sharded program, run, against data and tensor parallelism, and against its prediction.

Two programs on 2 devices of the threads backend (`gspmd run`, one thread per device):
  - the bench MLP (issue 28's): x f32[1024,1024], per layer w1 f32[1024,4096], tanh,
    w2 f32[4096,1024], residual;
  - a generated Transformer training step (tools/gen.py transformer --train, f32).
Each in three shardings: data parallel (the batch split, weights whole), tensor parallel
(Megatron: weights split over the 2 devices), and autoshard's from the mesh alone
(`gspmd autoshard --mesh d=2 --machine this-cpu --ignore-shardings`).

Measured per layer: the step time `gspmd run --steps 4` reports (the program alone, steps after
the first, best of --reps runs, default 3) with L2 layers less that with L1 layers, over L2 - L1
(what the program adds per layer). Predicted the same way
from `gspmd cost --machine this-cpu` (the profile of one core of this kind of machine;
--machine FILE takes another, e.g. the one `gspmd calibrate` writes for this machine), the
profile autoshard chooses by too. The data and tensor parallel programs annotate the inputs
and the output and propagate; autoshard's annotates every value. Issue 27 asks: auto at least as fast as the better of data
and tensor parallel, and its prediction within 0.7-1.3x of the measurement.
Not a test: timings on a shared 2-core machine are noisy; the figures are ratios from one run.
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
GEN = os.path.join(ROOT, "tools", "gen.py")


def mlp(layers, sharding):
    """The bench MLP, `sharding` dp (rows of x), tp (Megatron) or none."""
    x = {"dp": "{devices=[2,1]<=[2]}", "tp": "{replicated}", "none": None}[sharding]
    w1 = {"dp": "{replicated}", "tp": "{devices=[1,2]<=[2]}", "none": None}[sharding]
    w2 = {"dp": "{replicated}", "tp": "{devices=[2,1]<=[2]}", "none": None}[sharding]
    sh = lambda s: ", sharding=%s" % s if s else ""
    params = ["x: f32[1024,1024]"]
    body = ["  %%x = f32[1024,1024] parameter(0)%s" % sh(x)]
    cur = "%x"
    for l in range(layers):
        params += ["w1_%d: f32[1024,4096]" % l, "w2_%d: f32[4096,1024]" % l]
        body += [
            "  %%w1_%d = f32[1024,4096] parameter(%d)%s" % (l, 2 * l + 1, sh(w1)),
            "  %%w2_%d = f32[4096,1024] parameter(%d)%s" % (l, 2 * l + 2, sh(w2)),
            "  %%h_%d = f32[1024,4096] dot(%s, %%w1_%d), lhs_contracting_dims={1}, "
            "rhs_contracting_dims={0}" % (l, cur, l),
            "  %%t_%d = f32[1024,4096] tanh(%%h_%d)" % (l, l),
            "  %%o_%d = f32[1024,1024] dot(%%t_%d, %%w2_%d), lhs_contracting_dims={1}, "
            "rhs_contracting_dims={0}" % (l, l, l),
            "  %%r_%d = f32[1024,1024] add(%s, %%o_%d)" % (l, cur, l),
        ]
        cur = "%%r_%d" % l
    body[-1] = "  ROOT" + body[-1][1:] + sh(x)
    return ("HloModule mlp, num_partitions=2\n\nENTRY %%main (%s) -> f32[1024,1024] {\n%s\n}\n"
            % (", ".join(params), "\n".join(body)))


def transformer(layers, mesh, out):
    subprocess.run([sys.executable, GEN, "transformer", "--layers", str(layers), "--batch", "8",
                    "--seq", "128", "--model", "512", "--ffn", "2048", "--heads", "8",
                    "--mesh", mesh, "--train", "-o", out], check=True, capture_output=True)


def pop_option(args, name, default):
    """The value after `name` in args (both removed from args), or default."""
    if name not in args:
        return default
    i = args.index(name)
    value = args[i + 1]
    del args[i:i + 2]
    return value


def step_times(cmd, env=None):
    """(mean, best) seconds per step after the first that `gspmd run|eval ... --steps K`
    reports on stderr (eval reports no best: the mean twice)."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r"then ([0-9.e+-]+) s per step(?: \(best ([0-9.e+-]+) s\))?", p.stderr)
    if p.returncode != 0 or not m:
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr.strip()[-300:]))
    return float(m.group(1)), float(m.group(2) or m.group(1))


def timed(cmd, reps):
    """The best per-step time of `gspmd run ... --steps 4` over reps runs."""
    return min(step_times(cmd + ["--steps", "4"])[1] for _ in range(reps))


def predicted(gspmd, path, prop, machine):
    p = subprocess.run([gspmd, "cost", path, "--num-partitions", "2", "--machine", machine]
                       + prop, capture_output=True, text=True)
    m = re.search(r"step ([0-9.e+-]+) s", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError("cost %s: %s" % (path, p.stderr.strip()[-300:]))
    return float(m.group(1))


def auto(gspmd, src, dst, machine):
    p = subprocess.run([gspmd, "autoshard", src, "--mesh", "d=2", "--machine", machine,
                        "--ignore-shardings", "-o", dst], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("autoshard %s: %s" % (src, p.stderr.strip()[-300:]))


def main():
    args = sys.argv[1:]
    reps = int(pop_option(args, "--reps", 3))
    machine = pop_option(args, "--machine", "this-cpu")
    gspmd = args[0] if args else os.path.join(ROOT, "build", "gspmd")
    print("| program | sharding | measured per layer | predicted per layer | predicted / measured |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for prog, (l1, l2) in (("MLP", (2, 8)), ("Transformer step", (2, 6))):
            rows = {}
            for kind in ("dp", "tp", "auto"):
                paths = []
                for layers in (l1, l2):
                    path = os.path.join(tmp, "%s_%s_%d.hlo" % (prog[:3], kind, layers))
                    if prog == "MLP":
                        with open(path, "w") as f:
                            f.write(mlp(layers, "none" if kind == "auto" else kind))
                    else:
                        mesh = {"dp": "data=2,model=1", "tp": "data=1,model=2",
                                "auto": "data=2,model=1"}[kind]
                        transformer(layers, mesh, path)
                    if kind == "auto":
                        auto(gspmd, path, path + ".auto.hlo", machine)
                        path += ".auto.hlo"
                    paths.append(path)
                # dp and tp annotate a few values and propagate; auto annotates every one
                prop = ["--no-propagate"] if kind == "auto" else []
                run = lambda p: timed([gspmd, "run", p, "--num-partitions", "2",
                                       "--no-share-work", "--output-dir",
                                       os.path.join(tmp, "out")] + prop, reps)
                meas = (run(paths[1]) - run(paths[0])) / (l2 - l1)
                pred = (predicted(gspmd, paths[1], prop, machine) -
                        predicted(gspmd, paths[0], prop, machine)) / (l2 - l1)
                rows[kind] = (meas, pred)
                print("| %s | %s | %.4g s | %.4g s | %.2f |" % (
                    prog, {"dp": "data parallel", "tp": "tensor parallel (Megatron)",
                           "auto": "autoshard"}[kind], meas, pred, pred / meas), flush=True)
            best = min(rows["dp"][0], rows["tp"][0])
            print("| %s | autoshard / the better of dp and tp | %.2f | | |" % (
                prog, rows["auto"][0] / best), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
