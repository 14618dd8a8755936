#!/usr/bin/env bash
# Does the split pipeline keep the GPU fed (issue 30)? One invocation on a GPU host (NVIDIA H100
# or H200, 16 cores), about 9 minutes:
#
#     scripts/gpu-feed.sh SPLITPROVER [OUT_DIR]
#
# The binary is built with `--features cuda`. Three benches, each with the in-process and the
# split pipeline on the same cpus, the synthesis-only and GPU-only capacities, and a sweep of
# gpu-proc core counts:
#   1. sha-chain:38 (2^20), batch 10, 96 proofs, 24 in flight, gpu-proc on 1, 2, 4 cores;
#   2. the same with batch 1 (48 proofs);
#   3. the 2 KiB PoRep C2, 48 proofs, 16 in flight, gpu-proc on 1, 2, 6 cores.
# Each bench prints, per split row, split / in-process and split / min(capacities) (whole run
# and steady state), synthesis time split / in-process (p50, p99), the synthesis phases and any
# nested synthesis; the tables, TIMELINE logs and waterfalls are under OUT_DIR. Each bench is
# followed by its split rows again with witness-only slots (`--witness-slots`, issue 31; WITNESS=0
# leaves them out), on the same machine, so the two compare. BACKEND (gpu), BATCHES ("10 1"),
# POREP (1), CIRCUIT (sha-chain:38), SWEEP_38, SWEEP_POREP, N, LIMIT (seconds per bench) change the run.
set -uo pipefail
bin="$(realpath "${1:?splitprover binary}")"
out="$(realpath -m "${2:-gpu-feed}")"
work="${WORK:-/tmp/splitprover-feed}"
mkdir -p "$out" "$work"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-warn}" SPLITPROVER_CACHE_DIR="$work/cache"
backend="${BACKEND:-gpu}"
limit="${LIMIT:-170}"
nproc
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
status=0

circuit="${CIRCUIT:-sha-chain:38}"
srs="$work/${circuit//:/-}.params"
[ -f "$srs" ] || timeout 120 "$bin" srs generate --circuit "$circuit" --out "$srs" --seed 1 \
  --device "${SRS_DEVICE:-gpu}" >"$out/srs.log" 2>&1 || { tail -5 "$out/srs.log"; status=1; }

step() { printf '\n=== %s (%s)\n' "$1" "$(date -u +%T)"; }
summary() { grep -E '^(split|  )' "$1" | grep -v '^  \[' || tail -20 "$1"; }

witness="${WITNESS:-1}"
for batch in ${BATCHES:-10 1}; do
  n=$([ "$batch" = 10 ] && echo "${N:-96}" || echo "${N1:-48}")
  step "$circuit batch $batch"
  timeout "$limit" "$bin" bench --circuit "$circuit" --srs "$srs" --backend "$backend" \
    --batch "$batch" --slots 24 -n "$n" -j 24 --sweep-gpu-cores "${SWEEP_38:-1,2,4}" \
    --monolithic-proofs 16 --modes inprocess,split,synth-only,gpu-only \
    --out-dir "$out/sha38-b$batch" >"$out/sha38-b$batch.log" 2>&1 || status=1
  summary "$out/sha38-b$batch.log"
  [ "$witness" = 0 ] && continue
  step "$circuit batch $batch, witness slots"
  timeout "$limit" "$bin" bench --circuit "$circuit" --srs "$srs" --backend "$backend" \
    --batch "$batch" --slots 24 -n "$n" -j 24 --sweep-gpu-cores "${SWEEP_38:-1,2,4}" \
    --modes split,gpu-only --witness-slots \
    --out-dir "$out/sha38-b$batch-witness" >"$out/sha38-b$batch-witness.log" 2>&1 || status=1
  summary "$out/sha38-b$batch-witness.log"
done
[ "${POREP:-1}" = 0 ] && exit "$status"

step "porep:StackedDrg2KiBV1_1"
timeout "$limit" "$bin" bench --filecoin porep:StackedDrg2KiBV1_1 --backend "$backend" \
  --filecoin-modes inprocess,split,gpu-only -n 48 -j 16 --slots 16 \
  --sweep-gpu-cores "${SWEEP_POREP:-1,2,6}" --param-cache "$work/fil-params" \
  --out-dir "$out/porep2k" >"$out/porep2k.log" 2>&1 || status=1
summary "$out/porep2k.log"
if [ "$witness" != 0 ]; then
  step "porep:StackedDrg2KiBV1_1, witness slots"
  timeout "$limit" "$bin" bench --filecoin porep:StackedDrg2KiBV1_1 --backend "$backend" \
    --filecoin-modes split -n 48 -j 16 --slots 16 --witness-slots \
    --sweep-gpu-cores "${SWEEP_POREP:-1,2,6}" --param-cache "$work/fil-params" \
    --out-dir "$out/porep2k-witness" >"$out/porep2k-witness.log" 2>&1 || status=1
  summary "$out/porep2k-witness.log"
fi
exit "$status"
