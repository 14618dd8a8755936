#!/usr/bin/env bash
# Our own CUDA prover (backend `gpu`) on a GPU host (NVIDIA H200, 16 cores), in one invocation:
#
#     scripts/h200-gpu.sh SPLITPROVER GPU_CHECK GPU_TEST [OUT_DIR]
#
#   1. GPU_TEST: the kernels test binary `tests/gpu.rs` (bit-exactness with the CPU backend on
#      three circuit families), with the GPU required (SPLITPROVER_TEST_REQUIRE_GPU=1);
#   2. `gpu_check` at 2^16 (100 witnesses, each proof compared with the CPU backend's bytes) and
#      2^20 (against supraseal-c2: time per proof, phases, bytes equal);
#   3. `gpu_check` at 2^23 (LARGE, default sha-chain:324): SEEDS (default 100) consecutive
#      witnesses, every proof verified, the first compared with the CPU backend, then timed
#      against supraseal-c2; the SRS upload time is the restart cost of a gpu-proc;
#   4. the 2 KiB PoRep C2 through the split pipeline with `--backend gpu` and `--backend cuda`
#      (every proof accepted by filecoin-proofs' verify_seal).
# GPU_CHECK and GPU_TEST are built with `cargo build --release -p kernels --features cuda
# --example gpu_check` and `cargo test --release -p kernels --features cuda --test gpu
# --no-run`; SPLITPROVER with `--features cuda`.
set -uo pipefail
bin="$(realpath "${1:?splitprover binary}")"
check="$(realpath "${2:?gpu_check binary}")"
tests="$(realpath "${3:?gpu test binary}")"
out="$(realpath -m "${4:-gpu-prover}")"
work="${WORK:-/tmp/splitprover-gpu}"
large="${LARGE:-sha-chain:324}"
seeds="${SEEDS:-100}"
mkdir -p "$out" "$work"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-warn}"
nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
status=0

echo "=== 1. bit-exactness tests"
SPLITPROVER_TEST_REQUIRE_GPU=1 "$tests" --test-threads 1 2>&1 | tail -8 | tee "$out/tests.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "=== 2. 2^16 (100 witnesses) and 2^20 against supraseal-c2"
"$check" sha-chain:2 --params "$work/p16.params" --seeds 100 --cpu 100 --iters 10 --pinned \
  --supraseal --phases 2>&1 | tail -6 | tee "$out/check-2p16.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
"$check" sha-chain:38 --params "$work/p20.params" --seeds 5 --cpu 2 --iters 20 --pinned \
  --supraseal --phases 2>&1 | tail -6 | tee "$out/check-2p20.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "=== 3. $large: $seeds witnesses"
"$bin" srs generate --circuit "$large" --out "$work/large.params" --seed 1 >/dev/null 2>&1
"$check" "$large" --params "$work/large.params" --seeds "$seeds" --par 12 --cpu 1 --iters 5 \
  --pinned --supraseal --phases 2>&1 | tail -8 | tee "$out/check-large.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "=== 4. 2 KiB PoRep C2, split pipeline, gpu then cuda"
for backend in gpu cuda; do
  "$bin" bench --filecoin porep:StackedDrg2KiBV1_1 --filecoin-modes split --backend "$backend" \
    --gpu-cores "${GPU_CORES:-6}" -n "${N:-24}" -j 16 --slots 16 --param-cache "$work/fil-params" \
    --out-dir "$out/porep-$backend" 2>&1 | tail -6 | tee "$out/porep-$backend.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
exit "$status"
