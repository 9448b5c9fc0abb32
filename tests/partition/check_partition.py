#!/usr/bin/env python3
"""Partitioner file tests: each tests/partition/*.hlo starts with `// KEY: value` lines.

  // PARTITION: ARGS        arguments of `gspmd partition FILE ARGS` (required)
  // ROOT-SHAPE: SHAPE      the partitioned entry root's per-device shape
  // COLLECTIVES: K=N ...   exact counts of collectives in the program (all-reduce, all-gather,
                            reduce-scatter, all-to-all, collective-permute)
  // WARNING: TEXT          partition prints a warning containing TEXT (else: no warning)
  // ERROR: TEXT            partition fails (exit 1) with TEXT in its stderr
  // VERIFY[: RUN-ARGS]     `gspmd run FILE ARGS --no-propagate --verify RUN-ARGS` matches the
                            reference (RUN-ARGS: e.g. --seed S for the inputs that showed a bug;
                            with --propagate in ARGS, run propagates instead)
  // RUN-ERROR: ARGS => TEXT  `gspmd run FILE ARGS` fails (exit 1) with TEXT in stderr; an
                            argument NAME=@TYPE[DIMS] becomes a .npy of zeros of that type/shape
The partitioned program must also parse back and print the same text.
Usage: check_partition.py GSPMD DIR [--mpi MPIRUN]
With --mpi only the VERIFY files of at most 6 devices run, each under
`MPIRUN -np N gspmd run ... --backend mpi --verify` (one rank per device).
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

COLLS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
NPY = {"f32": ("<f4", "f"), "s32": ("<i4", "i"), "f64": ("<f8", "d")}


def write_npy(path, spec):
    m = re.match(r"(\w+)\[([\d,]*)\]", spec)
    ty, dims = m.group(1), [int(x) for x in m.group(2).split(",") if x]
    descr, fmt = NPY[ty]
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d," % d for d in dims))
    hdr += " " * (63 - (len(hdr) + 10) % 64) + "\n"
    n = 1
    for d in dims:
        n *= d
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode("latin1"))
        f.write(struct.pack("<" + fmt * n, *([0] * n)))


def root_shape(text):
    in_entry = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("ENTRY"):
            in_entry = True
        elif in_entry and s.startswith("ROOT"):
            m = re.match(r"ROOT\s+%?[\w.\-]+\s*=\s*(\([^=]*?\)|[a-z0-9]+\[[\d,]*\])", s)
            return m.group(1) if m else None
    return None


def check_mpi(gspmd, path, mpirun):
    text = open(path).read()
    args, verify, run_args = None, False, []
    for line in text.splitlines():
        m = re.match(r"//\s*([A-Z\-]+)(?::\s*(.*))?$", line.strip())
        if not m:
            continue
        if m.group(1) == "PARTITION":
            args = m.group(2).split()
        if m.group(1) == "VERIFY":
            verify = True
            run_args = (m.group(2) or "").split()
    n = int(args[args.index("--num-partitions") + 1]) if args and "--num-partitions" in args else 0
    if not verify or n > 6:
        return None
    prop = ["--no-propagate"] if "--propagate" not in args else []
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n), gspmd, "run", path,
           "--verify", "--backend", "mpi"] + prop + [a for a in args if a != "--propagate"] + run_args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or "matches the reference" not in r.stdout:
        return ["mpi verify exit %d: %s %s"
                % (r.returncode, r.stdout.strip()[-300:], r.stderr.strip()[:300])]
    return []


def check(gspmd, path, tmp):
    text = open(path).read()
    keys = {}
    for line in text.splitlines():
        m = re.match(r"//\s*([A-Z\-]+)(?::\s*(.*))?$", line.strip())
        if not m:
            if line.strip() and not line.startswith("//"):
                break
            continue
        keys.setdefault(m.group(1), []).append((m.group(2) or "").strip())
    errs = []
    args = keys["PARTITION"][0].split()
    p = subprocess.run([gspmd, "partition", path] + args, capture_output=True, text=True,
                       timeout=300)
    if "ERROR" in keys:
        want = keys["ERROR"][0]
        if p.returncode != 1 or want not in p.stderr:
            errs.append("expected exit 1 with '%s', got exit %d: %s"
                        % (want, p.returncode, p.stderr.strip()[:300]))
        return errs
    if p.returncode != 0:
        return ["partition exit %d: %s" % (p.returncode, p.stderr.strip()[:500])]
    out = p.stdout
    if "WARNING" in keys:
        if keys["WARNING"][0] not in p.stderr:
            errs.append("expected a warning with '%s', stderr: %s"
                        % (keys["WARNING"][0], p.stderr.strip()[:300]))
    elif "warning" in p.stderr:
        errs.append("unexpected warning: %s" % p.stderr.strip()[:300])
    if "ROOT-SHAPE" in keys and root_shape(out) != keys["ROOT-SHAPE"][0]:
        errs.append("root shape %s, expected %s" % (root_shape(out), keys["ROOT-SHAPE"][0]))
    if "COLLECTIVES" in keys:
        for item in keys["COLLECTIVES"][0].split():
            k, n = item.split("=")
            have = len(re.findall(r"\s%s\(" % re.escape(k), out))
            if have != int(n):
                errs.append("%d %s, expected %s" % (have, k, n))
    q = subprocess.run([gspmd, "parse", "-"], input=out, capture_output=True, text=True)
    if q.returncode != 0 or q.stdout != out:
        errs.append("the partitioned program does not round-trip: %s" % q.stderr.strip()[:300])
    if "VERIFY" in keys:
        # `run` propagates unless told not to: files partitioned with --propagate run that way.
        prop = ["--no-propagate"] if "--propagate" not in args else []
        rargs = [a for a in args if a != "--propagate"]
        r = subprocess.run([gspmd, "run", path, "--verify"] + prop + rargs
                           + keys["VERIFY"][0].split(), capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            errs.append("verify exit %d: %s %s"
                        % (r.returncode, r.stdout.strip()[-300:], r.stderr.strip()[:300]))
    for spec in keys.get("RUN-ERROR", []):
        rargs, want = [x.strip() for x in spec.split("=>")]
        argv = []
        for a in rargs.split():
            m = re.match(r"(\w+)=@(.+)$", a)
            if m:
                f = os.path.join(tmp, "%s.npy" % m.group(1))
                write_npy(f, m.group(2))
                a = "%s=%s" % (m.group(1), f)
            argv.append(a)
        r = subprocess.run([gspmd, "run", path] + argv, capture_output=True, text=True, timeout=300)
        if r.returncode != 1 or want not in r.stderr:
            errs.append("run %s: expected exit 1 with '%s', got exit %d: %s"
                        % (rargs, want, r.returncode, r.stderr.strip()[:300]))
    return errs


def main():
    gspmd, folder = sys.argv[1], sys.argv[2]
    mpirun = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--mpi" else None
    files = sorted(f for f in os.listdir(folder) if f.endswith(".hlo"))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            if mpirun:
                errs = check_mpi(gspmd, os.path.join(folder, f), mpirun)
                if errs is None:
                    continue
            else:
                errs = check(gspmd, os.path.join(folder, f), tmp)
            if errs:
                failed += 1
                print("FAIL %s\n  %s" % (f, "\n  ".join(errs)))
            else:
                print("ok   %s" % f)
    print("%d of %d partition files passed" % (len(files) - failed, len(files)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
