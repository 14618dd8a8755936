#!/usr/bin/env bash
# Our own CUDA prover (backend `gpu`) on a GPU host (NVIDIA H200), in one invocation:
#
#     scripts/h200-gpu.sh GPU_CHECK [OUT_DIR]
#
# GPU_CHECK is `cargo build --release -p kernels --features cuda --example gpu_check`. With
# GPU_TEST set to the kernels test binary `tests/gpu.rs` (`cargo test --release -p kernels
# --features cuda --test gpu --no-run`) its bit-exactness tests run first, the GPU required.
# STEPS picks the steps (default: tiny p10 p16 p20 p20-no-overlap):
#   tiny    a tiny circuit (`pubinputs:8`): the fixed cost per proof, batches of 4;
#   p10     a domain of exactly 2^10 (`bits:1000`), every proof compared with the CPU's bytes;
#   p16     2^16 (`sha-chain:2`): 16 witnesses, each proof compared with the CPU backend's
#           bytes, one proof per call and batches of 8;
#   p20     2^20 (`sha-chain:38`): parameters from the GPU generator, 8 witnesses in batches of
#           8 (the next proof's copies overlapping the current MSMs), against supraseal-c2,
#           with and without the front half as a CUDA graph (`--compare-graphs`);
#   p20-no-overlap  2^20 again without the overlap, for the comparison;
#   p16-device  2^16 with every proof finished on the device (the default below 2^20 is the
#           host), each proof compared with the CPU backend's bytes;
#   p20-finish  2^20 finished on the device (the default there) and on the host in one run
#           (`--compare-finish`), with the phases and the host CPU per proof of both;
#   wbits   the H MSM's window/chunk settings swept at 2^20 (each byte-checked);
#   p22     2^22 (`sha-chain:162`): 2 witnesses, one compared with the CPU backend's bytes;
#   p23     2^23 (`sha-chain:324`, 8,372,677 constraints): CONSECUTIVE (default 100) proofs
#           one per call with each backend, every one verified (the supraseal-c2 race);
#   p24     2^24 (`sha-chain:649`, 16,770,677 constraints): the same, and one proof compared
#           with the CPU backend's bytes.
# Each step runs under `timeout ${STEP_LIMIT:-300}`. Every line of gpu_check that compares says
# `equal`/`verify ok`; a mismatch says `DIFFERS`, `DIFFERENT` or `FAIL` and names the stage at
# fault (`diagnosis:`).
set -uo pipefail
check="$(realpath "${1:?gpu_check binary}")"
out="$(realpath -m "${2:-gpu-prover}")"
work="${WORK:-/tmp/splitprover-gpu}"
steps="${STEPS:-tiny p10 p16 p20 p20-no-overlap}"
n="${CONSECUTIVE:-100}"
mkdir -p "$out" "$work"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
status=0
run() { # name, args...
  local name=$1; shift
  case " $steps " in *" $name "*) ;; *) return 0 ;; esac
  local t0=$SECONDS
  timeout "${STEP_LIMIT:-300}" "$check" "$@" >"$out/$name.txt" 2>&1; local rc=$?
  echo "--- $name rc=$rc ($((SECONDS - t0)) s)"; [ $rc -eq 0 ] || status=1
  grep -E "ms|verify|equal|DIFFER|FAIL|diagnosis|input set|%|consecutive" "$out/$name.txt" \
    | grep -v "^seed " | tail -"${LINES_EACH:-14}"
}
if [ -n "${GPU_TEST:-}" ]; then
  SPLITPROVER_TEST_REQUIRE_GPU=1 "$GPU_TEST" --test-threads 1 >"$out/tests.txt" 2>&1 || status=1
  tail -3 "$out/tests.txt"
fi
run tiny pubinputs:8 --params "$work/pi8" --seeds 4 --cpu 4 --batch 4 --iters 20 --pinned --phases
run p10 bits:1000 --params "$work/b1000" --seeds 3 --cpu 3 --batch 3 --iters 5 --pinned --phases
run p16 sha-chain:2 --params "$work/p16" --seeds 16 --par 8 --cpu 16 --batch 8 --iters 10 --pinned --supraseal --phases
run p20 sha-chain:38 --params "$work/p20" --gen gpu --seeds 8 --par 8 --cpu 1 --batch 8 --iters 10 --pinned --supraseal --phases --compare-graphs
run p16-device sha-chain:2 --params "$work/p16" --seeds 16 --par 8 --cpu 16 --batch 8 --iters 10 --pinned --phases --finish device
run p20-finish sha-chain:38 --params "$work/p20" --gen gpu --seeds 8 --par 8 --cpu 1 --batch 8 --iters 20 --pinned --phases --compare-finish
run p20-no-overlap sha-chain:38 --params "$work/p20" --gen gpu --seeds 8 --par 8 --cpu 0 --batch 8 --iters 3 --pinned --no-overlap
run wbits sha-chain:38 --params "$work/p20" --gen gpu --seeds 1 --cpu 0 --iters 5 --pinned --wbits-h 11,12,13,14,12/1,13/1
run p22 sha-chain:162 --params "$work/p22" --gen gpu --seeds 2 --par 2 --cpu 1 --iters 3 --pinned --phases
run p23 sha-chain:324 --params "$work/p23" --gen gpu --seeds 4 --par 4 --cpu 0 --iters 2 --pinned --supraseal --phases --consecutive "$n"
run p24 sha-chain:649 --params "$work/p24" --gen gpu --seeds 2 --par 2 --cpu 1 --iters 2 --pinned --supraseal --phases --consecutive "$n"
if grep -qE "DIFFER|FAIL|DIFFERENT" "$out"/*.txt; then status=1; echo "MISMATCH: see $out"; fi
exit "$status"
