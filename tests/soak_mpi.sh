#!/usr/bin/env bash
# The partition property test on the MPI backend (`make soak-mpi`; not part of `make test`):
#   tests/soak_mpi.sh BUILD_DIR SEEDS CASES [FIRST_SEED] [RANKS]
# runs BUILD_DIR/tests/test_partition_prop under `mpirun -np RANKS` (default 2) SEEDS times,
# CASES random graphs each, seeds FIRST_SEED, FIRST_SEED+1, ... (default: from the clock). Every
# rank generates the same graphs; those whose device count is a multiple of RANKS run with
# device count / RANKS devices per rank and are compared with the reference on rank 0. Prints
# each seed's summary, the failures in full, and a total. Exit 1 if any case failed.
set -u
build=${1:?usage: soak_mpi.sh BUILD_DIR SEEDS CASES [FIRST_SEED] [RANKS]}
seeds=${2:-5}
cases=${3:-2000}
first=${4:-$(date +%s)}
ranks=${5:-2}
bin="$build/tests/test_partition_prop"
[ -x "$bin" ] || { echo "soak-mpi: $bin is not built (run make build)"; exit 1; }
command -v mpirun >/dev/null || { echo "soak-mpi: mpirun not found (apt-get install openmpi-bin)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
start=$(date +%s)
total=0 failed=0
for s in $(seq "$first" $((first + seeds - 1))); do
    log=$(GSPMD_PARTITION_MPI=1 GSPMD_PARTITION_SEED=$s GSPMD_PARTITION_CASES=$cases \
          timeout 3600 mpirun -np "$ranks" "$bin" 2>&1)
    rc=$?
    ran=$(echo "$log" | sed -n 's/^\([0-9]*\) random graphs verified.*/\1/p' | head -n1)
    bad=$(echo "$log" | sed -n 's/^\([0-9]*\) of [0-9]* cases failed.*/\1/p' | head -n1)
    if [ "$rc" -ne 0 ] || [ -z "$ran" ] || [ "${bad:-1}" -ne 0 ]; then
        echo "FAIL seed $s (exit $rc)"; echo "$log" | grep -v '^\[' | head -n 200
        failed=$((failed + 1))
    else
        echo "ok   seed $s: $(echo "$log" | grep -m1 'random graphs verified')"
    fi
    total=$((total + ${ran:-0}))
done
echo "soak-mpi: $total cases run on $ranks MPI ranks over $seeds seeds ($first..$((first + seeds - 1))), $failed failed seed(s), $(( $(date +%s) - start )) s"
[ "$failed" -eq 0 ]
