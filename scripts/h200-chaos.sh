#!/usr/bin/env bash
# The crash promise on a GPU host: the service proves jobs with the CUDA backend while gpu-proc
# and synth-proc are killed with SIGKILL at random moments; every job must finish with a proof
# the launcher verified, and READY slots must not be synthesized again. Then the launcher itself
# is killed with SIGKILL (LAUNCHER_KILLS times, restarted each time with the same config and job
# journal, as systemd would): every accepted job must finish after the restarts; the script
# reports jobs accepted, finished, failed and lost (target: 0 lost) and exits 1 on a loss.
#
#     scripts/h200-chaos.sh [SPLITPROVER_BINARY] [OUT_DIR]
set -euo pipefail
bin="$(realpath "${1:-target/release/splitprover}")"
out="$(realpath -m "${2:-chaos-h200}")"
circuit="${CIRCUIT:-sha-chain:38}"
jobs="${JOBS:-40}"
backend="${BACKEND:-cuda}"
gpu_cores="${GPU_CORES:-4}"
mkdir -p "$out"
rm -f "$out"/jobs.sqlite*
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-warn}" SPLITPROVER_SOCKET="$out/sp.sock"
cat > "$out/config.toml" <<TOML
cache_dir = "$out/cache"
socket = "$out/sp.sock"
[ring]
slots = 16
[cpus]
gpu_cores = $gpu_cores
[[gpu]]
backend = "$backend"
batch = 4
[[circuit]]
spec = "$circuit"
[faults]
# Every SIGKILL of the process holding a partition counts a failed attempt of it; the random
# kills below may hit the same partition more than the default 2 times allow.
max_attempts = ${MAX_ATTEMPTS:-6}
[service]
journal = "$out/jobs.sqlite"
TOML
echo "--- demo (the README's GPU command)"
SPLITPROVER_CACHE_DIR="$out/cache" "$bin" demo --backend "$backend" --gpu-cores "$gpu_cores" -n 4 --circuit sha-chain:2 | tail -3
echo "--- service under SIGKILL"
"$bin" run --config "$out/config.toml" 2> "$out/service.log" &
service=$!
for _ in $(seq 600); do [ -S "$out/sp.sock" ] && break; sleep 0.2; done
"$bin" submit --circuit "$circuit" -n "$jobs" --out-dir "$out/proofs" > "$out/submitted.txt" 2> "$out/submit.log" &
submit=$!
kills=0
for i in $(seq 8); do
  sleep "0.$((RANDOM % 9 + 1))"
  if [ $((i % 2)) -eq 0 ]; then role="gpu-proc"; else role="synth-proc"; fi
  pid=$(pgrep -f "splitprover $role" | head -1 || true)
  if [ -n "$pid" ]; then kill -9 "$pid"; kills=$((kills + 1)); echo "killed $role $pid"; fi
done
wait "$submit" && echo "submit: all jobs returned proofs" || echo "submit FAILED: $(tail -5 "$out/submit.log")"
"$bin" status
"$bin" status --json > "$out/status.json"
kill -TERM "$service"; wait "$service" || true
python3 - "$out/status.json" "$jobs" "$kills" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); jobs = int(sys.argv[2]); kills = int(sys.argv[3])
c = s["counters"]
print(f"jobs {jobs}, kills {kills}: succeeded {c['succeeded']}, failed {c['failed']}, "
      f"syntheses started {c['syntheses_started']}, slots re-queued {c['slots_requeued']}, "
      f"child exits {c['child_exits']}")
assert c["succeeded"] == jobs and c["failed"] == 0, "a job was lost or failed"
PY
ls "$out/proofs" | grep -c '\.proof$'

echo "--- launcher under SIGKILL (job journal)"
lk_jobs="${LAUNCHER_JOBS:-40}"
lk_kills="${LAUNCHER_KILLS:-3}"
start_service() {
  "$bin" run --config "$out/config.toml" 2>> "$out/service-launcher.log" &
  service=$!
  for _ in $(seq 600); do "$bin" status > /dev/null 2>&1 && return 0; sleep 0.2; done
  echo "the service did not come back: $(tail -5 "$out/service-launcher.log")"; exit 1
}
start_service
"$bin" submit --circuit "$circuit" -n "$lk_jobs" > /dev/null 2> "$out/accepted.log" &
submit=$!
for k in $(seq "$lk_kills"); do
  sleep "$((RANDOM % 2)).$((RANDOM % 9 + 1))"
  kill -9 "$service"; wait "$service" 2> /dev/null || true
  echo "killed the launcher $service ($k/$lk_kills)"
  start_service
done
wait "$submit" || echo "submit: some submissions were cut by a kill (not accepted, not counted)"
accepted=$(grep -oE '^job [0-9]+ accepted' "$out/accepted.log" | awk '{ print $2 }' || true)
n_accepted=0; finished=0; failed=0; lost=0
for id in $accepted; do
  n_accepted=$((n_accepted + 1))
  rc=0; "$bin" fetch "$id" --wait --out "$out/proofs/fetched-$id.proof" > /dev/null 2>> "$out/fetch.log" || rc=$?
  case $rc in
    0) finished=$((finished + 1)) ;;
    1) failed=$((failed + 1)) ;;
    *) lost=$((lost + 1)); echo "job $id lost: $(tail -1 "$out/fetch.log")" ;;
  esac
done
ids_unique=$(echo "$accepted" | sort -n | uniq -d | wc -l)
echo "launcher kills $lk_kills: jobs accepted $n_accepted, finished $finished, failed $failed, lost $lost, repeated ids $ids_unique"
kill -TERM "$service"; wait "$service" || true
[ "$lost" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$ids_unique" -eq 0 ]
