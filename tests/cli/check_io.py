#!/usr/bin/env python3
"""The command line checks what it writes and what it reads (issue 11). Usage: check_io.py GSPMD

Writes that fail are errors with exit status != 0 and a message, never a silent success:
  - standard output on a full disk (/dev/full) or a closed pipe, for every command that prints
    (parse, verify, propagate, partition, show-sharding, eval --print, help): exit 1 and
    `error: cannot write standard output: ...` (SIGPIPE is ignored, so a closed pipe is EPIPE);
  - `run`/`eval --output-dir` on a folder that cannot be made, `run --save-program` to a path that
    cannot be written or to a full disk: exit 1 and an error naming the path.
Unwritable places work as root too: a path under a file (/dev/null/x) and /proc.

Bad .npy inputs found by tests/fuzz/fuzz_npy are errors, before anything is allocated for them.
So are modules too large for --max-memory (default: the machine's memory).

partition, cost and run take the device count from the module when --num-partitions is absent.
"""
import os
import struct
import subprocess
import sys
import tempfile

gspmd = sys.argv[1]
failures = []

MODULE = """HloModule io
ENTRY e {
  x = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}
  y = f32[8,4] negate(x)
  ROOT z = f32[8,4] add(x, y)
}
"""


def run(args, stdout=subprocess.DEVNULL, what=None):
    p = subprocess.run([gspmd] + args, stdout=stdout, stderr=subprocess.PIPE, text=True,
                       timeout=60)
    return p.returncode, p.stderr


def expect(name, rc, err, want_in):
    if rc == 0 or rc < 0 or want_in not in err:
        failures.append("%s: want exit 1 with %r on stderr; got exit %d, stderr:\n    %s"
                        % (name, want_in, rc, err.strip().replace("\n", "\n    ")))


def npy(descr, shape_text, payload):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + payload


with tempfile.TemporaryDirectory() as tmp:
    hlo = os.path.join(tmp, "io.hlo")
    with open(hlo, "w") as f:
        f.write(MODULE)
    printing = {
        "parse": ["parse", hlo],
        "verify": ["verify", hlo],
        "propagate": ["propagate", hlo, "--spmd"],
        "partition": ["partition", hlo, "--num-partitions", "2"],
        "show-sharding": ["show-sharding", "{devices=[2,1]<=[2]}", "--shape", "f32[8,4]"],
        "eval --print": ["eval", hlo, "--print"],
        "help": ["help"],
    }
    for name, args in printing.items():
        # The command works when its output can be written ...
        rc, err = run(args)
        if rc != 0:
            failures.append("%s: exit %d writing to /dev/null: %s" % (name, rc, err.strip()))
        # ... and fails, saying so, on a full disk ...
        with open("/dev/full", "w") as full:
            rc, err = run(args, stdout=full)
        expect(name + " > /dev/full", rc, err, "error: cannot write standard output: No space")
        # ... and on a pipe nobody reads.
        r, w = os.pipe()
        os.close(r)
        try:
            rc, err = run(args, stdout=w)
        finally:
            os.close(w)
        expect(name + " | (closed)", rc, err, "error: cannot write standard output: Broken pipe")

    # Output folders and files that cannot be written.
    for bad in ["/dev/null/out", "/proc/gspmd-out"]:
        rc, err = run(["run", hlo, "--num-partitions", "2", "--output-dir", bad])
        expect("run --output-dir " + bad, rc, err, bad)
        rc, err = run(["eval", hlo, "--output-dir", bad])
        expect("eval --output-dir " + bad, rc, err, bad)
    for bad in ["/dev/null/p.hlo", "/proc/gspmd-p.hlo", "/dev/full"]:
        rc, err = run(["run", hlo, "--num-partitions", "2", "--save-program", bad])
        expect("run --save-program " + bad, rc, err, "cannot write '%s'" % bad)
    # A file where the output folder should be: its npy files cannot be made.
    plain = os.path.join(tmp, "plain")
    open(plain, "w").close()
    rc, err = run(["eval", hlo, "--output-dir", plain])
    expect("eval --output-dir FILE", rc, err, plain)

    # .npy inputs (tests/fuzz/fuzz_npy findings): a shape whose element count overflows int64
    # (it reached the allocator as a wrapped size), and a header claiming far more data than
    # the file holds (it was allocated before the read failed).
    cases = {
        "overflow.npy": (npy("|u1", "(177777777777777777777777777777777777,)", b""),
                         "too large"),
        "overflow2.npy": (npy("<f4", "(4294967296, 4294967296)", b""), "too many elements"),
        "huge.npy": (npy("<f4", "(1000000000000,)", b"\0" * 16),
                     "file holds fewer bytes than its shape needs"),
        # A scalar without its data: the message named an unset shape (read past the stack
        # buffer; fuzz_npy, 2026-12-04).
        "scalar.npy": (npy("<f4", "()", b"\0" * 2),
                       "file holds fewer bytes than its shape needs (<f4 of (): 4 bytes, 2 there)"),
    }
    one = os.path.join(tmp, "one.hlo")
    with open(one, "w") as f:
        f.write("HloModule one\nENTRY e {\n  ROOT x = f32[4] parameter(0)\n}\n")
    for name, (data, want) in cases.items():
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        rc, err = run(["eval", one, "--print", "--input", "x=" + path])
        expect("eval --input x=" + name, rc, err, want)

    # Memory limits (--max-memory, default the machine's memory): a module whose peak of live
    # values would not fit is refused before anything is allocated, saying how much it needs.
    big = os.path.join(tmp, "big.hlo")
    with open(big, "w") as f:
        f.write("HloModule big\nENTRY e {\n  a = f32[100000,100000] parameter(0)\n"
                "  ROOT n = f32[100000,100000] negate(a)\n}\n")
    for name, args, want in [
            ("eval big", ["eval", big, "--print", "--max-memory", "64G"],
             "evaluating this module needs about 74.51 GiB at its peak, more than the 64.00 GiB"),
            ("run big", ["run", big, "--num-partitions", "2", "--max-memory", "64G"],
             "running this program on 2 devices in one process needs about 186.26 GiB"),
            ("run --verify big", ["run", big, "--num-partitions", "2", "--verify",
                                  "--max-memory", "64G"], "needs about 260.77 GiB"),
            ("run --spmd big", ["run", "--spmd", big, "--num-partitions", "4",
                                "--max-memory", "64G", "--output-dir", os.path.join(tmp, "o")],
             "running this program on 4 devices in one process needs about 298.02 GiB"),
            ("eval small, tiny limit", ["eval", hlo, "--print", "--max-memory", "100"],
             "needs about 384 B at its peak, more than the 100 B allowed")]:
        rc, err = run(args)
        expect(name, rc, err, want)
    rc, err = run(["eval", hlo, "--print", "--max-memory", "1M"])
    if rc != 0:
        failures.append("eval --max-memory 1M: exit %d: %s" % (rc, err.strip()))
    for bad in ["0", "-5", "1X", "", "1e30"]:
        rc, err = run(["eval", hlo, "--print", "--max-memory", bad])
        if rc != 2 or "--max-memory wants a size" not in err:
            failures.append("eval --max-memory %r: want exit 2 and a usage message; got %d: %s"
                            % (bad, rc, err.strip()))

# A module with an unbounded dynamic dim (XLA's verifier accepts it): every command that needs its
# sizes gives the library's located error, none an internal assertion (issue 23).
UNBOUNDED = """HloModule module
ENTRY %elementwise {
  %param0 = f32[5,7,11,13]{3,2,1,0} parameter(0), sharding={devices=[1,2,2,1]0,1,2,3}
  %param1 = f32[5,7,11,13]{3,2,1,0} parameter(1)
  %add = f32[5,?,11,13]{3,2,1,0} add(%param0, %param1)
  ROOT %copy = f32[5,7,11,13]{3,2,1,0} copy(%add)
}
"""
with tempfile.TemporaryDirectory() as tmp:
    hlo = os.path.join(tmp, "unbounded.hlo")
    with open(hlo, "w") as f:
        f.write(UNBOUNDED)
    where = "unbounded.hlo:5:3: error: "
    for name, args, want in [
            ("cost", ["cost", hlo, "--num-partitions", "4"], "partitioning needs every"),
            ("cost --spmd", ["cost", hlo, "--num-partitions", "4", "--spmd"],
             "the cost model needs every"),
            ("partition", ["partition", hlo, "--num-partitions", "4"], "partitioning needs every"),
            ("partition --propagate", ["partition", hlo, "--num-partitions", "4", "--propagate"],
             "partitioning needs every"),
            ("run", ["run", hlo, "--num-partitions", "4", "--output-dir", os.path.join(tmp, "o")],
             "needs every dimension's size"),
            ("eval", ["eval", hlo, "--print"], "evaluation needs every")]:
        rc, err = run(args)
        expect(name + " (unbounded dim)", rc, err, want)
        if where not in err or "internal error" in err:
            failures.append("%s (unbounded dim): want a located error at %r, no internal error; "
                            "got:\n    %s" % (name, where, err.strip()))

# The commands that partition take the device count from the module when --num-partitions is not
# given (mhlo.num_partitions, num_partitions= in an HLO header); when neither says, one error.
with tempfile.TemporaryDirectory() as tmp:
    hlo = os.path.join(tmp, "nodev.hlo")
    with open(hlo, "w") as f:
        f.write(MODULE)
    declared = os.path.join(tmp, "declared.hlo")
    with open(declared, "w") as f:
        f.write(MODULE.replace("HloModule io", "HloModule io, num_partitions=2"))
    for name, args in [("partition", ["partition"]), ("cost", ["cost"]),
                       ("run", ["run"]), ("run --spmd", ["run", "--spmd", "--output-dir",
                                                          os.path.join(tmp, "o")])]:
        rc, err = run(args + [hlo])
        expect(name + " (no device count)", rc, err, "give --num-partitions N")
        if name == "run --spmd":
            continue
        rc, err = run(args + [declared])
        if rc != 0:
            failures.append("%s (num_partitions=2 in the header): want exit 0, got %d:\n    %s"
                            % (name, rc, err.strip()))

for f in failures:
    print("FAIL " + f)
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
