#!/usr/bin/env bash
# A 32 GiB-sector PoRep partition's shape at full size (`porep-like:1`: 130,278,541 constraints,
# domain 2^27, a 47 GB SRS) through the split pipeline on a GPU host (NVIDIA H200, 16 cores,
# 128 GiB). Two phases, one device invocation each (they share WORK, which must survive between
# them):
#
#     scripts/h200-full-scale.sh gen   SPLITPROVER [OUT_DIR]   # the parameters, GPU generator
#     scripts/h200-full-scale.sh prove SPLITPROVER [OUT_DIR]   # PROOFS partitions, split pipeline
#
# `gen` writes WORK/KIND-K.params with `srs generate --device gpu` (seed 1), deleting WORK's
# other .params first (two 47 GB files do not fit a 64 GiB disk). `prove` runs
# `bench --modes split` on it: the SRS streamed into the launcher's shared image and uploaded to
# the GPU once, the matrices recorded once (cache in WORK/cache), then PROOFS partitions
# synthesized into SLOTS ring slots and proved by our CUDA prover; every proof verified against
# the parameters' verifying key. Host memory and GPU memory are sampled every 5 s into
# OUT_DIR/memory.txt (the peak is printed last). SCALE (1), PROOFS (10), CLIENTS (PROOFS), SLOTS
# (3), GPU_CORES (4), LIMIT (seconds, 560), DEVICE (the generator's, gpu), BACKEND (gpu) and
# KIND (porep-like; porep-bits: the same shape with a real partition's 90.8 % of 0/1 aux)
# change the run; EXTRA adds bench flags, e.g. `--witness-slots --gpu-memory-budget 72GiB` (less
# than an 80 GB H100 has: the plan streams what does not fit, issue 32).
set -uo pipefail
phase="${1:?gen or prove}"
bin="$(realpath "${2:?splitprover binary}")"
out="$(realpath -m "${3:-full-scale}")"
work="$(realpath -m "${WORK:-target/full-scale}")"
scale="${SCALE:-1}"
kind="${KIND:-porep-like}"
params="$work/$kind-$scale.params"
mkdir -p "$out" "$work"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-info}" SPLITPROVER_CACHE_DIR="$work/cache"
nproc; free -g | head -2; df -h "$work" | tail -1
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>/dev/null || true

sample() { # every 5 s: time, host used/available MiB, GPU used MiB
  while :; do
    printf '%s %s %s\n' "$(date -u +%T)" \
      "$(free -m | awk '/^Mem:/ {print "used=" $3 " avail=" $7}')" \
      "gpu=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)"
    sleep 5
  done
}
sample >"$out/memory-$phase.txt" 2>&1 &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT

timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -v)
status=0
case "$phase" in
gen)
  rm -f "$work"/*.params
  "${timer[@]}" "$bin" srs generate --circuit "$kind:$scale" --device "${DEVICE:-gpu}" --seed 1 \
    --out "$params" >"$out/gen.log" 2>&1 || status=1
  tail -25 "$out/gen.log" | grep -E "Elapsed|Maximum resident|error|Exit" || tail -5 "$out/gen.log"
  ls -l "$params" 2>/dev/null || status=1
  ;;
prove)
  [ -f "$params" ] || { echo "no $params: run the gen phase first (on the same machine)"; exit 1; }
  proofs="${PROOFS:-10}"
  "${timer[@]}" timeout "${LIMIT:-560}" "$bin" bench --circuit "$kind:$scale" \
    --srs "$params" --backend "${BACKEND:-gpu}" --modes split --warm-up 0 -n "$proofs" -j "${CLIENTS:-$proofs}" \
    --slots "${SLOTS:-3}" --gpu-cores "${GPU_CORES:-4}" --out-dir "$out/bench" ${EXTRA:-} \
    >"$out/bench.log" 2>&1 || status=1
  grep -E "^(config|-|porep)|split|verified|error|Elapsed|Maximum resident|refus" "$out/bench.log" | tail -20
  ;;
*) echo "phase: gen or prove"; exit 2 ;;
esac
kill $sampler 2>/dev/null
echo "peak host used MiB: $(sed -n 's/.*used=\([0-9]*\).*/\1/p' "$out/memory-$phase.txt" | sort -n | tail -1)," \
  "peak GPU MiB: $(sed -n 's/.*gpu=\([0-9]*\).*/\1/p' "$out/memory-$phase.txt" | sort -n | tail -1)"
exit "$status"
