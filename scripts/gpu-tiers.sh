#!/usr/bin/env bash
# The `gpu` backend under device-memory budgets (issue 32): one circuit's SRS generated on the
# GPU once, then the split pipeline at each budget, every proof verified, on a GPU host (NVIDIA
# H100 or H200, 16 cores):
#
#     scripts/gpu-tiers.sh SPLITPROVER [OUT_DIR]
#
# Each budget is one `bench --modes split` run (witness-only slots unless WITNESS=0): PROOFS
# partitions, JOBS in flight, the gpu-proc on GPU_CORES cores. Its table gives the GPU time per
# partition (`gpu s/part`); the gpu-proc's log line `SRS uploaded to the GPU` gives what the plan
# keeps resident and streams (`streamed_mib`) and the copy rate the streaming got at set-up
# (`stream_gbps`). "none" is the default budget (what the device has free). The last table
# compares each budget's GPU time per partition with the first budget's.
#
# CIRCUIT (porep-like:2), BUDGETS ("none 32GiB 24GiB 16GiB"), PROOFS (6), JOBS (6), SLOTS (6),
# GPU_CORES (4), LIMIT (seconds per run, 150), OTHER (a second binary whose run at the first
# budget goes in the table too: an older build to compare) change the run.
set -uo pipefail
bin="$(realpath "${1:?splitprover binary}")"
out="$(realpath -m "${2:-gpu-tiers}")"
work="${WORK:-/tmp/splitprover-tiers}"
mkdir -p "$out" "$work"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-info}" SPLITPROVER_CACHE_DIR="$work/cache"
circuit="${CIRCUIT:-porep-like:2}"
budgets="${BUDGETS:-none 32GiB 24GiB 16GiB}"
limit="${LIMIT:-150}"
nproc
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
status=0

srs="$work/${circuit//:/-}.params"
if [ ! -f "$srs" ]; then
  start=$(date +%s)
  timeout 400 "$bin" srs generate --circuit "$circuit" --out "$srs" --seed 1 --device gpu \
    >"$out/srs.log" 2>&1 || { tail -5 "$out/srs.log"; exit 1; }
  echo "srs generate $circuit: $(($(date +%s) - start)) s"
fi

witness=()
[ "${WITNESS:-1}" = 1 ] && witness=(--witness-slots)

run() { # run NAME BINARY BUDGET
  local name="$1" binary="$2" budget="$3" flag=()
  [ "$budget" = none ] || flag=(--gpu-memory-budget "$budget")
  printf '\n=== %s (%s)\n' "$name" "$(date -u +%T)"
  timeout "$limit" "$binary" bench --circuit "$circuit" --srs "$srs" --backend gpu \
    --modes split "${witness[@]}" --warm-up 0 -n "${PROOFS:-6}" -j "${JOBS:-6}" \
    --slots "${SLOTS:-6}" --gpu-cores "${GPU_CORES:-4}" "${flag[@]}" \
    --out-dir "$out/$name" >"$out/$name.log" 2>&1 || status=1
  grep -E '^(gpu|layout) ' "$out/$name.log" | head -3 || tail -5 "$out/$name.log"
  grep -rhoE 'srs_mib=[0-9]+|streamed_mib=[0-9]+|stream_gbps="?[0-9.]+|planned_mib=[0-9]+|budget_mib=[0-9]+' \
    "$out/$name.log" "$out/$name" 2>/dev/null | sort -u | tr '\n' ' '
  echo
}

names=()
for b in $budgets; do
  run "budget-$b" "$bin" "$b"
  names+=("budget-$b")
done
if [ -n "${OTHER:-}" ]; then
  first="${budgets%% *}"
  run "other-$first" "$(realpath "$OTHER")" "$first"
  names+=("other-$first")
fi

printf '\n%-18s %12s %10s\n' run "gpu s/part" "/ first"
base=""
for n in "${names[@]}"; do
  g=$(awk '/^gpu .* split / {for (i = 1; i <= NF; i++) if ($i == "split") {print $(i + 9); exit}}' "$out/$n.log" 2>/dev/null)
  [ -z "$base" ] && base="$g"
  ratio=$(awk -v g="$g" -v b="$base" 'BEGIN {if (g > 0 && b > 0) printf "%.2f", g / b; else print "-"}')
  printf '%-18s %12s %10s\n' "$n" "${g:--}" "$ratio"
done
exit "$status"
