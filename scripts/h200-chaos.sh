#!/usr/bin/env bash
# The crash promise on a GPU host: the service proves jobs with the CUDA backend while gpu-proc
# and synth-proc are killed with SIGKILL at random moments; every job must finish with a proof
# the launcher verified, and READY slots must not be synthesized again.
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
