#!/usr/bin/env bash
# Kubernetes scheduler extender throughput and latency: `ringmaster serve`
# answering filter and prioritize for 1,000 and 5,000 nodes, in both
# nodeCacheCapable modes, driven by wrk on loopback (127.0.0.1 only).
#
#   bench/extender.sh [RINGMASTER_BINARY]      (default build/srv/cli/ringmaster)
#   DURATION=10s CONNECTIONS=16 WRK_THREADS=2 NODES="1000 5000" bench/extender.sh
#
# nodeCacheCapable true: the engine's cluster comes from --nodes N (a uniform
# cluster, racks of 40) and each request carries N node names. false: serve
# starts with no nodes and learns them from the first request; each request
# carries N Node objects. The pod is a gang of one whose placement is decided
# on the first (warm-up) request, so the figures are the steady state of a
# pod that kube-scheduler retries: parse, look up its reservation, answer.
# "changing": Node objects, with node 0's resourceVersion different in every
# request (no request carries the node list of the one before: serve then
# reads every list in full). Prints a Markdown table row per case, with the server's CPU time per request
# (from /proc, so it holds on a loaded machine where req/s does not).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/srv/cli/ringmaster}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-16}
WRK_THREADS=${WRK_THREADS:-2}
NODES=${NODES:-"1000 5000"}
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)" >&2; exit 2; }
[[ -x $BIN ]] || { echo "$BIN not found: build the ringmaster target" >&2; exit 2; }

work=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# Request bodies: ExtenderArgs with node names or with Node objects.
python3 - "$work" $NODES <<'PY'
import json, sys
work, counts = sys.argv[1], [int(n) for n in sys.argv[2:]]
pod = {"metadata": {"name": "bench-0", "namespace": "bench", "uid": "u-bench-0"},
       "spec": {"schedulerName": "ringmaster", "containers": [{"name": "t", "resources": {"limits": {"nvidia.com/gpu": "8"},
                                                            "requests": {"cpu": "8", "memory": "64Gi"}}}]}}
for n in counts:
    names = ["node-%04d" % i for i in range(n)]
    with open(f"{work}/names-{n}.json", "w") as f:
        json.dump({"Pod": pod, "Nodes": None, "NodeNames": names}, f)
    nodes = [{"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "H100",
                                                    "topology.ringmaster.io/rack": "rack-%03d" % (i // 40)}},
              "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}}}
             for i, name in enumerate(names)]
    with open(f"{work}/objects-{n}.json", "w") as f:
        json.dump({"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}, f)
    # Node 0 carries a resourceVersion: the "changing" rows put a random one
    # in every request, so no two requests carry the same node list (as if
    # a Node were updated between every two filters).
    nodes[0]["metadata"]["resourceVersion"] = "10000000"
    with open(f"{work}/objects-{n}.json", "w") as f:
        json.dump({"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}, f)
PY

start_server() {  # args: serve options
  "$BIN" serve --no-bind --http 127.0.0.1:0 --period-ms 1000 --max-learned-nodes 0 "$@" >"$work/serve.out" 2>"$work/serve.err" &
  server_pid=$!
  for _ in $(seq 100); do
    port=$(sed -n 's/^extender listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/serve.out")
    [[ -n $port ]] && return 0
    sleep 0.1
  done
  echo "serve did not start: $(cat "$work/serve.err")" >&2
  exit 1
}

stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=""
}

# The server's CPU time so far, in clock ticks (utime + stime).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }

run_wrk() {  # args: verb body-file -> "requests/s p50 p99 server-CPU-us-per-request"
  cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$2", "rb"); wrk.body = f:read("*a"); f:close()
LUA
  if [[ ${3:-} == changing ]]; then
    cat >>"$work/post.lua" <<LUA
local at = string.find(wrk.body, "10000000", 1, true)
local head, tail = string.sub(wrk.body, 1, at - 1), string.sub(wrk.body, at + 8)
math.randomseed(os.time() + math.floor(os.clock() * 1e6))
request = function()
  return wrk.format(nil, nil, nil, head .. string.format("%08d", math.random(0, 99999999)) .. tail)
end
LUA
  fi
  local before after
  before=$(cpu_ticks)
  wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$work/post.lua" \
    "http://127.0.0.1:$port/$1" >"$work/wrk.out"
  after=$(cpu_ticks)
  local rps p50 p99 non2xx requests cpu
  requests=$(awk '/requests in/ {print $1}' "$work/wrk.out")
  cpu=$(awk -v t=$((after - before)) -v n="$requests" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.0f", t * 1e6 / hz / n}')
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$work/wrk.out")
  p50=$(awk '$1 == "50%" {print $2}' "$work/wrk.out")
  p99=$(awk '$1 == "99%" {print $2}' "$work/wrk.out")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$work/wrk.out")
  [[ -z $non2xx ]] || { echo "non-2xx answers: $non2xx" >&2; cat "$work/wrk.out" >&2; exit 1; }
  echo "$rps $p50 $p99 $cpu"
}

echo "| nodes | nodeCacheCapable | request bytes | filter req/s | p50 | p99 | server CPU/req | prioritize req/s | p50 | p99 | server CPU/req |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for n in $NODES; do
  for mode in true false changing; do
    if [[ $mode == true ]]; then
      body=$work/names-$n.json
      start_server --nodes "$n" --gpus-per-node 8 --nodes-per-rack 40
    else
      body=$work/objects-$n.json
      start_server
    fi
    # Warm-up: the first filter submits the pod and places it.
    curl -s -o "$work/first.json" -X POST -H 'Content-Type: application/json' --data-binary "@$body" \
      "http://127.0.0.1:$port/filter"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); n=r["NodeNames"] or r["Nodes"]["items"]; assert len(n)==1, r' \
      "$work/first.json"
    read -r f_rps f_p50 f_p99 f_cpu < <(run_wrk filter "$body" "$mode")
    read -r p_rps p_p50 p_p99 p_cpu < <(run_wrk prioritize "$body" "$mode")
    label=$mode
    [[ $mode == changing ]] && label="false, a node changed since the last request"
    echo "| $n | $label | $(stat -c %s "$body") | $f_rps | $f_p50 | $f_p99 | ${f_cpu} µs | $p_rps | $p_p50 | $p_p99 | ${p_cpu} µs |"
    stop_server
  done
done
