#!/usr/bin/env bash
# The isolation experiments (issue 15) on a GPU host (NVIDIA H200, 16 cores), one invocation:
#
#     scripts/h200-isolation.sh SPLITPROVER [OUT_DIR]
#
# The 2 KiB PoRep C2 (KIND) proved one at a time (monolithic), by the in-process pipeline and by
# the split pipeline on the same cpus, at 1, 4 and 16 jobs in flight (CLIENTS), each level
# without and then with a memory-bandwidth hog on the synthesis cores; every pipeline start
# measures its GPU-only capacity first (the baseline of the GPU-time column). Every proof is
# checked with filecoin-proofs' verify_seal. The tables, SVG charts and the recommended `[cpus]`
# layout are in OUT_DIR (report.md). BACKEND (gpu), GPU_CORES (2), N (24) change the run.
set -uo pipefail
bin="$(realpath "${1:?splitprover binary}")"
out="$(realpath -m "${2:-isolation}")"
work="${WORK:-/tmp/splitprover-isolation}"
mkdir -p "$out" "$work"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-warn}" SPLITPROVER_CACHE_DIR="$work/cache"
nproc
"$bin" bench --filecoin "${KIND:-porep:StackedDrg2KiBV1_1}" --backend "${BACKEND:-gpu}" \
  --filecoin-modes monolithic,inprocess,split,gpu-only --monolithic-proofs 3 \
  --gpu-cores "${GPU_CORES:-2}" --slots 24 -n "${N:-24}" --per-client 2 \
  --sweep-clients "${CLIENTS:-1,4,16}" --noisy-neighbour both --gpu-only-proofs 8 \
  --param-cache "${PARAMS:-$work/fil-params}" --out-dir "$out" >"$out/bench.log" 2>&1
status=$?
if [ -f "$out/report.md" ]; then grep '^| ' "$out/report.md" | cut -d'|' -f3-17; else tail -20 "$out/bench.log"; fi
exit "$status"
