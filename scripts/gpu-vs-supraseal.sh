#!/usr/bin/env bash
# Our `gpu` backend and supraseal-c2 (`cuda`) side by side on one GPU, at 2^24, 2^26 and 2^27
# (issue 43 item 1), in one invocation, so the comparison can be re-run after every change:
#
#     scripts/gpu-vs-supraseal.sh GPU_CHECK [OUT_DIR]
#
# GPU_CHECK is `cargo build --release -p kernels --features cuda --example gpu_check` (built with
# SPLITPROVER_CUDA_ARCH=90 for Hopper). Per size: the parameters are written by the GPU generator
# (seed 1) into WORK, then `gpu_check SPEC --seeds 1 --cpu 0 --iters ITERS --phases --supraseal`
# proves the same assignment with both backends, verifies every proof, and prints each one's
# median GPU time and our phases; the parameters are deleted before the next size (two 2^27
# sets do not fit a 64 GiB disk). SIZES picks the specs (default `sha-chain:649 porep-like:2
# porep-bits:1`: 2^24, 2^26, 2^27). Where supraseal-c2 cannot run (its own copy of the SRS in host
# memory beside ours at 2^27), gpu_check's error and the host memory samples
# (OUT_DIR/memory-SPEC.txt, every 2 s) say why, with the numbers. Each size runs under
# `timeout ${STEP_LIMIT:-540}`. EXTRA adds gpu_check flags to every run (e.g. `--beside on`);
# VARIANTS (separated by `;`) runs ours again per size with each set of flags added, on the same
# parameters and without supraseal (e.g. `--beside off`: before/after a change in one call).
# KEEP=1 keeps the parameters in WORK afterwards (for a pipeline run on the same machine).
# The last lines are a table.
set -uo pipefail
check="$(realpath "${1:?gpu_check binary}")"
out="$(realpath -m "${2:-gpu-vs-supraseal}")"
work="$(realpath -m "${WORK:-target/gpu-vs-supraseal}")"
sizes="${SIZES:-sha-chain:649 porep-like:2 porep-bits:1}"
mkdir -p "$out" "$work"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
free -g | head -2
status=0
for spec in $sizes; do
  name="${spec//:/-}"
  params="$work/$name.params"
  (while :; do
    printf '%s used=%s gpu=%s\n' "$(date +%T)" "$(free -m | awk '/^Mem:/ {print $3}')" \
      "$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)"
    sleep 2
  done) >"$out/memory-$name.txt" 2>&1 &
  sampler=$!
  timeout "${STEP_LIMIT:-540}" "$check" "$spec" --params "$params" --gen gpu --seeds 1 --cpu 0 \
    --iters "${ITERS:-3}" --phases --supraseal ${EXTRA:-} >"$out/$name.log" 2>&1 || {
    echo "$spec: gpu_check failed (exit $?), see $name.log"
    status=1
  }
  kill "$sampler" 2>/dev/null
  echo "== $spec (peak host used MiB $(sed -n 's/.*used=\([0-9]*\).*/\1/p' "$out/memory-$name.txt" | sort -n | tail -1))"
  grep -iE "median|supraseal|verify|FAIL|DIFFER|error|compute" "$out/$name.log" | tail -12
  k=0
  IFS=';' read -ra variants <<<"${VARIANTS:-}"
  for v in "${variants[@]}"; do
    k=$((k + 1))
    # shellcheck disable=SC2086 # the variant's flags are split on purpose
    timeout "${STEP_LIMIT:-540}" "$check" "$spec" --params "$params" --seeds 1 --cpu 0 \
      --iters "${ITERS:-3}" --phases ${EXTRA:-} $v >"$out/$name-v$k.log" 2>&1 || {
      echo "$spec ($v): gpu_check failed (exit $?), see $name-v$k.log"
      status=1
    }
    echo "== $spec with $v"
    grep -iE "median|verify|FAIL|DIFFER|error|compute" "$out/$name-v$k.log" | tail -6
  done
  [ "${KEEP:-0}" = 1 ] || rm -f "$params"
done
exit "$status"
