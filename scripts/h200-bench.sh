#!/usr/bin/env bash
# The split-pipeline measurement of benchmarks/2026-11-30-h200/NOTES.md on a GPU host (NVIDIA
# H200, 16 cores): every bench mode and both capacities in one run, then a sweep of gpu-proc
# core counts.
#
#     scripts/h200-bench.sh [SPLITPROVER_BINARY] [OUT_DIR]
#
# The binary must be built with `--features cuda` (see scripts/cuda-env.sh). Needs root for the
# huge-page reservation (skipped otherwise).
set -euo pipefail
bin="${1:-target/release/splitprover}"
out="${2:-bench-h200}"
circuit="${CIRCUIT:-sha-chain:38}"
n="${N:-160}"
batch="${BATCH:-10}"
mkdir -p "$out"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-warn}"
export SPLITPROVER_CACHE_DIR="$out/cache"

nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
if [ -w /proc/sys/vm/nr_hugepages ]; then
  echo "${HUGEPAGES:-4096}" > /proc/sys/vm/nr_hugepages
  echo "2 MiB huge pages reserved: $(cat /proc/sys/vm/nr_hugepages)"
fi

srs="$out/cache/$(echo "$circuit" | tr -c 'a-zA-Z0-9\n' '-').params"
/usr/bin/time -f "srs generate: %e s, %M KiB max RSS" "$bin" srs generate --circuit "$circuit" --out "$srs" --seed 1

common=(--backend cuda --circuit "$circuit" --srs "$srs" --batch "$batch" --slots 24 -n "$n")
gpu_cores="${GPU_CORES:-4}"
echo "=== all modes, batch $batch, gpu-proc $gpu_cores cores, synth-proc the others (one worker per core)"
"$bin" bench "${common[@]}" -j 24 --gpu-cores "$gpu_cores" \
  --modes monolithic,inprocess,synth-only,gpu-only,split --out-dir "$out/modes" | tee "$out/modes.txt"
echo "=== sweep: gpu-proc cores ${SWEEP:-2,4,6,8} (the cuda backend refuses 1 core)"
"$bin" bench "${common[@]}" -j 24 --sweep-gpu-cores "${SWEEP:-2,4,6,8}" \
  --modes split,gpu-only --out-dir "$out/sweep" | tee "$out/sweep.txt"
