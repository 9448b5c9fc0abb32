#!/usr/bin/env python3
"""Runtime tests: runs each FILE.hlo with `gspmd run --spmd` and checks per-device outputs.

Comment lines in the file:
  // DEVICES: N                      number of devices (--num-partitions)
  // ARGS: --timeout 1               extra arguments
  // DEV<d>.OUT<i>: dtype[dims] v..  expected output i of device d (DEV* = every device)
  // ERROR: text                     the run must exit 1 and stderr contain text (repeatable)
  // ERROR-THREADS: text, ERROR-MPI: text   the same, for one backend only
Expected values are computed by hand from XLA's collective semantics.

Usage: check_run.py GSPMD DIR [--mpi MPIRUN [--per-rank K]] [FILE.hlo ...]
With --mpi the program runs as `MPIRUN -np N/K ... gspmd run --backend mpi --devices-per-rank K`
(K devices per rank, default 1); files with more than 8 devices (or a count K does not divide)
are skipped there."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interp"))
import check_eval as ce  # noqa: E402  (npy reading and value specs)


def run_case(gspmd, path, mpirun, per_rank=1):
    text = open(path).read()
    n, args, outs, errors = None, [], {}, []
    for line in text.splitlines():
        m = re.match(r"\s*//\s*DEVICES:\s*(\d+)", line)
        if m:
            n = int(m.group(1))
        m = re.match(r"\s*//\s*ARGS:\s*(.*)$", line)
        if m:
            args += m.group(1).split()
        m = re.match(r"\s*//\s*DEV(\d+|\*)\.OUT(\d+):\s*(.*)$", line)
        if m:
            outs[(m.group(1), int(m.group(2)))] = ce.parse_spec(m.group(3))
        m = re.match(r"\s*//\s*ERROR(-THREADS|-MPI)?:\s*(.*)$", line)
        if m and (not m.group(1) or (m.group(1) == "-MPI") == bool(mpirun)):
            errors.append(m.group(2).strip())
    if n is None:
        return "no DEVICES line"
    if mpirun and (n > 8 or n % per_rank):
        return None
    tmp = tempfile.mkdtemp(prefix="gspmd-run-")
    try:
        cmd = [gspmd, "run", "--spmd", path, "--num-partitions", str(n), "--output-dir", tmp] + args
        if mpirun:
            cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n // per_rank)] + cmd + \
                  ["--backend", "mpi", "--devices-per-rank", str(per_rank)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if errors:
            missing = [e for e in errors if e not in p.stderr]
            if p.returncode == 0 or missing:
                return "expected failure with %r, got exit %d: %s" % (missing or errors, p.returncode, p.stderr.strip()[:600])
            return None
        if p.returncode != 0:
            return "run exit %d: %s" % (p.returncode, p.stderr.strip()[:600])
        for (dev, i), (dtype, dims, want) in sorted(outs.items()):
            devs = range(n) if dev == "*" else [int(dev)]
            for d in devs:
                f = os.path.join(tmp, "dev%d" % d, "out%d.npy" % i)
                if not os.path.exists(f):
                    return "dev%d/out%d.npy missing" % (d, i)
                descr, shape, got = ce.read_npy(f)
                if shape != dims or descr != ce.DESCR[dtype]:
                    return "dev%d out%d is %s%s, expected %s%s" % (d, i, descr, shape, dtype, dims)
                if any(not ce.close(a, b, None) for a, b in zip(got, want)):
                    return "dev%d out%d = %s, expected %s" % (d, i, got, want)
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    argv = sys.argv[1:]
    mpirun, per_rank = None, 1
    if "--mpi" in argv:
        k = argv.index("--mpi")
        mpirun = argv[k + 1]
        del argv[k:k + 2]
    if "--per-rank" in argv:
        k = argv.index("--per-rank")
        per_rank = int(argv[k + 1])
        del argv[k:k + 2]
    gspmd, folder = argv[0], argv[1]
    files = argv[2:] or sorted(glob.glob(os.path.join(folder, "*.hlo")))
    fails = 0
    for f in files:
        why = run_case(gspmd, f, mpirun, per_rank)
        if why:
            fails += 1
            print("FAIL %s: %s" % (os.path.basename(f), why))
    print("%d files, %d failures%s" % (len(files), fails,
                                       " (mpi, %d device(s) per rank)" % per_rank if mpirun else ""))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
