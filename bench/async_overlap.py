#!/usr/bin/env python3
"""bench/async_overlap.py GSPMD [N] — what asynchronous collectives buy on the threads backend.

Two SPMD programs for 2 devices, the same but for one all-reduce: device 0 computes a chain of
N [512,512] dots + tanh before the all-reduce (its operand), device 1 computes such a chain that
does not depend on it, and both add the two. Written as `all-reduce`, device 1 waits for device 0
at the collective and computes its chain after: about twice the chain's time. Written as
`all-reduce-start` / `all-reduce-done`, device 1 starts its part of the collective, computes its
chain while device 0 computes, and meets the result at the done (src/runtime/async.c; the
interpreter runs each -done as late as its first user allows): about one chain's time. Prints
the best of 3 wall times of `gspmd run --spmd` for each, and checks the outputs are equal.
"""
import os
import subprocess
import sys
import tempfile
import time


def chain(n):
    lines = ["%work (p: f32[512,512]) -> f32[512,512] {", "  %p = f32[512,512] parameter(0)"]
    prev = "p"
    for i in range(n):
        lines.append("  %%d%d = f32[512,512] dot(%%%s, %%p), lhs_contracting_dims={1}, "
                     "rhs_contracting_dims={0}" % (i, prev))
        lines.append("  %%s%d = f32[512,512] tanh(%%d%d)" % (i, i))
        prev = "s%d" % i
    lines += ["  ROOT %%r = f32[512,512] copy(%%%s)" % prev, "}"]
    return "\n".join(lines)


def module(mode, n):
    groups = "replica_groups={{0,1}}, use_global_device_ids=true, to_apply=%add"
    if mode == "sync":
        coll, done = "  %%ar = f32[512,512] all-reduce(%%e), channel_id=1, %s\n" % groups, ""
    else:
        coll = "  %%st = f32[512,512] all-reduce-start(%%e), channel_id=1, %s\n" % groups
        done = "  %ar = f32[512,512] all-reduce-done(%st)\n"
    return """HloModule overlap_%s

%%add (a: f32[], b: f32[]) -> f32[] {
  %%a = f32[] parameter(0)
  %%b = f32[] parameter(1)
  ROOT %%s = f32[] add(%%a, %%b)
}

%%id (p: f32[512,512]) -> f32[512,512] {
  %%p = f32[512,512] parameter(0)
  ROOT %%r = f32[512,512] copy(%%p)
}

%s

ENTRY %%main (x: f32[512,512]) -> f32[512,512] {
  %%x = f32[512,512] parameter(0)
  %%pid = u32[] partition-id()
  %%zero = u32[] constant(0)
  %%is0 = pred[] compare(%%pid, %%zero), direction=EQ
  %%e = f32[512,512] conditional(%%is0, %%x, %%x), true_computation=%%work, false_computation=%%id
%s  %%is1 = pred[] not(%%is0)
  %%w = f32[512,512] conditional(%%is1, %%x, %%x), true_computation=%%work, false_computation=%%id
%s  ROOT %%out = f32[512,512] add(%%ar, %%w)
}
""" % (mode, chain(n), coll, done)


def main():
    gspmd = sys.argv[1] if len(sys.argv) > 1 else "build/gspmd"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    tmp = tempfile.mkdtemp()
    best, outs = {}, {}
    for mode in ("sync", "async"):
        path = os.path.join(tmp, mode + ".hlo")
        with open(path, "w") as f:
            f.write(module(mode, n))
        out = os.path.join(tmp, "out_" + mode)
        for _ in range(3):
            t0 = time.monotonic()
            subprocess.run([gspmd, "run", "--spmd", path, "--num-partitions", "2", "--output-dir",
                            out], check=True, stdout=subprocess.DEVNULL)
            t = time.monotonic() - t0
            best[mode] = min(best.get(mode, t), t)
        outs[mode] = [open(os.path.join(out, "dev%d" % d, "out0.npy"), "rb").read()
                      for d in range(2)]
    same = outs["sync"] == outs["async"]
    print("2 devices, device 0 computing %d [512,512] dots before an all-reduce, device 1 as "
          "many independent of it:" % n)
    print("  all-reduce                      %.3f s (best of 3)" % best["sync"])
    print("  all-reduce-start / -done        %.3f s: %.2fx faster; outputs %s" %
          (best["async"], best["sync"] / best["async"], "equal" if same else "DIFFER"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
