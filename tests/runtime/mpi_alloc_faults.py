#!/usr/bin/env python3
"""Allocation failures on the MPI backend: GSPMD_FAULTY (the CLI built with
tests/runtime/fault_alloc.c) runs verified partitioned programs under MPIRUN and fails the k-th
interpreter or runtime allocation (src/base/sysalloc.h) of rank 0, for k over the whole run (every
one of the first 12, which make the communicator and the inputs, then evenly spaced; all of them
with GSPMD_MPI_FAULTS_ALL=1, which takes minutes). Each run
must end within seconds with status 1 and an error on stderr (or, where the failed allocation had
a fallback, with status 0 and its outputs matching the reference), never crash or hang: the other
ranks must not wait for the failed one. Both communicators are walked: one device per rank, and
two devices per rank (the hybrid one).
Usage: mpi_alloc_faults.py GSPMD_FAULTY MPIRUN PARTITION_DIR"""
import os
import subprocess
import sys

faulty, mpirun, folder = sys.argv[1], sys.argv[2], sys.argv[3]
BASE = [mpirun, "--allow-run-as-root", "--oversubscribe"]
# (file, ranks, devices per rank): programs with each kind of collective.
CASES = [("mlp_2d.hlo", 2, 2), ("transpose_all_to_all.hlo", 2, 2), ("slice_halo.hlo", 4, 1)]
PER_CASE = 24  # runs with a failure per case (each takes about a second)
BAD = ("AddressSanitizer", "runtime error", "Segmentation", "core dumped", "Assertion",
       "internal:")


def run(path, ranks, per_rank, env_extra, timeout=60):
    env = dict(os.environ, **env_extra)
    cmd = BASE + ["-np", str(ranks), faulty, "run", path, "--num-partitions",
                  str(ranks * per_rank), "--devices-per-rank", str(per_rank), "--backend", "mpi",
                  "--verify", "--no-propagate", "--timeout", "20"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", ""
    return p.returncode, p.stdout, p.stderr


fails = walked = 0
for name, ranks, per_rank in CASES:
    path = os.path.join(folder, name)
    rc, out, err = run(path, ranks, per_rank, {"GSPMD_COUNT_ALLOC": "1"})
    count = [l for l in err.splitlines() if l.startswith("gspmd_faulty:")]
    if rc != 0 or "matches the reference" not in out or not count:
        print("FAIL %s: the clean run did not verify (exit %s)\n%s" % (name, rc, err[-2000:]))
        fails += 1
        continue
    n = int(count[0].split()[1])
    ks = list(range(1, min(n, 12) + 1))
    step = max(1, (n - 12) // (PER_CASE - 12)) if n > 12 else 1
    if os.environ.get("GSPMD_MPI_FAULTS_ALL"):
        step = 1
    ks += list(range(13, n + 1, step))
    for k in ks:
        rc, out, err = run(path, ranks, per_rank, {"GSPMD_FAIL_ALLOC": str(k)})
        walked += 1
        what = None
        if rc is None:
            what = "hung (no end within 60 s)"
        elif any(b in err for b in BAD):
            what = "crashed"
        elif rc == 0 and "matches the reference" not in out:
            what = "exit 0 without matching the reference"
        elif rc != 0 and "error" not in err:
            what = "exit %d without an error message" % rc
        if what:
            print("FAIL %s on %d ranks x %d: allocation %d of %d failed on rank 0: %s\n%s"
                  % (name, ranks, per_rank, k, n, what, err[-2000:]))
            fails += 1
    print("%s on %d ranks x %d devices: %d allocations on rank 0, %d walked"
          % (name, ranks, per_rank, n, len(ks)))
print("%d runs with one failed allocation, %d failures" % (walked, fails))
sys.exit(1 if fails else 0)
