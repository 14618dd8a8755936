#!/usr/bin/env bash
# The real 32 GiB PoRep C2 (`porep:StackedDrg32GiBV1_1`, filecoin-proofs' own circuit) end to
# end on a GPU host (NVIDIA H100 or H200, 16 cores, 128 GiB), in two phases that share WORK (run
# them in two device calls on the same warm machine, or in one):
#
#     scripts/porep32-e2e.sh gen   SPLITPROVER [OUT_DIR]   # parameters on the GPU, sparse C1s
#     scripts/porep32-e2e.sh prove SPLITPROVER [OUT_DIR]   # the service, C1s over cuzk's API
#     scripts/porep32-e2e.sh start SPLITPROVER [OUT_DIR]   # one start: records the matrices
#
# `gen`: `params generate --device gpu` writes the local test parameters (`.params`, `.vk`,
# `.meta`, official names) into WORK/params, timed; `sparse-c1` writes C1S valid C1 outputs of CC
# sectors (sector numbers 1..C1S, no sealing) in the `Commit2In` JSON Curio sends.
# `prove`: `splitprover run` with `[[circuit]] spec = "porep:StackedDrg32GiBV1_1"`, witness slots
# and the default device-memory plan (BUDGET sets `[[gpu]] memory_budget`); the C1s are sent
# over cuzk's gRPC API (TCP, loopback) as Curio's client sends them (`submit --curio-miner-id`),
# INFLIGHT at a time; every proof is checked with filecoin-proofs' `verify_seal` against the
# generated `.vk` (`splitprover verify`). Then the service is stopped and started again to time
# a start with the matrices cache warm. `start` starts the service once and stops it: a cold
# start records the matrices cache, so that the `gen` call's spare time can spare `prove` the
# recording (its first start's log is named `service-warm` or `service-cold` by the cache). Host memory, GPU memory and GPU utilisation are sampled
# every second into OUT_DIR/samples-PHASE.txt; the peaks, the GPU and synthesis seconds per
# partition (the service's metrics), the GPU utilisation between the first and the last proof
# and the steady s/proof it implies (the run is GPU-bound) are printed last.
#
# Environment: WORK (target/porep32), C1S (6), INFLIGHT (3), SLOTS (8), GPU_CORES (4),
# WORKERS (synthesis concurrency, 12), BUDGET (unset), LIMIT (seconds for the proofs, 420),
# RESTART (1; 0 skips the second start that times a start with the matrices cache warm).
set -uo pipefail
phase="${1:?gen or prove}"
bin="$(realpath "${2:?splitprover binary}")"
out="$(realpath -m "${3:-porep32}")"
work="$(realpath -m "${WORK:-target/porep32}")"
kind="porep:StackedDrg32GiBV1_1"
miner=1000
c1s="${C1S:-6}"
mkdir -p "$out" "$work/params"
export SPLITPROVER_LOG="${SPLITPROVER_LOG:-info}" FIL_PROOFS_PARAMETER_CACHE="$work/params"
nproc; free -g | head -2; df -h "$work" | tail -1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true

sample() { # every second: epoch seconds, host used MiB, GPU used MiB, GPU utilisation %
  while :; do
    printf '%s used=%s %s\n' "$(date +%s.%N | cut -c1-14)" "$(free -m | awk '/^Mem:/ {print $3}')" \
      "$(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits 2>/dev/null |
        head -1 | awk -F', *' '{print "gpu=" $1 " util=" $2}')"
    sleep 1
  done
}
sample >"$out/samples-$phase.txt" 2>&1 &
sampler=$!
service=""
trap 'kill $sampler 2>/dev/null; [ -n "$service" ] && kill $service 2>/dev/null' EXIT
peaks() {
  echo "peak host used MiB: $(sed -n 's/.* used=\([0-9]*\).*/\1/p' "$out/samples-$phase.txt" | sort -n | tail -1)," \
    "peak GPU MiB: $(sed -n 's/.* gpu=\([0-9]*\).*/\1/p' "$out/samples-$phase.txt" | sort -n | tail -1)"
}
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -v)
status=0

setup_service() { # huge pages, the config, start_service and scrape
  ls "$work"/c1-*.json >/dev/null 2>&1 || { echo "no C1s in $work: run the gen phase first"; exit 1; }
  if [ -w /proc/sys/vm/nr_hugepages ]; then
    echo "${HUGEPAGES:-4096}" >/proc/sys/vm/nr_hugepages
    echo "2 MiB huge pages reserved: $(cat /proc/sys/vm/nr_hugepages)"
  fi
  budget=""
  [ -n "${BUDGET:-}" ] && budget="memory_budget = \"$BUDGET\""
  cat >"$out/config.toml" <<CONF
cache_dir = "$work/cache"
socket = "$work/sp.sock"
param_cache = "$work/params"
[ring]
slots = ${SLOTS:-8}
slot_bytes = "512MiB"
[cpus]
gpu_cores = ${GPU_CORES:-4}
[[gpu]]
backend = "gpu"
batch = 1
$budget
[synthesis]
concurrency = ${WORKERS:-12}
witness_slots = true
[[circuit]]
spec = "$kind"
[service]
journal = "$work/jobs.sqlite"
listen = ["127.0.0.1:9820"]
metrics_listen = "127.0.0.1:9821"
CONF
  start_service() { # $1: log name; prints the seconds to "service ready"
    rm -rf "$work/jobs.sqlite"*
    local t0 t1
    t0=$(date +%s.%N)
    "$bin" run --config "$out/config.toml" >"$out/$1.log" 2>&1 &
    service=$!
    for _ in $(seq 1 600); do
      grep -q "service ready" "$out/$1.log" && break
      kill -0 $service 2>/dev/null || break
      sleep 0.5
    done
    t1=$(date +%s.%N)
    grep -q "service ready" "$out/$1.log" || { echo "the service did not start:"; tail -20 "$out/$1.log"; return 1; }
    echo "$1: service ready after $(python3 -c "print(f'{$t1-$t0:.1f}')") s"
  }
  scrape() { python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:9821/metrics').read().decode())"; }
}

case "$phase" in
gen)
  t0=$(date +%s.%N)
  "${timer[@]}" "$bin" params generate "$kind" --device gpu --seed 1 --force \
    --param-cache "$work/params" >"$out/gen.log" 2>&1 || status=1
  t1=$(date +%s.%N)
  grep -E "done in|error|Elapsed|Maximum resident" "$out/gen.log" | tail -5
  echo "params generate --device gpu: $(python3 -c "print(f'{$t1-$t0:.1f}')") s"
  ls -l "$work/params"
  for n in $(seq 1 "$c1s"); do
    t0=$(date +%s.%N)
    "$bin" sparse-c1 --proof-type "$kind" --sector-number "$n" --seed "$n" \
      --out "$work/c1-$n.json" >>"$out/c1.log" 2>&1 || status=1
    t1=$(date +%s.%N)
    echo "sparse C1 of sector $n: $(python3 -c "print(f'{$t1-$t0:.1f}')") s, $(stat -c %s "$work/c1-$n.json" 2>/dev/null) bytes"
  done
  ;;
prove|start)
  setup_service
  cached=cold
  [ -n "$(ls -A "$work/cache" 2>/dev/null)" ] && cached=warm
  start_service "service-$cached" || exit 1
  if [ "$phase" = start ]; then
    kill $service 2>/dev/null; wait $service 2>/dev/null; service=""
    peaks
    exit "$status"
  fi
  scrape >"$out/metrics-start.txt"
  t_start=$(date +%s.%N)
  # INFLIGHT clients, each sending its share of the C1s one after another, as Curio's tasks do.
  inflight="${INFLIGHT:-3}"
  clients=()
  for c in $(seq 0 $((inflight - 1))); do
    (
      for n in $(seq $((c + 1)) "$inflight" "$c1s"); do
        ts=$(date +%s.%N)
        if timeout "${LIMIT:-420}" "$bin" submit --socket 127.0.0.1:9820 --porep-c1 "$work/c1-$n.json" \
          --curio-miner-id "$miner" --out "$out/proof-$n.bin" >"$out/submit-$n.log" 2>&1; then
          te=$(date +%s.%N)
          echo "$te sector $n proved in $(python3 -c "print(f'{$te-$ts:.1f}')") s" >>"$out/done.txt"
        else
          echo "sector $n FAILED: $(tail -2 "$out/submit-$n.log")" >>"$out/done.txt"
        fi
      done
    ) &
    clients+=($!)
  done
  wait "${clients[@]}"
  scrape >"$out/metrics-end.txt"
  sort -n "$out/done.txt"
  verified=0
  for n in $(seq 1 "$c1s"); do
    [ -f "$out/proof-$n.bin" ] || continue
    "$bin" verify --porep-c1 "$work/c1-$n.json" --miner-id "$miner" --param-cache "$work/params" \
      "$out/proof-$n.bin" && verified=$((verified + 1))
  done
  echo "verify_seal accepted $verified of $c1s proofs"
  [ "$verified" = "$c1s" ] || status=1
  python3 - "$out" "$t_start" <<'PY'
import re, sys
out, t_start = sys.argv[1], float(sys.argv[2])
done = sorted(float(l.split()[0]) for l in open(f"{out}/done.txt") if "proved" in l)
def metric(path, name):
    vals = {}
    for line in open(path):
        m = re.match(rf"{name}(\{{[^}}]*\}})? ([0-9.e+-]+)$", line.strip())
        if m: vals[m.group(1) or ""] = float(m.group(2))
    return vals
print(f"first proof after {done[0]-t_start:.1f} s" if done else "no proof")
s0 = metric(f"{out}/metrics-start.txt", "splitprover_gpu_seconds_sum")
s1 = metric(f"{out}/metrics-end.txt", "splitprover_gpu_seconds_sum")
c1 = metric(f"{out}/metrics-end.txt", "splitprover_gpu_seconds_count")
y1 = metric(f"{out}/metrics-end.txt", "splitprover_synthesis_seconds_sum")
yc = metric(f"{out}/metrics-end.txt", "splitprover_synthesis_seconds_count")
# The service's histograms are per job (every partition summed); a 32 GiB proof has 10.
parts = 10
if sum(c1.values()):
    print(f"GPU s/partition: {sum(s1.values())/sum(c1.values())/parts:.3f} ({int(sum(c1.values()))} proofs)")
if sum(yc.values()):
    print(f"synthesis s/partition (one worker): {sum(y1.values())/sum(yc.values())/parts:.2f}")
if done:
    gpu = sum(s1.values()) - sum(s0.values())
    print(f"GPU busy, submit to last proof (service's GPU seconds / wall): {gpu/(done[-1]-t_start):.3f}")
if len(done) >= 2:
    util = []
    for line in open(f"{out}/samples-prove.txt"):
        m = re.match(r"([0-9.]+) .*util=([0-9]+)", line)
        if m and done[0] <= float(m.group(1)) <= done[-1]:
            util.append(int(m.group(2)))
    if util:
        mean = sum(util) / len(util)
        print(f"nvidia-smi utilisation between the first and the last proof: mean {mean:.1f} %, min {min(util)} % ({len(util)} samples)")
        if sum(c1.values()) and mean > 0:
            # Completions come in bursts (the jobs in flight share the GPU partition by
            # partition), so the steady rate is the GPU's: its time per proof at the busy share.
            print(f"steady s/proof, GPU-bound: {sum(s1.values())/sum(c1.values())/(mean/100):.2f}")
PY
  peaks
  kill $service 2>/dev/null; wait $service 2>/dev/null; service=""
  if [ "${RESTART:-1}" = 1 ]; then
    start_service service-warm || status=1
    kill $service 2>/dev/null; wait $service 2>/dev/null; service=""
  fi
  ;;
*) echo "phase: gen or prove"; exit 2 ;;
esac
kill $sampler 2>/dev/null
[ "$phase" = gen ] && peaks
exit "$status"
