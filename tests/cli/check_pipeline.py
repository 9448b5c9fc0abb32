#!/usr/bin/env python3
"""The commands that compile share one pipeline and one vocabulary (issue 24).
Usage: check_pipeline.py GSPMD VERSION

- `gspmd --version` and `gspmd version` print `gspmd VERSION`.
- `partition`, `run` and `cost` each accept both --propagate and --no-propagate, and their
  --help says which is the default (partition: XLA's partitioner alone for HLO input, propagation
  for StableHLO input, as JAX does; run, cost: propagate), and partition does what it says.
- `partition` and `cost` go through the same compile (gs_compile): on every input `partition`
  rejects, `cost` rejects it with the same errors; what `partition --no-propagate` prints is
  what plain `partition` prints.
"""
import os
import subprocess
import sys
import tempfile

gspmd, version = sys.argv[1], sys.argv[2]
failures = []


def run(args):
    p = subprocess.run([gspmd] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


for args in (["--version"], ["version"]):
    rc, out, err = run(args)
    if rc != 0 or out != "gspmd %s\n" % version:
        failures.append("%s: want 'gspmd %s'; got exit %d, %r %r" % (args, version, rc, out, err))

DEFAULTS = {"partition": {"--no-propagate": "(the default for HLO input)",
                          "--propagate": "(the default for StableHLO"},
            "run": {"--propagate": "(the default)"}, "cost": {"--propagate": "(the default)"}}
for cmd, default in DEFAULTS.items():
    rc, out, _ = run([cmd, "--help"])
    lines = out.splitlines()
    for flag in ("--propagate", "--no-propagate"):
        said = [l for l in lines if l.strip().startswith(flag + " ")]
        mark = default.get(flag)
        if rc != 0 or not said:
            failures.append("%s --help: no line explains %s" % (cmd, flag))
        elif (mark and mark not in said[0]) or (not mark and "(the default" in said[0]):
            failures.append("%s --help: %s should%s be marked %s: %r"
                            % (cmd, flag, "" if mark else " not", mark or "(the default)",
                               said[0]))

# partition's default follows its input: StableHLO propagates, HLO does not.
MLIR = """module @jit_f attributes {mhlo.num_partitions = 2 : i32} {
  func.func public @main(%arg0: tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}) -> (tensor<8x4xf32>) {
    %0 = stablehlo.negate %arg0 : tensor<8x4xf32>
    %1 = stablehlo.add %0, %arg0 : tensor<8x4xf32>
    return %1 : tensor<8x4xf32>
  }
}
"""
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "f.mlir")
    with open(path, "w") as f:
        f.write(MLIR)
    with open(os.path.join(tmp, "f.hlo"), "w") as f:
        f.write(run(["parse", path, "--emit", "hlo"])[1])
    outs = {}
    for name in ("f.mlir", "f.hlo"):
        for extra in ([], ["--propagate"], ["--no-propagate"]):
            rc, out, err = run(["partition", os.path.join(tmp, name)] + extra)
            outs[name, tuple(extra)] = out
            if rc != 0:
                failures.append("partition %s %s: exit %d: %s" % (name, extra, rc, err.strip()))
    if outs["f.mlir", ()] != outs["f.mlir", ("--propagate",)] or \
            outs["f.mlir", ()] == outs["f.mlir", ("--no-propagate",)]:
        failures.append("partition of StableHLO input should propagate by default")
    if outs["f.hlo", ()] != outs["f.hlo", ("--no-propagate",)] or \
            outs["f.hlo", ()] == outs["f.hlo", ("--propagate",)]:
        failures.append("partition of HLO input should not propagate by default")

GOOD = """HloModule good
ENTRY e {
  x = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}
  w = f32[4,6] parameter(1)
  d = f32[8,6] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[8,6] tanh(d)
}
"""
BAD = {
    "devices": """HloModule bad
ENTRY e {
  x = f32[6,4] parameter(0), sharding={devices=[3,1]<=[3]}
  ROOT y = f32[6,4] negate(x)
}
""",
    "num_partitions": """HloModule bad, num_partitions=4
ENTRY e {
  x = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}
  ROOT y = f32[8,4] negate(x)
}
""",
    "unbounded": """HloModule bad
ENTRY e {
  x = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}
  y = f32[8,?] negate(x)
  ROOT z = f32[8,4] copy(y)
}
""",
    "verify": """HloModule bad
ENTRY e {
  x = f32[8,4] parameter(0)
  ROOT y = f32[8,5] negate(x)
}
""",
}
with tempfile.TemporaryDirectory() as tmp:
    good = os.path.join(tmp, "good.hlo")
    with open(good, "w") as f:
        f.write(GOOD)
    base = run(["partition", good, "--num-partitions", "2"])
    same = run(["partition", good, "--num-partitions", "2", "--no-propagate"])
    if base[0] != 0 or base != same:
        failures.append("partition and partition --no-propagate differ: %r / %r"
                        % (base[2], same[2]))
    prop = run(["partition", good, "--num-partitions", "2", "--propagate"])
    # Propagated, the dot takes x's batch sharding (4 rows a device); as written it is
    # replicated (x gathered first).
    if prop[0] != 0 or "f32[4,6] dot(" not in prop[1] or "f32[4,6] dot(" in base[1]:
        failures.append("partition --propagate did not propagate: %s" % prop[2])
    for cmd in (["run", "--verify"], ["cost"]):
        for flag in ("--propagate", "--no-propagate"):
            rc, out, err = run([cmd[0], good, "--num-partitions", "2", flag] + cmd[1:])
            if rc != 0:
                failures.append("%s %s: exit %d: %s" % (cmd[0], flag, rc, err.strip()))
    # Without --num-partitions, a module that declares no device count takes --mesh's.
    for cmd in (["partition"], ["cost"], ["run", "--verify"]):
        rc, out, err = run([cmd[0], good, "--mesh", "a=2", "--shard", "x=a,None"] + cmd[1:])
        if rc != 0:
            failures.append("%s --mesh a=2 without --num-partitions: exit %d: %s"
                            % (cmd[0], rc, err.strip()))
        elif cmd[0] == "partition" and "f32[4,4] parameter(0)" not in out:
            failures.append("partition --mesh a=2: x not split over the mesh's 2 devices:\n%s"
                            % out)
    # A module that declares its device count keeps it: a mesh of another size is an error.
    d4 = os.path.join(tmp, "d4.hlo")
    with open(d4, "w") as f:
        f.write("HloModule d, num_partitions=4\nENTRY e {\n  ROOT x = f32[8] parameter(0)\n}\n")
    rc, _, err = run(["partition", d4, "--mesh", "a=2", "--shard", "x=a"])
    if rc != 1 or "partitioned for 4 devices" not in err:
        failures.append("partition of a 4-device module with --mesh a=2: want exit 1 naming the "
                        "4 devices; got %d: %s" % (rc, err.strip()))
    rc, _, err = run(["partition", good, "--mesh", "a="])
    if rc != 1 or "--mesh:1:3: error:" not in err:
        failures.append("partition --mesh a=: want exit 1 and a located error; got %d: %s"
                        % (rc, err.strip()))
    extra = {"shard": ["--mesh", "a=2", "--shard", "nothing_matches=a,None"]}
    cases = [(k, v, []) for k, v in BAD.items()] + [("shard", GOOD, extra["shard"])]
    for name, text, args in cases:
        path = os.path.join(tmp, name + ".hlo")
        with open(path, "w") as f:
            f.write(text)
        for flag in ("--propagate", "--no-propagate"):
            p = run(["partition", path, "--num-partitions", "2", flag] + args)
            c = run(["cost", path, "--num-partitions", "2", flag] + args)
            if p[0] != 1 or "error:" not in p[2]:
                failures.append("partition %s %s: want exit 1 and an error; got %d: %s"
                                % (name, flag, p[0], p[2].strip()))
            if c[0] != p[0] or c[2] != p[2]:
                failures.append("cost %s %s: want partition's errors\n    %s\ngot exit %d:\n    %s"
                                % (name, flag, p[2].strip(), c[0], c[2].strip()))

for f in failures:
    print("FAIL " + f)
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
