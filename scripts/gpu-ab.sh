#!/usr/bin/env bash
# Builds of `gpu_check` on one GPU, before and after a CUDA change, on the same parameters and
# assignments, in one invocation (issue 43: "record before/after in one call per change"):
#
#     scripts/gpu-ab.sh OUT_DIR GPU_CHECK_BEFORE GPU_CHECK_AFTER [GPU_CHECK ...]
#
# Each is `cargo build --release -p kernels --features cuda --example gpu_check` (Hopper:
# SPLITPROVER_CUDA_ARCH=90) of one tree, named by its file name. Per spec in SPECS (default
# `sha-chain:1200`, 2^25), the builds take turns ROUNDS times (default 2) with the same flags
# (`--seeds 1 --cpu 0 --iters ITERS --phases` and EXTRA, e.g. `--wbits-h 18/6` to time the H
# MSM in chunks of the size a streamed 2^27 takes) on one parameter file in WORK, which the
# first run writes with its GPU generator (`--gen gpu`, seed 1: every build's generator gives
# the same bytes). Every proof is verified, and the sweep's proofs must equal the bytes of the
# build's own first proof. The last lines are a table of the H MSM and compute medians per
# build and round. Each run is bounded by STEP_LIMIT seconds (300), the first one's generation
# included.
set -uo pipefail
out="$(realpath -m "${1:?output folder}")"
shift
[ $# -ge 2 ] || { echo "give at least two gpu_check builds"; exit 2; }
builds=()
for b in "$@"; do builds+=("$(realpath "$b")"); done
work="$(realpath -m "${WORK:-target/gpu-ab}")"
specs="${SPECS:-sha-chain:1200}"
rounds="${ROUNDS:-2}"
mkdir -p "$out" "$work"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
status=0
table=()
for spec in $specs; do
  name="${spec//:/-}"
  params="$work/$name.params"
  for round in $(seq 1 "$rounds"); do
    for bin in "${builds[@]}"; do
      build="$(basename "$bin")"
      log="$out/$name-$build-$round.log"
      # shellcheck disable=SC2086 # EXTRA's flags are split on purpose
      timeout "${STEP_LIMIT:-300}" "$bin" "$spec" --params "$params" --gen gpu --seeds 1 \
        --cpu 0 --iters "${ITERS:-3}" --phases ${EXTRA:-} >"$log" 2>&1 || {
        echo "$spec $build round $round: gpu_check failed (exit $?), see $(basename "$log")"
        status=1
      }
      grep -E "FAIL|DIFFER|error" "$log" | head -3
      [ -s "$params" ] || { echo "$spec: no parameters were written, see $(basename "$log")"; continue 3; }
      alone="$(grep -m1 "phases alone" "$log")"
      h="$(sed -n 's/.* h \([0-9.]*\), final.*/\1/p' <<<"$alone")"
      c="$(sed -n 's/.*; compute \([0-9.]*\),.*/\1/p' <<<"$alone")"
      sweep="$(grep -E '^\| [0-9]+ \| [0-9]+ \|' "$log" | awk -F'|' '{printf "%s/%s: %s ms%s; ", $2+0, $3+0, $4+0, ($8 ~ /equal/ ? "" : " DIFFERENT")}')"
      table+=("| $spec | $build | $round | ${h:--} | ${c:--} | ${sweep:--} |")
    done
  done
  [ "${KEEP:-0}" = 1 ] || rm -f "$params"
done
echo
echo "| spec | build | round | H MSM ms (median) | compute ms | H sweep (bits/chunks: H ms) |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${table[@]}"
exit "$status"
