#!/bin/sh
# run.sh BUILD SECONDS [TARGET...] — runs each fuzz target in BUILD/fuzz (all of them, or the
# TARGETs named: parse sharding front npy pipeline) for SECONDS with one process, one after the
# other, and fails (exit 1) on any finding. `make fuzz` calls it after building with clang.
#
# Seeds are gathered here, not committed: every tests/**/*.hlo and, when ../shared is present,
# every ../shared/conformance/xla/*/module.hlo go to BUILD/fuzz/seeds/parse (the seeds of
# fuzz_parse and fuzz_pipeline); the sharding values (`sharding={...}`) found in those files go
# to BUILD/fuzz/seeds/sharding; a few meshes with requests to seeds/front; small .npy files of
# every dtype to seeds/npy. What a run discovers is kept in BUILD/fuzz/corpus/TARGET for the
# next run; crashing inputs land in BUILD/fuzz/findings/ (turn each into a regression test in
# tests/text/ or a unit test, or, for the passes, keep it in tests/fuzz/findings/).
set -eu
build=${1:?usage: run.sh BUILD SECONDS [TARGET...]}
seconds=${2:-60}
shift 2 2>/dev/null || shift $#
targets=${*:-parse sharding front npy pipeline}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$build/fuzz"
mkdir -p "$out/findings"
for t in parse sharding front npy; do mkdir -p "$out/seeds/$t"; done
for t in $targets; do mkdir -p "$out/corpus/$t"; done

python3 - "$root" "$out/seeds" <<'PY'
import glob, hashlib, os, struct, sys
root, seeds = sys.argv[1], sys.argv[2]
files = sorted(glob.glob(os.path.join(root, "tests", "**", "*.hlo"), recursive=True))
files += sorted(glob.glob(os.path.join(root, "tests", "**", "*.mlir"), recursive=True))
files += sorted(glob.glob(os.path.join(root, "..", "shared", "conformance", "xla", "*", "module.hlo")))
def put(kind, data):
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(seeds, kind, name), "wb") as f:
        f.write(data)
shardings = set()
for path in files:
    data = open(path, "rb").read()
    put("parse", data)
    text = data.decode("utf-8", "replace")
    at = 0
    while True:  # each balanced {...} after `sharding=`
        at = text.find("sharding={", at)
        if at < 0:
            break
        i = at + len("sharding=")
        depth = 0
        for j in range(i, min(len(text), i + 4000)):
            depth += text[j] == "{"
            depth -= text[j] == "}"
            if depth == 0:
                shardings.add(text[i:j + 1])
                break
        at = i
for s in sorted(shardings):
    put("sharding", s.encode())
# fuzz_front: a mesh line, then NAME=SPEC lines (instructions of the module in fuzz_front.c:
# x f32[8,6], w f32[6,5], v f32[3,1,4,2], s s32[], y f32[8,5], r f32[8], t, o tuples).
front = [
    "data=2,model=4\nx=data,model\nw=model,None",
    "data=2,model=2\nx=data,None\nw=None,model\ny=data,model",
    "b=2\nx=b\nr=b",
    "a=2,b=2,c=2:<=[2,2,2]T(2,0,1)\nv=(a,b),None,c\ns=",
    "x=4,y=2:7,6,5,4,3,2,1,0\ny=(x,y)\nw=_,x",
    "data=8\ny={devices=[2,4]<=[8]}\nt={{devices=[8]<=[8]}, {replicated}, {maximal device=3}}",
    "m=2,n=3\nv=m,_,None,n\n%x=None,(n,m)",
    "\nx={devices=[1,2,2]<=[4] last_tile_dim_replicate}\nw={replicated}",
    "d=4\n*=None\nx=d",
    "p=2,q=2\nx=q,p\nw*=p\n[xy]=None",
]
for s in front:
    put("front", s.encode())
# fuzz_npy: small files of every dtype, format versions 1 and 2.
def npy(descr, shape, payload, version=1):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    pre = 10 if version == 1 else 12
    hdr += " " * ((64 - (pre + len(hdr) + 1) % 64) % 64) + "\n"
    size = struct.pack("<H", len(hdr)) if version == 1 else struct.pack("<I", len(hdr))
    return b"\x93NUMPY" + bytes([version, 0]) + size + hdr.encode() + payload
sizes = {"|b1": 1, "|i1": 1, "|u1": 1, "<i2": 2, "<u2": 2, "<i4": 4, "<u4": 4, "<i8": 8,
         "<u8": 8, "<f2": 2, "<f4": 4, "<f8": 8, "<c8": 8, "<c16": 16}
for descr, b in sizes.items():
    for shape in [(), (3,), (2, 3), (0,), (1, 2, 1)]:
        n = 1
        for d in shape:
            n *= d
        payload = bytes((i * 37 + 1) % 256 for i in range(n * b))
        put("npy", npy(descr, shape, payload))
    put("npy", npy(descr, (2,), bytes(2 * b), version=2))
print("fuzz: %d HLO seeds, %d sharding seeds, %d front seeds, %d npy seeds"
      % (len(files), len(shardings), len(front), 6 * len(sizes)))
PY

status=0
for target in $targets; do
    # Per target: seeds, dictionary, and limits. fuzz_npy's malloc limit is far above what a
    # file of -max_len bytes holds: allocating for a shape the file cannot fill is a finding.
    extra=""
    case $target in
        parse|pipeline) seeds=parse; dict=hlo.dict ;;
        sharding|front) seeds=$target; dict=hlo.dict ;;
        npy) seeds=npy; dict=npy.dict; extra="-malloc_limit_mb=64" ;;
        *) echo "fuzz: unknown target '$target'"; exit 2 ;;
    esac
    echo "fuzz: fuzz_$target for ${seconds}s"
    # shellcheck disable=SC2086
    if ! "$out/fuzz_$target" "$out/corpus/$target" "$out/seeds/$seeds" \
            -dict="$here/$dict" -max_total_time="$seconds" -max_len=8192 -timeout=25 \
            -rss_limit_mb=2048 $extra -print_final_stats=1 \
            -artifact_prefix="$out/findings/$target-" 2>"$out/$target.log"; then
        echo "fuzz: fuzz_$target FOUND A PROBLEM (see $out/$target.log and $out/findings/)"
        grep -E "ERROR|SUMMARY|fuzz_$target:|runtime error" "$out/$target.log" | head -20
        status=1
    else
        grep -E "stat::number_of_executed_units|stat::new_units_added|Done [0-9]+ runs" \
            "$out/$target.log" | sed 's/^/  /'
    fi
done
exit $status
