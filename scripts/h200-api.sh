#!/usr/bin/env bash
# Issue 11's figures on a GPU host (NVIDIA H200, 16 cores), in one call:
# 1. `bench --filecoin porep:StackedDrg2KiBV1_1 --filecoin-modes api`: PoRep C2 through the cuzk
#    gRPC API against the pipeline's own submit path (alternating rounds, one pipeline), and a
#    WinningPoSt behind 20 queued PoRep C2 against the same on the idle service;
# 2. `splitprover run` with the CUDA backend: GetStatus's GPU line read from the device, an
#    EvictSRS / PreloadSRS of a 2^20 circuit's SRS with its time and bytes, the metrics endpoint.
#
#     scripts/h200-api.sh [SPLITPROVER_BINARY] [OUT_DIR]
#
# The binary must be built with `--features cuda`. Needs root for the huge-page reservation.
set -euo pipefail
bin="${1:-target/release/splitprover}"
out="${2:-bench-h200-api}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-warn}"
export SPLITPROVER_CACHE_DIR="$out/cache"
nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
if [ -w /proc/sys/vm/nr_hugepages ]; then
  echo "${HUGEPAGES:-4096}" > /proc/sys/vm/nr_hugepages
  echo "2 MiB huge pages reserved: $(cat /proc/sys/vm/nr_hugepages)"
fi

echo "=== API bench: PoRep C2 2 KiB, gRPC vs local; WinningPoSt behind 20 PoRep"
"$bin" bench --filecoin porep:StackedDrg2KiBV1_1 --filecoin-modes api \
  -n "${N:-16}" -j "${J:-16}" --slots 16 --backend cuda --gpu-cores "${GPU_CORES:-6}" \
  --param-cache "$out/params" --out-dir "$out/api" | tee "$out/api.txt"

echo "=== the service with the CUDA backend"
circuit="${CIRCUIT:-sha-chain:20}"
srs="$out/cache/service.params"
"$bin" srs generate --circuit "$circuit" --out "$srs" --seed 1 >/dev/null
cat > "$out/config.toml" <<CONF
cache_dir = "$out/cache"
socket = "$out/sp.sock"
[ring]
slots = 8
[cpus]
gpu_cores = ${GPU_CORES:-6}
[[gpu]]
backend = "cuda"
[[circuit]]
spec = "$circuit"
srs = "$srs"
[service]
journal = "$out/jobs.sqlite"
listen = ["127.0.0.1:9820"]
metrics_listen = "127.0.0.1:9821"
CONF
"$bin" run --config "$out/config.toml" 2> "$out/service.log" &
svc=$!
for _ in $(seq 600); do [ -S "$out/sp.sock" ] && break; sleep 0.2; done
export SPLITPROVER_SOCKET=127.0.0.1:9820
"$bin" submit --circuit "$circuit" -n 4 --wait
"$bin" srs evict "$circuit"
"$bin" srs preload "$circuit"
"$bin" submit --circuit "$circuit" -n 2 --wait
"$bin" status | tee "$out/status.txt"
curl -s 127.0.0.1:9821/metrics > "$out/metrics.txt" || true
grep -E '^(cuzk_proofs_completed_total|splitprover_gpu_busy_ratio|splitprover_huge_pages)' "$out/metrics.txt" || true
kill -TERM "$svc"; wait "$svc" || true
echo "=== summary"
grep -E 'overhead|ratio' "$out/api.txt" || true
grep -E '^gpu' "$out/status.txt" || true
