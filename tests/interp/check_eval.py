#!/usr/bin/env python3
"""Interpreter golden tests. Each FILE.hlo in the folder carries its expectations in comments:

  // INPUT name: dtype[d0,d1] v0 v1 ...     value of an entry parameter (others: random, --seed 0)
  // OUT0: dtype[d0,d1] v0 v1 ...           expected out0.npy (OUT1 ... for further tuple leaves)
  // TOL: 1e-6                              optional: relative+absolute tolerance for floats
                                            (default exact)
  // ERROR: text                            instead of outputs: eval must exit 1 and its stderr
                                            must contain text

Values are row-major, separated by spaces or commas; floats accept nan/inf/-inf, preds
true/false, complex values Python's 1+2j syntax. bf16 travels as float32. The expected values
were computed by hand (or with exact arithmetic) from XLA's operation semantics, never by
running gspmd. Usage: check_eval.py GSPMD DIR [FILE.hlo...]"""
import glob
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

DESCR = {"f32": "<f4", "f64": "<f8", "s32": "<i4", "s64": "<i8", "u32": "<u4", "u64": "<u8",
         "s16": "<i2", "u16": "<u2", "s8": "|i1", "u8": "|u1", "pred": "|b1", "f16": "<f2",
         "bf16": "<f4", "c64": "<c8", "c128": "<c16"}
FMT = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q", "<u4": "I", "<u8": "Q", "<i2": "h",
       "<u2": "H", "|i1": "b", "|u1": "B", "|b1": "?", "<f2": "e", "<c8": "ff", "<c16": "dd"}


def parse_spec(text):
    m = re.match(r"\s*(\w+)\[([\d,\s]*)\]\s*(.*)$", text)
    if not m:
        raise ValueError("bad value spec: " + text)
    dtype = m.group(1)
    dims = [int(x) for x in m.group(2).replace(" ", "").split(",") if x]
    toks = [t for t in re.split(r"[\s,]+", m.group(3).strip()) if t]
    vals = []
    for t in toks:
        if dtype == "pred":
            vals.append(t == "true" or t == "1")
        elif dtype in ("c64", "c128"):
            vals.append(complex(t))
        elif dtype in ("f16", "bf16", "f32", "f64"):
            vals.append(float(t))
        else:
            vals.append(int(t, 0))
    n = 1
    for d in dims:
        n *= d
    if len(vals) != n:
        raise ValueError("%s has %d values, shape wants %d" % (text, len(vals), n))
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
    n = 1
    for d in h["shape"]:
        n *= d
    fmt = FMT[h["descr"]]
    flat = list(struct.unpack("<" + fmt * n, data[10 + hl:10 + hl + n * struct.calcsize("<" + fmt)]))
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


def run_case(gspmd, path):
    text = open(path).read()
    inputs, outs, tol, err = {}, {}, None, None
    for line in text.splitlines():
        m = re.match(r"\s*//\s*INPUT\s+([\w.\-]+):\s*(.*)$", line)
        if m:
            inputs[m.group(1)] = parse_spec(m.group(2))
        m = re.match(r"\s*//\s*OUT(\d+):\s*(.*)$", line)
        if m:
            outs[int(m.group(1))] = parse_spec(m.group(2))
        m = re.match(r"\s*//\s*TOL:\s*(\S+)", line)
        if m:
            tol = float(m.group(1))
        m = re.match(r"\s*//\s*ERROR:\s*(.*)$", line)
        if m:
            err = m.group(1).strip()
    tmp = tempfile.mkdtemp(prefix="gspmd-golden-")
    try:
        cmd = [gspmd, "eval", path, "--output-dir", tmp]
        for name, (dtype, dims, vals) in inputs.items():
            f = os.path.join(tmp, "in_%s.npy" % name)
            write_npy(f, dtype, dims, vals)
            cmd += ["--input", "%s=%s" % (name, f)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if err is not None:
            if p.returncode != 1 or err not in p.stderr:
                return "expected error containing %r, got exit %d: %s" % (err, p.returncode, p.stderr.strip()[:300])
            return None
        if p.returncode != 0:
            return "eval exit %d: %s" % (p.returncode, p.stderr.strip()[:500])
        if not outs:
            return "no OUT expectations"
        for i, (dtype, dims, want) in sorted(outs.items()):
            f = os.path.join(tmp, "out%d.npy" % i)
            if not os.path.exists(f):
                return "out%d.npy missing" % i
            descr, shape, got = read_npy(f)
            if descr != DESCR[dtype]:
                return "out%d dtype %s, expected %s" % (i, descr, DESCR[dtype])
            if shape != dims:
                return "out%d shape %s, expected %s" % (i, shape, dims)
            for k, (a, b) in enumerate(zip(got, want)):
                if not close(a, b, tol):
                    return "out%d[%d] = %r, expected %r (got %s)" % (i, k, a, b, got[:16])
        extra = os.path.join(tmp, "out%d.npy" % (max(outs) + 1))
        if os.path.exists(extra):
            return "more outputs than expected"
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    gspmd, folder = sys.argv[1], sys.argv[2]
    files = sys.argv[3:] or sorted(glob.glob(os.path.join(folder, "*.hlo")))
    fails = 0
    for f in files:
        why = run_case(gspmd, f)
        if why:
            fails += 1
            print("FAIL %s: %s" % (os.path.basename(f), why))
    print("%d files, %d failures" % (len(files), fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
