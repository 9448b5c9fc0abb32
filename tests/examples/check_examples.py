#!/usr/bin/env python3
"""The examples a user runs first: each partitions with nothing computed whole (--strict), divides
its dot FLOPs evenly (per-device FLOPs / ideal <= 1.05, from --stats) and verifies against the
reference interpreter. With --mpi MPIRUN, the verification runs under mpirun instead.
Usage: check_examples.py GSPMD EXAMPLES_DIR [--mpi MPIRUN]"""
import os
import re
import subprocess
import sys

# example, devices, extra run args, MPI ranks x devices per rank
CASES = [
    ("transformer_scan.hlo", 8, [], (4, 2)),
    ("transformer_block.hlo", 8, ["--no-propagate"], (4, 2)),
    ("unet_spatial.hlo", 4, [], (4, 1)),
]


def main():
    gspmd, folder = sys.argv[1], sys.argv[2]
    mpirun = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--mpi" else None
    failed = 0
    for name, n, extra, (ranks, per_rank) in CASES:
        path = os.path.join(folder, name)
        errs = []
        if mpirun:
            cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), gspmd,
                   "run", path, "--num-partitions", str(n), "--devices-per-rank", str(per_rank),
                   "--backend", "mpi", "--verify"] + extra
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if r.returncode != 0 or "matches the reference" not in r.stdout:
                errs.append("mpi verify exit %d: %s %s" % (r.returncode, r.stdout[-300:], r.stderr[:300]))
        else:
            cmd = [gspmd, "run", path, "--num-partitions", str(n), "--verify", "--stats",
                   "--strict"] + extra
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if r.returncode != 0 or "matches the reference" not in r.stdout:
                errs.append("verify exit %d: %s %s" % (r.returncode, r.stdout[-300:], r.stderr[:500]))
            m = re.search(r"per-device FLOPs: .*ratio ([\d.]+)", r.stderr)
            if not m:
                errs.append("no FLOPs line in --stats: %s" % r.stderr[:300])
            elif float(m.group(1)) > 1.05:
                errs.append("per-device FLOPs / ideal %s > 1.05" % m.group(1))
            m = re.search(r"computed whole\s+(\d+)", r.stderr)
            if not m or int(m.group(1)) != 0:
                errs.append("instructions computed whole: %s" % (m.group(1) if m else "?"))
        if errs:
            failed += 1
            print("FAIL %s\n  %s" % (name, "\n  ".join(errs)))
        else:
            print("ok   %s%s" % (name, " (mpi)" if mpirun else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
