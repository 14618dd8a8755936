#!/usr/bin/env bash
# The restart cost of a gpu-proc with backend `gpu` on a GPU host: the service runs one circuit
# (default sha-chain:650, 2^24 constraints) with its SRS resident on the GPU; the gpu-proc is
# killed with SIGKILL KILLS times (default 3). Each time the script measures the seconds from the
# kill to the new gpu-proc's "gpu-proc serving" (started by the launcher, the SRS uploaded again
# from the launcher's shared SRS image, the MSM buffers allocated), then proves one job through
# the new process. The SRS is made by the GPU generator (`srs generate --device gpu`).
#
#     scripts/h200-restart.sh SPLITPROVER [OUT_DIR]
set -uo pipefail
bin="$(realpath "${1:?splitprover binary}")"
out="$(realpath -m "${2:-restart}")"
work="${WORK:-/tmp/splitprover-restart}"
circuit="${CIRCUIT:-sha-chain:650}"
kills="${KILLS:-3}"
mkdir -p "$out" "$work"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }

srs="${SRS:-$work/restart.params}"
if [ ! -f "$srs" ]; then
  t0=$(now)
  "$bin" srs generate --circuit "$circuit" --out "$srs" --seed 1 --device gpu > /dev/null || exit 1
  echo "SRS generated on the GPU in $(secs "$t0" "$(now)") s ($(du -h "$srs" | cut -f1))"
fi
cat > "$out/config.toml" <<TOML
cache_dir = "$work/cache"
socket = "$out/sp.sock"
[ring]
slots = 2
[cpus]
gpu_cores = ${GPU_CORES:-4}
[[gpu]]
backend = "gpu"
[[circuit]]
spec = "$circuit"
srs = "$srs"
TOML
export SPLITPROVER_LOG="warn,gpu_proc=info" SPLITPROVER_SOCKET="$out/sp.sock"
log="$out/service.log"
serving() { grep -c "gpu-proc serving" "$log" 2> /dev/null || echo 0; }
t0=$(now)
"$bin" run --config "$out/config.toml" 2> "$log" &
service=$!
for _ in $(seq 3000); do [ "$(serving)" -ge 1 ] && break; sleep 0.1; done
[ "$(serving)" -ge 1 ] || { echo "the service did not start: $(tail -5 "$log")"; exit 1; }
echo "first start (SRS file read, shared image built, uploaded): $(secs "$t0" "$(now)") s"
status=0
"$bin" submit --circuit "$circuit" -n 1 --out-dir "$out/proofs-0" > /dev/null || status=1
echo "| kill | restart s (SIGKILL to serving) | job after restart |" | tee "$out/restart.md"
echo "|---|---|---|" | tee -a "$out/restart.md"
for k in $(seq "$kills"); do
  n=$(serving)
  pid=$(pgrep -f "splitprover gpu-proc" | head -1)
  [ -n "$pid" ] || { echo "no gpu-proc to kill"; status=1; break; }
  t0=$(now)
  kill -9 "$pid"
  for _ in $(seq 30000); do [ "$(serving)" -gt "$n" ] && break; sleep 0.005; done
  t1=$(now)
  if "$bin" submit --circuit "$circuit" -n 1 --out-dir "$out/proofs-$k" > /dev/null; then
    job="proved, verified"
  else
    job="FAILED"; status=1
  fi
  echo "| $k | $(secs "$t0" "$t1") | $job |" | tee -a "$out/restart.md"
done
"$bin" status | tee "$out/status.txt"
kill -TERM "$service"; wait "$service" || true
grep -i "upload\|error" "$log" | tail -5
exit "$status"
