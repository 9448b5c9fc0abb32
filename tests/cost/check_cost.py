#!/usr/bin/env python3
"""check_cost.py GSPMD [FLOPS_PY] — `gspmd cost`'s per-device FLOPs against an independent count.

For every example and (when ../shared is present) every real dump, with the shardings it is
documented with, `gspmd partition` writes the per-device program and FLOPS_PY (an independent
dot/convolution FLOP counter, ../shared/tools/flops.py by default) counts it, each computation
once per call site; `gspmd cost --json` must report the same figure as site_matmul_flops, and a
step's matmul_flops at least that (loops run their trip counts). Without FLOPS_PY the cases are
still run and checked for consistency (site FLOPs <= step FLOPs, MFU within (0, 1]).
Exits 1 on any mismatch.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
REAL = os.path.normpath(os.path.join(ROOT, "..", "shared", "real"))

# (file, devices, extra arguments); paths under examples/ or ../shared/real.
CASES = [
    ("examples/mlp.hlo", 4, ["--mesh", "data=2,model=2", "--shard", "x=data,None",
                             "--shard", "w1=None,model"]),
    ("examples/transformer_block.hlo", 8, ["--no-propagate"]),
    ("examples/transformer_scan.hlo", 8, []),
    ("examples/unet_spatial.hlo", 4, []),
    ("examples/mlp_data_parallel_spmd.hlo", 4, ["--spmd"]),
    ("REAL/nv_maxtext_1n1g_jit_train_step_before_optimization.hlo", 8, []),
    ("REAL/resnet50_keras_jax_f32.hlo", 2, ["--mesh", "h=2", "--shard", "data.1=None,h,None,None"]),
    ("REAL/resnet50_keras_jax_f32.hlo", 4, ["--mesh", "h=2,w=2", "--shard",
                                            "data.1=None,h,w,None"]),
    ("REAL/dlrm_keras_jax_f32_train_step.hlo", 2, ["--mesh", "b=2", "--shard", "data_*=b",
                                                   "--shard", "data_0___h*=b,None"]),
    ("REAL/mha_block_1x12x128x64_bf16.hlo", 4, ["--mesh", "h=4", "--shard",
                                                "q.1=None,h,None,None", "--shard",
                                                "k.1=None,h,None,None", "--shard",
                                                "v.1=None,h,None,None"]),
    ("REAL/hlo_llama31_70b_bf16_16x8.hlo", 128, ["--spmd"]),
]


def main():
    gspmd = os.path.abspath(sys.argv[1])
    flops_py = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "..", "shared", "tools",
                                                                     "flops.py")
    have_counter = os.path.exists(flops_py)
    failures = ran = 0
    with tempfile.TemporaryDirectory() as tmp:
        for rel, n, extra in CASES:
            path = rel.replace("REAL", REAL) if rel.startswith("REAL") else os.path.join(ROOT, rel)
            if not os.path.exists(path):
                continue
            ran += 1
            name = "%s on %d" % (os.path.basename(path), n)
            r = subprocess.run([gspmd, "cost", path, "--num-partitions", str(n), "--json",
                                "--machine", "h100"] + extra, capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL %s: cost exit %d: %s" % (name, r.returncode, r.stderr.strip()[:300]))
                failures += 1
                continue
            c = json.loads(r.stdout)
            problems = []
            if c["matmul_flops"] + 1e-9 < c["site_matmul_flops"]:
                problems.append("step FLOPs %g < per-site FLOPs %g" % (c["matmul_flops"],
                                                                       c["site_matmul_flops"]))
            if "mfu" in c and not (0 < c["mfu"] <= 1):
                problems.append("MFU %g outside (0, 1]" % c["mfu"])
            if have_counter:
                if "--spmd" in extra:
                    program = path
                else:
                    args = [a for a in extra if a != "--no-propagate"]
                    prop = [] if "--no-propagate" in extra else ["--propagate"]
                    program = os.path.join(tmp, "p.hlo")
                    with open(program, "w") as f:
                        r = subprocess.run([gspmd, "partition", path, "--num-partitions", str(n)]
                                           + prop + args, stdout=f, stderr=subprocess.PIPE,
                                           text=True)
                    if r.returncode != 0:
                        problems.append("partition exit %d" % r.returncode)
                if not problems:
                    out = subprocess.run([sys.executable, flops_py, program], capture_output=True,
                                         text=True).stdout.split()
                    want = float(out[0]) if out else -1
                    got = c["site_matmul_flops"]
                    if abs(got - want) > 1e-9 * max(1.0, want):
                        problems.append("site FLOPs %.17g, flops.py counts %.17g" % (got, want))
            if problems:
                failures += 1
                print("FAIL %s: %s" % (name, "; ".join(problems)))
            else:
                print("ok   %s: %.6g FLOPs per device per step%s" % (
                    name, c["matmul_flops"], ", MFU %.3f on h100" % c["mfu"] if "mfu" in c else ""))
    print("%d of %d cost cases passed%s" % (ran - failures, ran,
                                           "" if have_counter else " (no flops.py: consistency only)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
