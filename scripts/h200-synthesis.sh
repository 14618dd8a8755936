#!/usr/bin/env bash
# Pre-compiled synthesis (issue 13) and the gpu backend in the split pipeline (issue 12) on a GPU
# host (NVIDIA H200, 16 cores), in one invocation:
#
#     scripts/h200-synthesis.sh SPLITPROVER [OUT_DIR]
#
#   1. `splitprover synth-bench`: per circuit, the full and the pre-compiled synthesis byte for
#      byte, then timed on 1 and 8 threads (per-core cost, latency);
#   2. the built-in SHA-256 chain at 2^20 (`sha-chain:38`) through every mode, pre-compiled
#      synthesis, then the split mode and the capacities with the full synthesis (today's path);
#   3. the 2 KiB PoRep C2 in the split pipeline and its capacities, pre-compiled then full (every
#      proof accepted by filecoin-proofs' verify_seal).
# SPLITPROVER is built with `--features cuda`. BACKEND (default gpu), GPU_CORES (6),
# N (96), PN (48), CIRCUIT (sha-chain:38), PCIRCUIT (porep:StackedDrg2KiBV1_1) and THREADS (1,8)
# make a smaller run (the CPU backend on a dev machine, say).
set -uo pipefail
bin="$(realpath "${1:?splitprover binary}")"
out="$(realpath -m "${2:-synthesis}")"
work="${WORK:-/tmp/splitprover-synthesis}"
backend="${BACKEND:-gpu}"
cores="${GPU_CORES:-6}"
circuit="${CIRCUIT:-sha-chain:38}"
pcircuit="${PCIRCUIT:-porep:StackedDrg2KiBV1_1}"
mkdir -p "$out" "$work"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-warn}" SPLITPROVER_CACHE_DIR="$work/cache"
nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
status=0
step() { printf '\n=== %s (%s)\n' "$1" "$(date -u +%T)"; }
# A bench's table (from its report), or the end of its log when it failed.
table() {
  if [ -f "$1/report.md" ]; then grep '^| ' "$1/report.md" | cut -d'|' -f3,5,7-16
  else tail -5 "$1.log"; fi
}

step "1. synthesis per circuit: full vs pre-compiled"
"$bin" synth-bench "$circuit" "$pcircuit" --work-dir "$work/synth-bench" --iters "${ITERS:-3}" --threads "${THREADS:-1,8}" 2>&1 \
  | tee "$out/synth-bench.txt" | tail -8
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "2. $circuit, every mode"
device=$([ "$backend" = cpu ] && echo cpu || echo gpu)
"$bin" srs generate --circuit "$circuit" --out "$work/chain.params" --seed 1 --device "$device" \
  >/dev/null 2>&1 || "$bin" srs generate --circuit "$circuit" --out "$work/chain.params" --seed 1 >/dev/null
for synthesis in precompiled full; do
  modes=monolithic,inprocess,split,synth-only,gpu-only
  [ "$synthesis" = full ] && modes=split,synth-only,gpu-only
  "$bin" bench --circuit "$circuit" --srs "$work/chain.params" --backend "$backend" \
    --batch "${BATCH:-10}" --slots 24 -n "${N:-96}" -j 24 --monolithic-proofs "${MONO:-20}" \
    --gpu-cores "$cores" --modes "$modes" --synthesis "$synthesis" \
    --out-dir "$out/chain-$synthesis" >"$out/chain-$synthesis.log" 2>&1 || status=1
  table "$out/chain-$synthesis"
done

step "3. $pcircuit, split and capacities"
for synthesis in precompiled full; do
  "$bin" bench --filecoin "$pcircuit" --filecoin-modes split,gpu-only --backend "$backend" \
    --gpu-cores "$cores" -n "${PN:-48}" -j 16 --slots 16 --gpu-only-proofs 12 \
    --synthesis "$synthesis" --param-cache "$work/fil-params" \
    --out-dir "$out/porep-$synthesis" >"$out/porep-$synthesis.log" 2>&1 || status=1
  table "$out/porep-$synthesis"
done
exit "$status"
