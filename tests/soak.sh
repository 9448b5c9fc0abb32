#!/usr/bin/env bash
# The partition property test over many seeds (`make soak`; not part of `make test`):
#   tests/soak.sh BUILD_DIR SEEDS CASES [FIRST_SEED]
# runs BUILD_DIR/tests/test_partition_prop SEEDS times, CASES random graphs each, with seeds
# FIRST_SEED, FIRST_SEED+1, ... (default: from the clock), two at a time, and prints each
# seed's summary, the failures in full, and a total. Exit 1 if any case failed.
set -u
build=${1:?usage: soak.sh BUILD_DIR SEEDS CASES [FIRST_SEED]}
seeds=${2:-50}
cases=${3:-20000}
first=${4:-$(date +%s)}
bin="$build/tests/test_partition_prop"
[ -x "$bin" ] || { echo "soak: $bin is not built (run make build)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
run_one() {
    local s=$1
    if GSPMD_PARTITION_SEED=$s GSPMD_PARTITION_CASES=$cases "$bin" >"$tmp/$s.log" 2>&1; then
        echo "ok   $(grep -h 'random graphs verified' "$tmp/$s.log")"
    else
        echo "FAIL seed $s"; cat "$tmp/$s.log"
    fi
}
export -f run_one
export bin cases tmp
seq "$first" $((first + seeds - 1)) | xargs -P 2 -I{} bash -c 'run_one {}' | tee "$tmp/all"
failed=$(grep -c '^FAIL' "$tmp/all")
worst=$(grep -ho 'largest float error [0-9.e+-]*' "$tmp/all" | awk '{print $4}' | sort -g | tail -1)
echo "soak: $((seeds * cases)) cases over $seeds seeds ($first..$((first + seeds - 1))), $failed failed seed(s), largest float error ${worst:-?} rounding bounds, $(( $(date +%s) - start )) s"
[ "$failed" -eq 0 ]
