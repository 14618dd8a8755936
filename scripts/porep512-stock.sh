#!/usr/bin/env bash
# The 512 MiB sparse CC C1 (`fixture::sparse_cc_sector`, no sealing) proved by stock
# filecoin-proofs-api `seal_commit_phase2` and by our CPU prover, both proofs accepted by
# `verify_seal` and refused for another sector number: the check at a size where the partition
# has its real shape (one partition of 4.4 M constraints, 2^23), too slow for CI. CPU only; the
# 2^23 test parameters are generated on the CPU into target/filecoin-test-params when missing
# (seed TEST_PARAM_SEED, about 3 GiB) and kept for the next run.
#
#     scripts/porep512-stock.sh [LOG]
#
# Prints the time of each step (parameters, sparse C1, vanilla verification, stock C2, our C2)
# and the peak resident memory.
set -euo pipefail
cd "$(dirname "$0")/.."
log="${1:-/dev/stdout}"
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -f 'peak resident memory: %M KiB, wall %e s')
cargo build --tests -p kernels --features filecoin,fixtures --test filecoin_sparse
"${timer[@]}" cargo test -p kernels --features filecoin,fixtures --test filecoin_sparse -- \
  --ignored --nocapture --exact a_512mib_sparse_c1_proves_with_stock_c2_and_ours 2>&1 | tee "$log"
