#!/usr/bin/env bash
# CUDA correctness at large circuits, on a GPU host (NVIDIA H200, 16 cores): the regression run
# for the lost batch additions of supraseal-c2 (ARCHITECTURE.md, "Why supraseal-c2 is vendored").
#
#     scripts/h200-cuda-regression.sh SPLITPROVER CUDA_DIAG [OUT_DIR]
#
# For every size in SIZES (log2 of the evaluation domain, default "21 22 23 24"):
#   1. random parameters for the SHA-256 chain whose domain is exactly 2^k;
#   2. FRESH_SEEDS (default SEEDS, 20) proofs, each a fresh `splitprover prove` process (PAR at a time, pinned
#      by affinity so that concurrent runs do not share cgroups); `prove` exits non-zero unless
#      the launcher verified the proof;
#   3. SEEDS jobs of one running service (`splitprover run` + `submit -n SEEDS`), each verified
#      by the service before it is returned;
#   4. at the size in BITEXACT (default 23): `cuda_diag --components`, which compares the CUDA
#      proof with the CPU backend's byte for byte for fixed r and s, and each of the five
#      multi-exponentiations (H, L, A, B_G1, B_G2) on its own.
# Ends with one table row per size; exits non-zero if any proof failed.
#
# SRS_DEVICE=gpu makes the parameters with the GPU generator (minutes less at 2^24); KEEP_SRS=1
# keeps them in WORK for a second run (another BACKEND: `cuda` is supraseal-c2, `gpu` ours).
# Both binaries must be built with `--features cuda` (scripts/cuda-env.sh). Needs no root.
set -uo pipefail
bin="$(realpath "${1:?splitprover binary}")"
diag="$(realpath "${2:?cuda_diag binary (kernels example)}")"
out="$(realpath -m "${3:-cuda-regression}")"
sizes="${SIZES:-21 22 23 24}"
seeds="${SEEDS:-20}"
fresh_seeds="${FRESH_SEEDS:-$seeds}"
par="${PAR:-4}"
bitexact="${BITEXACT:-23}"
gpu_cores="${GPU_CORES:-6}"  # BACKEND=cpu runs the same flow without a GPU
work="${WORK:-/tmp/splitprover-regression}"
mkdir -p "$out" "$work"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-warn}"

# SHA-256 chain blocks whose n = constraints + inputs is the largest below 2^k
# (25,840 constraints per block, 514 more and 3 inputs: n = 25,840 b + 517).
blocks_for() { echo $(( ((1 << $1) - 517) / 25840 )); }

nproc
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
rows=()
status=0
for k in $sizes; do
  b=$(blocks_for "$k")
  spec="sha-chain:$b"
  srs="$work/sha-chain-$b.params"
  log="$out/2p$k-${BACKEND:-cuda}.log"
  echo "=== 2^$k: $spec" | tee "$log"
  t0=$SECONDS
  if [ ! -s "$srs" ]; then
    "$bin" srs generate --circuit "$spec" --out "$srs" --seed 1 --device "${SRS_DEVICE:-cpu}" \
      >>"$log" 2>&1 || { echo "srs generate failed" | tee -a "$log"; status=1; continue; }
  fi
  gen_s=$((SECONDS - t0))

  # Fresh `prove` processes, PAR at a time.
  t0=$SECONDS
  fresh_ok=0
  for s in $(seq 1 "$fresh_seeds"); do
    (
      if "$bin" prove --circuit "$spec" --srs "$srs" --seed "$s" --backend "${BACKEND:-cuda}" \
          --gpu-cores "$gpu_cores" --slots 2 --pin affinity --huge-pages none \
          --out "$work/fresh-$k-$s.proof" >"$work/fresh-$k-$s.log" 2>&1; then
        echo "seed $s: verified"
      else
        echo "seed $s: FAILED: $(tail -1 "$work/fresh-$k-$s.log")"
      fi
    ) >>"$log" &
    while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do sleep 0.2; done
  done
  wait
  fresh_ok=$(grep -c ': verified$' "$log")
  fresh_s=$((SECONDS - t0))

  # One service, SEEDS jobs.
  t0=$SECONDS
  sock="$work/sp-$k.sock"
  cat >"$work/config-$k.toml" <<TOML
cache_dir = "$work/cache"
socket = "$sock"
[ring]
slots = 6
huge_pages = "none"
[cpus]
gpu_cores = $gpu_cores
[[gpu]]
backend = "${BACKEND:-cuda}"
batch = 1
[[circuit]]
spec = "$spec"
srs = "$srs"
TOML
  "$bin" run --config "$work/config-$k.toml" 2>"$work/service-$k.log" &
  service=$!
  for _ in $(seq 900); do [ -S "$sock" ] && break; sleep 0.2; done
  if SPLITPROVER_SOCKET="$sock" "$bin" submit --circuit "$spec" --seed 1 -n "$seeds" \
      --out-dir "$work/service-$k" >"$work/submit-$k.txt" 2>>"$log"; then
    service_ok=$(ls "$work/service-$k" | grep -c '\.proof$')
  else
    service_ok=$(ls "$work/service-$k" 2>/dev/null | grep -c '\.proof$')
    echo "submit FAILED: $(tail -3 "$log")" | tee -a "$log"
  fi
  SPLITPROVER_SOCKET="$sock" "$bin" status --json >"$out/status-2p$k.json" 2>/dev/null || true
  # The service's own count: every job it answered with a proof passed its verification.
  counted=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["counters"]; print(c["succeeded"], c["failed"])' \
    "$out/status-2p$k.json" 2>/dev/null || echo "? ?")
  echo "service counters (succeeded failed): $counted" | tee -a "$log"
  kill -TERM "$service" 2>/dev/null; wait "$service" 2>/dev/null
  service_s=$((SECONDS - t0))

  exact="-"
  if [ "$k" = "$bitexact" ]; then
    if "$diag" "$spec" --params "$srs" --seeds 1,2 --repeats 2 --pinned --components \
        >"$out/bitexact-2p$k.txt" 2>&1; then exact="equal"; else exact="DIFFERS"; status=1; fi
    tail -20 "$out/bitexact-2p$k.txt"
  fi
  [ "$fresh_ok" -eq "$fresh_seeds" ] && [ "$service_ok" -eq "$seeds" ] || status=1
  rows+=("$(printf '| 2^%s | %s | %s | %s/%s (%s s) | %s/%s (%s s) | %s |' \
    "$k ${BACKEND:-cuda}" "$spec" "$gen_s" "$fresh_ok" "$fresh_seeds" "$fresh_s" "$service_ok" "$seeds" "$service_s" "$exact")")
  [ -n "${KEEP_SRS:-}" ] || rm -f "$srs"
  rm -f "$work"/fresh-"$k"-*.proof
  rm -rf "$work/service-$k"
done

{
  echo "| domain | circuit | srs generate s | fresh prove verified | service jobs verified | CPU = CUDA bytes |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$out/table-${BACKEND:-cuda}.md"
exit $status
