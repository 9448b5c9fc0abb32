#!/usr/bin/env python3
"""MPI failure paths that need a process launcher:
  1. a rank killed (SIGKILL) in the middle of a run makes mpirun and every other rank end,
     non-zero, within seconds;
  2. --num-partitions that does not match the number of ranks is a clear error on every rank;
  3. a rank stopped (SIGSTOP) in the middle of a run: every other rank's wait times out, names
     the missing device, and the job ends non-zero within seconds of the timeout.
Usage: mpi_failures.py GSPMD MPIRUN DIR"""
import os
import signal
import subprocess
import sys
import tempfile
import time

gspmd, mpirun, folder = sys.argv[1], sys.argv[2], sys.argv[3]
base = [mpirun, "--allow-run-as-root", "--oversubscribe"]
fails = 0
tmp = tempfile.mkdtemp(prefix="gspmd-mpi-")

# 1. kill one rank of a long-running 4-rank job
prog = os.path.join(folder, "long_loop.hlo.txt")
p = subprocess.Popen(base + ["-np", "4", gspmd, "run", "--spmd", prog, "--num-partitions", "4",
                             "--output-dir", tmp, "--backend", "mpi", "--timeout", "30"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
time.sleep(3)
ranks = subprocess.run(["pgrep", "-P", str(p.pid), "-f", "gspmd run"], capture_output=True, text=True).stdout.split()
if len(ranks) != 4:
    print("FAIL kill: expected 4 rank processes, found %s" % ranks)
    fails += 1
    os.killpg(p.pid, signal.SIGKILL)
else:
    os.kill(int(ranks[1]), signal.SIGKILL)
    t0 = time.time()
    try:
        p.wait(timeout=20)
        took = time.time() - t0

        def still_alive():
            out = []
            for r in ranks:
                try:
                    if "Z" not in open("/proc/%s/stat" % r).read().split()[2]:
                        out.append(r)
                except OSError:
                    pass
            return out
        # mpirun may exit while the ranks it killed are still being torn down (slow under
        # sanitizers): they must be gone within seconds, not at the same instant.
        alive = still_alive()
        while alive and time.time() - t0 < 10:
            time.sleep(0.1)
            alive = still_alive()
        if p.returncode == 0 or alive:
            print("FAIL kill: mpirun exit %d, ranks still alive: %s" % (p.returncode, alive))
            fails += 1
        else:
            print("ok   kill: one rank killed; the job ended with status %d after %.1f s" % (p.returncode, took))
    except subprocess.TimeoutExpired:
        print("FAIL kill: the job did not end within 20 s of a rank being killed")
        fails += 1
        os.killpg(p.pid, signal.SIGKILL)

# 2. --num-partitions 4 under 2 ranks
q = subprocess.run(base + ["-np", "2", gspmd, "run", "--spmd", os.path.join(folder, "all_reduce_sum.hlo"),
                           "--num-partitions", "4", "--output-dir", tmp, "--backend", "mpi"],
                   capture_output=True, text=True, timeout=60)
want = "--num-partitions 4, but mpirun started 2 ranks of 1 device each (run mpirun -np 4)"
if q.returncode == 0 or q.stderr.count(want) != 2:
    print("FAIL world size: exit %d, stderr: %s" % (q.returncode, q.stderr[:500]))
    fails += 1
else:
    print("ok   world size: both ranks report: %s" % want)
# 3. stop (SIGSTOP) one rank of the long-running job: the others name it when their waits time out
p = subprocess.Popen(base + ["-np", "4", gspmd, "run", "--spmd", prog, "--num-partitions", "4",
                             "--output-dir", tmp, "--backend", "mpi", "--timeout", "5"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     start_new_session=True)
time.sleep(3)
ranks = subprocess.run(["pgrep", "-P", str(p.pid), "-f", "gspmd run"], capture_output=True, text=True).stdout.split()
if len(ranks) != 4:
    print("FAIL stop: expected 4 rank processes, found %s" % ranks)
    fails += 1
    os.killpg(p.pid, signal.SIGKILL)
else:
    os.kill(int(ranks[1]), signal.SIGSTOP)
    t0 = time.time()
    try:
        out, err = p.communicate(timeout=30)
        took = time.time() - t0
        named = err.count("device 1 did not arrive")
        if p.returncode == 0 or named < 3:
            print("FAIL stop: mpirun exit %d, %d ranks named device 1; stderr: %s"
                  % (p.returncode, named, err[:800]))
            fails += 1
        else:
            print("ok   stop: one rank stopped; %d ranks named it, the job ended with status %d "
                  "after %.1f s (timeout 5 s)" % (named, p.returncode, took))
    except subprocess.TimeoutExpired:
        print("FAIL stop: the job did not end within 30 s of a rank being stopped")
        fails += 1
        os.killpg(p.pid, signal.SIGKILL)
    for r in ranks:
        try:
            os.kill(int(r), signal.SIGKILL)
        except OSError:
            pass
sys.exit(1 if fails else 0)
