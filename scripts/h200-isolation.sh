#!/usr/bin/env bash
# The isolation experiments (issue 15) on a GPU host (NVIDIA H200, 16 cores), one invocation:
#
#     scripts/h200-isolation.sh SPLITPROVER [OUT_DIR]
#
# Each Filecoin proof of KINDS (default: the 2 KiB PoRep C2, then the 2 KiB WindowPoSt and
# SnapDeals) proved one at a time (monolithic), by the in-process pipeline and by the split
# pipeline on the same cpus, at CLIENTS jobs in flight (1,2,4,8,16,64 for the first kind, 4,16 for
# the others), each level without and then with a memory-bandwidth hog on the synthesis cores;
# every pipeline start measures its GPU-only capacity first (the baseline of the GPU-time column).
# Every proof is checked with filecoin-proofs' verifier. Per kind, the tables, SVG charts and the
# recommended `[cpus]` layout are in OUT_DIR/<family> (report.md). BACKEND (gpu), GPU_CORES (2),
# N (24), MODES, PARAMS (a parameter cache to reuse), LIMIT (seconds per kind), NEIGHBOUR (both,
# off or on) and EXTRA (more bench flags, e.g. `--sweep-gpu-cores 2,4,6` for the layout sweep)
# change the run.
set -uo pipefail
bin="$(realpath "${1:?splitprover binary}")"
out="$(realpath -m "${2:-isolation}")"
work="${WORK:-/tmp/splitprover-isolation}"
kinds="${KINDS:-porep:StackedDrg2KiBV1_1 post:StackedDrgWindow2KiBV1_2 snap:StackedDrg2KiBV1}"
mkdir -p "$out" "$work"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-warn}" SPLITPROVER_CACHE_DIR="$work/cache"
nproc
status=0
first=1
for kind in $kinds; do
  dir="$out/${kind%%:*}"
  mkdir -p "$dir"
  if [ "$first" = 1 ]; then clients="${CLIENTS:-1,2,4,8,16,64}"; else clients="${OTHER_CLIENTS:-4,16}"; fi
  first=0
  printf '\n=== %s (%s)\n' "$kind" "$(date -u +%T)"
  timeout "${LIMIT:-600}" "$bin" bench --filecoin "$kind" --backend "${BACKEND:-gpu}" \
    --filecoin-modes "${MODES:-monolithic,inprocess,split,gpu-only}" --monolithic-proofs 3 \
    --gpu-cores "${GPU_CORES:-2}" --slots 24 -n "${N:-24}" --per-client 2 \
    --sweep-clients "$clients" --noisy-neighbour "${NEIGHBOUR:-both}" --gpu-only-proofs 8 \
    --param-cache "${PARAMS:-$work/fil-params}" --out-dir "$dir" ${EXTRA:-} >"$dir/bench.log" 2>&1 || status=1
  if [ -f "$dir/report.md" ]; then grep '^| ' "$dir/report.md" | cut -d'|' -f3-17; else tail -20 "$dir/bench.log"; fi
done
exit "$status"
