#!/bin/sh
# run.sh BUILD SECONDS — runs each fuzz target in BUILD/fuzz for SECONDS with one process, and
# fails (exit 1) on any finding. `make fuzz` calls it after building with clang.
#
# Seeds are gathered here, not committed: every tests/**/*.hlo and, when ../shared is present,
# every ../shared/conformance/xla/*/module.hlo go to BUILD/fuzz/seeds/parse; the sharding values
# (`sharding={...}`) found in those files go to BUILD/fuzz/seeds/sharding. What a run discovers
# is kept in BUILD/fuzz/corpus/TARGET for the next run; crashing inputs land in
# BUILD/fuzz/findings/ (turn each into a regression test in tests/text/).
set -eu
build=${1:?usage: run.sh BUILD SECONDS}
seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$build/fuzz"
mkdir -p "$out/seeds/parse" "$out/seeds/sharding" "$out/corpus/parse" "$out/corpus/sharding" \
         "$out/findings"

python3 - "$root" "$out/seeds" <<'PY'
import glob, hashlib, os, sys
root, seeds = sys.argv[1], sys.argv[2]
files = sorted(glob.glob(os.path.join(root, "tests", "**", "*.hlo"), recursive=True))
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
print("fuzz: %d HLO seeds, %d sharding seeds" % (len(files), len(shardings)))
PY

status=0
for target in parse sharding; do
    echo "fuzz: fuzz_$target for ${seconds}s"
    if ! "$out/fuzz_$target" "$out/corpus/$target" "$out/seeds/$target" \
            -dict="$here/hlo.dict" -max_total_time="$seconds" -max_len=8192 -timeout=25 \
            -rss_limit_mb=2048 -print_final_stats=1 \
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
