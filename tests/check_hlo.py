#!/usr/bin/env python3
"""HLO file tests: runs one gspmd command on each FILE.hlo and checks what its header says.

Usage: check_hlo.py GSPMD PATH... [--mpi MPIRUN] [--per-rank K]
  PATH is a .hlo file or a folder (its *.hlo files). ctest runs one file per test
  (tests/{text,interp,propagate,partition,runtime}/*.hlo) and the MPI variants over a folder.

The header is the file's leading `//` comment lines (blank lines allowed). A directive is a line
`// KEY: VALUE` (VERIFY may stand alone); other comment lines are prose, but `// WORD:` with an
unknown upper-case WORD is an error (a typo), as is a key of another stage. Every key means the
same in every folder. STAGE says which command runs (FILE is the file's name; commands run in its
folder; TMP is a scratch folder):

  parse      gspmd parse FILE ARGS
  verify     gspmd verify FILE ARGS
  eval       gspmd eval FILE --output-dir TMP [--input NAME=TMP/in_NAME.npy ...] ARGS
  propagate  gspmd propagate FILE ARGS
  partition  gspmd partition FILE ARGS; its output must parse back (`gspmd parse -`) to the same
             text
  run        gspmd run --spmd FILE --num-partitions DEVICES --output-dir TMP ARGS

  Key                        Stages     Meaning
  STAGE: S                   all        the command above (required, once)
  ARGS: A...                 all        extra arguments of that command (repeatable, appended)
  ERROR: TEXT                all        it exits 1 and its first stderr line is exactly TEXT; a
                                        located one (FILE:L:C: error: ...) must be followed by the
                                        source line and a caret line (a third stderr line, when
                                        there is one, is always the caret)
  ERROR-HAS: TEXT            all        it exits 1 (under mpirun: non-zero) and stderr contains
                                        TEXT (repeatable: every TEXT)
  ERROR-HAS-THREADS: TEXT    run        the same, counted only on the threads backend (no --mpi)
  ERROR-HAS-MPI: TEXT        run        the same, counted only under --mpi
  WARNING-HAS: TEXT          partition  stderr contains TEXT; without it, no "warning" in stderr
  INPUT NAME: SPEC           eval       entry parameter NAME (others: random, seed 0)
  OUT<i>: SPEC               eval       output i (out<i>.npy); no output beyond the last OUT
  DEVICES: N                 run        number of devices (required)
  DEV<d>.OUT<i>: SPEC        run        output i of device d (DEV*: of every device)
  STDERR-HAS: TEXT           run        stderr contains TEXT (repeatable; threads backend only)
  TOL: X                     eval, run  relative+absolute tolerance for floats (default exact)
  SHARDING: NAME S           propagate  instruction NAME prints sharding S (metadata ignored);
                                        S = `none`: NAME has no sharding
  EXPLAIN: NAME              propagate  also run `gspmd propagate FILE --explain NAME ARGS` ...
  EXPLAIN-HAS: TEXT          propagate  ... and its stdout contains TEXT (repeatable)
  ROOT-SHAPE: SHAPE          partition  the partitioned entry root's per-device shape
  COLLECTIVES: K=N...        partition  exact counts of collectives K in the program
  OPS: K=N...                partition  exact counts of instructions of opcode K in the program
  VERIFY[: A...]             partition  `gspmd run FILE --verify [--no-propagate] ARGS A` exits 0
                                        and matches the reference (--no-propagate unless partition
                                        propagates: ARGS has --propagate, which is then left out,
                                        or FILE is .mlir, which partition propagates by default)
  RUN-ERROR-HAS: A => TEXT   partition  `gspmd run FILE A` exits 1 with TEXT in stderr (an
                                        argument NAME=@TYPE[DIMS] becomes a .npy of zeros)

With ERROR or an ERROR-HAS* that applies, the command must fail and nothing else is checked;
without, it must exit 0. In ERROR*/WARNING-HAS texts FILE stands for the file's name. SPEC is `dtype[d0,d1] v0 v1 ...`,
row-major, separated by spaces or commas; floats accept nan/inf/-inf, preds true/false, complex
values Python's 1+2j; bf16 travels as float32. Expected values are computed by hand (or with
exact arithmetic) from XLA's semantics, never by running gspmd. Shardings are compared as text,
in gspmd's canonical form (iota tile assignments).

With --mpi MPIRUN only files that run on devices are checked, one MPI rank per K devices
(--per-rank K, default 1); the rest are skipped:
  run        files of at most 8 devices (K dividing them): `MPIRUN -np N/K gspmd run ...
             --backend mpi --devices-per-rank K`, with the outputs and errors above
  partition  VERIFY files of at most 6 devices: `MPIRUN -np N/K gspmd run FILE --verify
             --backend mpi ...` matches the reference (N from --num-partitions in ARGS,
             else the file's mhlo.num_partitions)
"""
import math
import os
import re
import struct
import sys

STAGES = ("parse", "verify", "eval", "propagate", "partition", "run")
COMMON = {"STAGE", "ARGS", "ERROR", "ERROR-HAS"}
STAGE_KEYS = {
    "parse": set(),
    "verify": set(),
    "eval": {"INPUT", "OUT", "TOL"},
    "propagate": {"SHARDING", "EXPLAIN", "EXPLAIN-HAS"},
    "partition": {"WARNING-HAS", "ROOT-SHAPE", "COLLECTIVES", "OPS", "VERIFY", "RUN-ERROR-HAS"},
    "run": {"DEVICES", "DEV.OUT", "TOL", "ERROR-HAS-THREADS", "ERROR-HAS-MPI", "STDERR-HAS"},
}
KEYS = set(COMMON).union(*STAGE_KEYS.values())
TIMEOUT = {"parse": 20, "verify": 20, "eval": 120, "propagate": 60, "partition": 300, "run": 120}
COLLS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
MPI_MAX_DEVICES = {"run": 8, "partition": 6}

DESCR = {"f32": "<f4", "f64": "<f8", "s32": "<i4", "s64": "<i8", "u32": "<u4", "u64": "<u8",
         "s16": "<i2", "u16": "<u2", "s8": "|i1", "u8": "|u1", "pred": "|b1", "f16": "<f2",
         "bf16": "<f4", "c64": "<c8", "c128": "<c16"}
FMT = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q", "<u4": "I", "<u8": "Q", "<i2": "h",
       "<u2": "H", "|i1": "b", "|u1": "B", "|b1": "?", "<f2": "e", "<c8": "ff", "<c16": "dd"}


class BadFile(Exception):
    """The file's header itself is wrong (a typo'd key, a missing STAGE, a bad value)."""


# ------------------------------------------------------------------ values and .npy files

def parse_spec(text):
    m = re.match(r"\s*(\w+)\[([\d,\s]*)\]\s*(.*)$", text)
    if not m or m.group(1) not in DESCR:
        raise BadFile("bad value spec: " + text)
    dtype = m.group(1)
    dims = [int(x) for x in m.group(2).replace(" ", "").split(",") if x]
    vals = []
    for t in (t for t in re.split(r"[\s,]+", m.group(3).strip()) if t):
        if dtype == "pred":
            vals.append(t == "true" or t == "1")
        elif dtype in ("c64", "c128"):
            vals.append(complex(t))
        elif dtype in ("f16", "bf16", "f32", "f64"):
            vals.append(float(t))
        else:
            vals.append(int(t, 0))
    n = math.prod(dims)
    if len(vals) != n:
        raise BadFile("%s has %d values, shape wants %d" % (text, len(vals), n))
    return dtype, dims, vals


def write_npy(path, dtype, dims, vals):
    descr = DESCR[dtype]
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d," % d for d in dims))
    hdr += " " * (63 - (len(hdr) + 10) % 64) + "\n"
    flat = []
    for v in vals:
        if descr in ("<c8", "<c16"):
            flat += [v.real, v.imag]
        else:
            flat.append(v)
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode("latin1"))
        f.write(struct.pack("<" + FMT[descr] * len(vals), *flat))


def read_npy(path):
    import ast
    data = open(path, "rb").read()
    assert data[:6] == b"\x93NUMPY", "not npy"
    hl = struct.unpack("<H", data[8:10])[0]
    h = ast.literal_eval(data[10:10 + hl].decode("latin1"))
    n = math.prod(h["shape"])
    fmt = FMT[h["descr"]]
    size = n * struct.calcsize("<" + fmt)
    flat = list(struct.unpack("<" + fmt * n, data[10 + hl:10 + hl + size]))
    if len(fmt) == 2:
        flat = [complex(flat[2 * i], flat[2 * i + 1]) for i in range(n)]
    return h["descr"], list(h["shape"]), flat


def close(a, b, tol):
    if isinstance(b, complex) or isinstance(a, complex):
        return close(a.real, b.real, tol) and close(a.imag, b.imag, tol)
    if isinstance(b, float):
        if math.isnan(b):
            return math.isnan(a)
        if math.isinf(b):
            return a == b
        if tol is None:
            return a == b and math.copysign(1, a) == math.copysign(1, b)
        return abs(a - b) <= tol + tol * abs(b)
    return a == b


def check_npy(path, label, spec, tol):
    """Problems of the .npy at path against spec = (dtype, dims, values)."""
    dtype, dims, want = spec
    if not os.path.exists(path):
        return ["%s missing" % label]
    descr, shape, got = read_npy(path)
    if descr != DESCR[dtype] or shape != dims:
        return ["%s is %s%s, expected %s%s (%s)" % (label, descr, shape, dtype, dims, DESCR[dtype])]
    for k, (a, b) in enumerate(zip(got, want)):
        if not close(a, b, tol):
            return ["%s[%d] = %r, expected %r (got %s)" % (label, k, a, b, got[:16])]
    return []


# ------------------------------------------------------------------ the header

def read_header(path):
    """The directives of path as a dict (see the docstring)."""
    d = {"ARGS": [], "ERROR-HAS": [], "ERROR-HAS-THREADS": [], "ERROR-HAS-MPI": [],
         "WARNING-HAS": [], "INPUT": {}, "OUT": {}, "DEV.OUT": {}, "SHARDING": [],
         "EXPLAIN-HAS": [], "COLLECTIVES": [], "OPS": [], "RUN-ERROR-HAS": [], "STDERR-HAS": []}
    seen = []
    for line in open(path).read().splitlines():
        if not line.startswith("//"):
            if line.strip():
                break
            continue
        body = line[2:].strip()
        m = re.match(r"INPUT\s+([\w.\-]+):\s*(.*)$", body)
        if m:
            d["INPUT"][m.group(1)] = parse_spec(m.group(2))
            seen.append("INPUT")
            continue
        m = re.match(r"OUT(\d+):\s*(.*)$", body)
        if m:
            d["OUT"][int(m.group(1))] = parse_spec(m.group(2))
            seen.append("OUT")
            continue
        m = re.match(r"DEV(\d+|\*)\.OUT(\d+):\s*(.*)$", body)
        if m:
            d["DEV.OUT"][(m.group(1), int(m.group(2)))] = parse_spec(m.group(3))
            seen.append("DEV.OUT")
            continue
        m = re.match(r"([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*)(?::\s*(.*)|\s*)$", body)
        if not m or (m.group(2) is None and m.group(1) not in KEYS):
            # prose; but an unknown `KEY:` is a typo, not prose
            m2 = re.match(r"([A-Z][A-Z0-9]*(?:[-.][A-Z0-9*]+)*):", body)
            if m2:
                raise BadFile("unknown directive %s" % m2.group(1))
            continue
        key, val = m.group(1), (m.group(2) or "").strip()
        if key not in KEYS:
            raise BadFile("unknown directive %s" % key)
        seen.append(key)
        if key in ("ARGS",):
            d["ARGS"] += val.split()
        elif key in ("ERROR-HAS", "ERROR-HAS-THREADS", "ERROR-HAS-MPI", "WARNING-HAS",
                     "EXPLAIN-HAS", "STDERR-HAS"):
            d[key].append(val)
        elif key == "SHARDING":
            name, _, s = val.partition(" ")
            d["SHARDING"].append((name, s.strip()))
        elif key == "COLLECTIVES":
            for item in val.split():
                k, _, n = item.partition("=")
                if k not in COLLS or not n.isdigit():
                    raise BadFile("bad COLLECTIVES item %r" % item)
                d["COLLECTIVES"].append((k, int(n)))
        elif key == "OPS":
            for item in val.split():
                k, _, n = item.partition("=")
                if not re.fullmatch(r"[a-z][a-z0-9-]*", k) or not n.isdigit():
                    raise BadFile("bad OPS item %r" % item)
                d["OPS"].append((k, int(n)))
        elif key == "RUN-ERROR-HAS":
            if "=>" not in val:
                raise BadFile("RUN-ERROR-HAS wants ARGS => TEXT")
            a, _, t = val.partition("=>")
            d["RUN-ERROR-HAS"].append((a.split(), t.strip()))
        elif key == "VERIFY":
            if "VERIFY" in d:
                raise BadFile("VERIFY given twice")
            d["VERIFY"] = val.split()
        else:  # STAGE, ERROR, TOL, DEVICES, EXPLAIN, ROOT-SHAPE: once
            if key in d:
                raise BadFile("%s given twice" % key)
            d[key] = val
    stage = d.get("STAGE")
    if stage not in STAGES:
        raise BadFile("no `// STAGE: %s` line" % "|".join(STAGES) if stage is None
                      else "unknown stage %r" % stage)
    for key in seen:
        if key not in COMMON and key not in STAGE_KEYS[stage]:
            raise BadFile("%s is not a directive of stage %s" % (key, stage))
    if "TOL" in d:
        d["TOL"] = float(d["TOL"])
    if stage == "run":
        if not d.get("DEVICES", "").isdigit():
            raise BadFile("stage run needs `// DEVICES: N`")
        d["DEVICES"] = int(d["DEVICES"])
    if "ERROR" in d and d["ERROR-HAS"]:
        raise BadFile("ERROR and ERROR-HAS together")
    return d


# ------------------------------------------------------------------ running

class Ctx:
    def __init__(self, gspmd, path, mpirun, per_rank):
        self.gspmd, self.mpirun, self.per_rank = gspmd, mpirun, per_rank
        self.folder = os.path.dirname(os.path.abspath(path))
        self.name = os.path.basename(path)

    def run(self, argv, timeout, stdin=None):
        """Runs argv in the file's folder: (exit status, stdout, stderr); 124 on a timeout."""
        if not FAST_SPAWN:
            return run_subprocess(argv, timeout, stdin, self.folder)
        fds = [os.memfd_create("gspmd-check") for _ in range(3)]
        try:
            if stdin is not None:
                os.write(fds[0], stdin.encode())
                os.lseek(fds[0], 0, os.SEEK_SET)
            actions = [(os.POSIX_SPAWN_DUP2, fd, k) for k, fd in enumerate(fds)
                       if k or stdin is not None]
            here = os.getcwd()
            os.chdir(self.folder)
            try:
                pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions)
            finally:
                os.chdir(here)
            pidfd = os.pidfd_open(pid)
            try:
                done = select.select([pidfd], [], [], timeout)[0]
            finally:
                os.close(pidfd)
            if not done:
                os.kill(pid, 9)
            rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            out, err = [read_fd(fd) for fd in fds[1:]]
            if not done:
                return 124, out, err + "\n(timed out after %d s)" % timeout
            return rc, out, err
        finally:
            for fd in fds:
                os.close(fd)

    def mpi(self, n):
        return [self.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n)]


# On Linux commands run through posix_spawn with their output in memory files and a pidfd for the
# timeout: over 200 ctest processes, importing subprocess would cost more than the checks.
FAST_SPAWN = all(hasattr(os, f) for f in ("memfd_create", "pidfd_open", "posix_spawnp"))
if FAST_SPAWN:
    import select


def read_fd(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(chunks).decode(errors="replace")
        chunks.append(b)


def run_subprocess(argv, timeout, stdin, cwd):
    import subprocess
    try:
        p = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=timeout,
                           input=stdin)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return 124, text(e.stdout), text(e.stderr) + "\n(timed out after %d s)" % timeout


def subst(ctx, text):
    return text.replace("FILE", ctx.name)


def check_error(ctx, d, rc, err, errors_has):
    """The checks of ERROR / ERROR-HAS* on a command that was expected to fail."""
    if "ERROR" in d:
        want = subst(ctx, d["ERROR"])
        got = err.splitlines()
        ok = rc == 1 and got and got[0] == want
        if ok and ":" in want.split(" error:")[0] and len(got) < 3:
            ok = False  # a located error shows the source line and a caret
        if ok and len(got) >= 3 and not got[2].lstrip().startswith("^"):
            ok = False
        if not ok:
            return ["expected exit 1 with first stderr line\n    %s\n  got exit %d:\n    %s"
                    % (want, rc, "\n    ".join(got[:3]))]
        return []
    wants = [subst(ctx, t) for t in errors_has]
    missing = [t for t in wants if t not in err]
    fails = rc != 0 if ctx.mpirun else rc == 1
    if not fails or missing:
        return ["expected exit %s with %r in stderr, got exit %d: %s"
                % ("non-zero" if ctx.mpirun else "1", missing or wants, rc, err.strip()[:600])]
    return []


def expected_errors(ctx, d):
    """The ERROR-HAS texts that apply to this backend."""
    return d["ERROR-HAS"] + (d["ERROR-HAS-MPI"] if ctx.mpirun else d["ERROR-HAS-THREADS"])


def command(ctx, d, cmd, stage, errors=None):
    """Runs a stage's command: (out, err, None) when it succeeded and its output is to be
    checked, or (None, None, problems) when the verdict is in: the expected error checked
    (`errors`: the ERROR-HAS texts that apply, by default the file's), or an unexpected exit."""
    errors = d["ERROR-HAS"] if errors is None else errors
    rc, out, err = ctx.run(cmd, TIMEOUT[stage])
    if "ERROR" in d or errors:
        return None, None, check_error(ctx, d, rc, err, errors)
    if rc != 0:
        return None, None, ["%s exit %d: %s" % (stage, rc, err.strip()[:500])]
    return out, err, None


def stage_parse(ctx, d, tmp):
    _, _, done = command(ctx, d, [ctx.gspmd, d["STAGE"], ctx.name] + d["ARGS"], d["STAGE"])
    return done or []


def stage_eval(ctx, d, tmp):
    cmd = [ctx.gspmd, "eval", ctx.name, "--output-dir", tmp]
    for name, spec in d["INPUT"].items():
        f = os.path.join(tmp, "in_%s.npy" % name)
        write_npy(f, *spec)
        cmd += ["--input", "%s=%s" % (name, f)]
    _, _, done = command(ctx, d, cmd + d["ARGS"], "eval")
    if done is not None:
        return done
    if not d["OUT"]:
        return ["no OUT expectations"]
    for i, spec in sorted(d["OUT"].items()):
        errs = check_npy(os.path.join(tmp, "out%d.npy" % i), "out%d" % i, spec, d.get("TOL"))
        if errs:
            return errs
    if os.path.exists(os.path.join(tmp, "out%d.npy" % (max(d["OUT"]) + 1))):
        return ["more outputs than expected"]
    return []


INSTR_RE = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")


def balanced(s, j):
    """The index of the brace closing the one at s[j]."""
    depth, k = 0, j
    while k < len(s):
        depth += s[k] == "{"
        depth -= s[k] == "}"
        if depth == 0:
            break
        k += 1
    return k


def shardings(text):
    out = {}
    for line in text.splitlines():
        m = INSTR_RE.match(line)
        if not m:
            continue
        name, rest = m.group(1), m.group(2)
        i = rest.find("sharding={")
        if i < 0:
            out[name] = None
            continue
        j = i + len("sharding=")
        s = rest[j:balanced(rest, j) + 1]
        while " metadata={" in s:
            i = s.find(" metadata={")
            s = s[:i] + s[balanced(s, i + len(" metadata=")) + 1:]
        out[name] = s
    return out


def stage_propagate(ctx, d, tmp):
    out, _, done = command(ctx, d, [ctx.gspmd, "propagate", ctx.name] + d["ARGS"], "propagate")
    if done is not None:
        return done
    errs = []
    got = shardings(out)
    for n, want in d["SHARDING"]:
        if n not in got:
            errs.append("%s: not in the output" % n)
        elif want == "none":
            if got[n] is not None:
                errs.append("%s: expected no sharding, got %s" % (n, got[n]))
        elif got[n] != want:
            errs.append("%s: expected %s, got %s" % (n, want, got[n]))
    if "EXPLAIN" in d:
        rc, q, err = ctx.run([ctx.gspmd, "propagate", ctx.name, "--explain", d["EXPLAIN"]]
                             + d["ARGS"], TIMEOUT["propagate"])
        for t in d["EXPLAIN-HAS"]:
            if t not in q:
                errs.append("--explain %s: no '%s' in:\n%s" % (d["EXPLAIN"], t, q))
    return errs


def root_shape(text):
    in_entry = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("ENTRY"):
            in_entry = True
        elif in_entry and s.startswith("ROOT"):
            # (a dynamic dim's bound is written <=N)
            m = re.match(r"ROOT\s+%?[\w.\-]+\s*=\s*(\((?:<=|[^=])*?\)|[a-z0-9]+\[(?:<=|[\d,])*\])",
                         s)
            return m.group(1) if m else None
    return None


def num_partitions(args, path=None):
    """--num-partitions in args, else the count a StableHLO file declares (mhlo.num_partitions,
    which partition and run default to), else 0."""
    if "--num-partitions" in args:
        return int(args[args.index("--num-partitions") + 1])
    if path and path.endswith(".mlir"):
        with open(path) as f:
            m = re.search(r"mhlo\.num_partitions\s*=\s*(\d+)", f.read())
        return int(m.group(1)) if m else 0
    return 0


def partition_propagates(ctx, args):
    """Whether `gspmd partition FILE ARGS` propagates: --propagate, or by default for StableHLO."""
    if "--propagate" in args or "--no-propagate" in args:
        return "--propagate" in args
    return ctx.name.endswith(".mlir")


def verify_argv(ctx, d):
    """`gspmd run FILE --verify ...` for VERIFY: `run` propagates unless told not to, so files
    partitioned with propagation run that way."""
    args = d["ARGS"]
    prop = [] if partition_propagates(ctx, args) else ["--no-propagate"]
    return [ctx.gspmd, "run", ctx.name, "--verify"] + prop + \
        [a for a in args if a != "--propagate"] + d["VERIFY"]


def stage_partition(ctx, d, tmp):
    out, err, done = command(ctx, d, [ctx.gspmd, "partition", ctx.name] + d["ARGS"], "partition")
    if done is not None:
        return done
    errs = []
    if d["WARNING-HAS"]:
        for t in d["WARNING-HAS"]:
            if subst(ctx, t) not in err:
                errs.append("expected a warning with '%s', stderr: %s" % (t, err.strip()[:300]))
    elif "warning" in err:
        errs.append("unexpected warning: %s" % err.strip()[:300])
    if "ROOT-SHAPE" in d and root_shape(out) != d["ROOT-SHAPE"]:
        errs.append("root shape %s, expected %s" % (root_shape(out), d["ROOT-SHAPE"]))
    for k, n in d["COLLECTIVES"] + d["OPS"]:
        have = len(re.findall(r"\s%s\(" % re.escape(k), out))
        if have != n:
            errs.append("%d %s, expected %d" % (have, k, n))
    rc, back, err = ctx.run([ctx.gspmd, "parse", "-"], TIMEOUT["partition"], stdin=out)
    if rc != 0 or back != out:
        errs.append("the partitioned program does not round-trip: %s" % err.strip()[:300])
    if "VERIFY" in d:
        rc, vout, err = ctx.run(verify_argv(ctx, d), 600)
        if rc != 0 or "matches the reference" not in vout:
            errs.append("verify exit %d: %s %s" % (rc, vout.strip()[-300:], err.strip()[:300]))
    for rargs, want in d["RUN-ERROR-HAS"]:
        argv = []
        for a in rargs:
            m = re.match(r"(\w+)=@(\w+)\[([\d,]*)\]$", a)
            if m:
                dims = [int(x) for x in m.group(3).split(",") if x]
                f = os.path.join(tmp, "%s.npy" % m.group(1))
                write_npy(f, m.group(2), dims, [0] * math.prod(dims))
                a = "%s=%s" % (m.group(1), f)
            argv.append(a)
        rc, _, err = ctx.run([ctx.gspmd, "run", ctx.name] + argv, TIMEOUT["partition"])
        if rc != 1 or subst(ctx, want) not in err:
            errs.append("run %s: expected exit 1 with '%s', got exit %d: %s"
                        % (" ".join(rargs), want, rc, err.strip()[:300]))
    return errs


def partition_mpi(ctx, d, tmp):
    n, k = num_partitions(d["ARGS"], os.path.join(ctx.folder, ctx.name)), ctx.per_rank
    if "VERIFY" not in d or "ERROR" in d or d["ERROR-HAS"]:
        return None, "no VERIFY"
    if not n or n > MPI_MAX_DEVICES["partition"] or n % k:
        return None, "%d devices" % n
    argv = verify_argv(ctx, d) + ["--backend", "mpi"]
    if k > 1:
        argv += ["--devices-per-rank", str(k)]
    rc, out, err = ctx.run(ctx.mpi(n // k) + argv, 600)
    if rc != 0 or "matches the reference" not in out:
        return ["mpi verify exit %d: %s %s" % (rc, out.strip()[-300:], err.strip()[:300])], None
    return [], None


def stage_run(ctx, d, tmp):
    n, k = d["DEVICES"], ctx.per_rank
    cmd = [ctx.gspmd, "run", "--spmd", ctx.name, "--num-partitions", str(n), "--output-dir", tmp] \
        + d["ARGS"]
    if ctx.mpirun:
        cmd = ctx.mpi(n // k) + cmd + ["--backend", "mpi", "--devices-per-rank", str(k)]
    _, err, done = command(ctx, d, cmd, "run", expected_errors(ctx, d))
    if done is not None:
        return done
    for text in ([] if ctx.mpirun else d["STDERR-HAS"]):
        if text not in err:
            return ["stderr lacks %r: %s" % (text, err.strip()[:600])]
    for (dev, i), spec in sorted(d["DEV.OUT"].items()):
        for dd in (range(n) if dev == "*" else [int(dev)]):
            errs = check_npy(os.path.join(tmp, "dev%d" % dd, "out%d.npy" % i),
                             "dev%d/out%d" % (dd, i), spec, d.get("TOL"))
            if errs:
                return errs
    return []


STAGE_FNS = {"parse": stage_parse, "verify": stage_parse, "eval": stage_eval,
             "propagate": stage_propagate, "partition": stage_partition, "run": stage_run}


def check_file(gspmd, path, mpirun=None, per_rank=1):
    """('ok' | 'FAIL' | 'skip', [problems or the reason for the skip])."""
    ctx = Ctx(gspmd, path, mpirun, per_rank)
    try:
        d = read_header(path)
    except (BadFile, ValueError) as e:
        return "FAIL", ["bad header: %s" % e]
    stage = d["STAGE"]
    tmp = None
    if stage in ("eval", "partition", "run"):  # the others write nothing
        import tempfile
        tmp = tempfile.mkdtemp(prefix="gspmd-check-")
    try:
        if mpirun:
            if stage == "partition":
                errs, why = partition_mpi(ctx, d, tmp)
                if errs is None:
                    return "skip", [why]
            elif stage == "run":
                n = d["DEVICES"]
                if n > MPI_MAX_DEVICES["run"] or n % per_rank:
                    return "skip", ["%d devices" % n]
                errs = stage_run(ctx, d, tmp)
            else:
                return "skip", ["stage %s does not run on devices" % stage]
        else:
            errs = STAGE_FNS[stage](ctx, d, tmp)
    finally:
        if tmp:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    return ("FAIL" if errs else "ok"), errs


def main(argv):
    mpirun, per_rank, paths = None, 1, []
    i = 0
    while i < len(argv):
        if argv[i] in ("--mpi", "--per-rank") and i + 1 < len(argv):
            if argv[i] == "--mpi":
                mpirun = argv[i + 1]
            else:
                per_rank = int(argv[i + 1])
            i += 2
            continue
        paths.append(argv[i])
        i += 1
    if len(paths) < 2 or per_rank < 1:
        sys.exit("usage: check_hlo.py GSPMD FILE.hlo|DIR... [--mpi MPIRUN] [--per-rank K]")
    gspmd, files = os.path.abspath(paths[0]), []
    for p in paths[1:]:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith((".hlo", ".mlir")))
        elif os.path.isfile(p):
            files.append(p)
        else:
            sys.exit("check_hlo.py: %s: no such file or folder" % p)
    counts = {"ok": 0, "FAIL": 0, "skip": 0}
    for f in files:
        status, notes = check_file(gspmd, f, mpirun, per_rank)
        counts[status] += 1
        if status == "FAIL":
            print("FAIL %s\n  %s" % (f, "\n  ".join(notes)))
        else:
            print("%-4s %s%s" % (status, f, " (%s)" % notes[0] if notes else ""))
    mode = " (mpi, %d device(s) per rank)" % per_rank if mpirun else ""
    print("%d files: %d passed, %d failed, %d skipped%s"
          % (len(files), counts["ok"], counts["FAIL"], counts["skip"], mode))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
