#!/usr/bin/env bash
# Load-independent cost of one extender filter request at N node names
# (nodeCacheCapable true): user-space instructions per request under
# valgrind's callgrind, and system calls per request under strace -c, both
# over REQUESTS requests on one keep-alive connection after a warm-up.
#
#   bench/extender_profile.sh [RINGMASTER_BINARY] [NODES] [REQUESTS]   (build/dev/cli/ringmaster 1000 500)
#
# Needs valgrind (callgrind_control, callgrind_annotate), strace, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-build/dev/cli/ringmaster}")
NODES=${2:-1000}
REQUESTS=${3:-500}
VERB=${VERB:-filter}
work=$(mktemp -d)
pid=""
cleanup() {
  [[ -n $pid ]] && { kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/client.py" <<'PY'
import http.client, json, sys
port, n, verb, nodes = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
pod = {"metadata": {"name": "bench-0", "namespace": "bench", "uid": "u-bench-0"},
       "spec": {"containers": [{"name": "t", "resources": {"limits": {"nvidia.com/gpu": "8"},
                                                            "requests": {"cpu": "8", "memory": "64Gi"}}}]}}
body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["node-%04d" % i for i in range(nodes)]})
c = http.client.HTTPConnection("127.0.0.1", port)
for i in range(n):
    c.request("POST", "/" + verb, body, {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    if r.status != 200: sys.exit("HTTP %d" % r.status)
PY
start() {  # args: wrapper...
  "$@" "$BIN" serve --no-bind --http 127.0.0.1:0 --grpc "" --period-ms 1000 --nodes "$NODES" --gpus-per-node 8 \
    --nodes-per-rack 40 >"$work/out" 2>"$work/err" &
  pid=$!
  port=""
  for _ in $(seq 300); do
    port=$(sed -n 's/^extender listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out")
    [[ -n $port ]] && break
    sleep 0.2
  done
  [[ -n $port ]] || { cat "$work/err"; exit 1; }
  python3 "$work/client.py" "$port" 20 "$VERB" "$NODES"  # warm-up (the pod is placed by the first)
}
stop() { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; }

# 1. Instructions (deterministic).
start valgrind --tool=callgrind --callgrind-out-file="$work/cg.out"
callgrind_control -z "$pid" >/dev/null 2>&1
python3 "$work/client.py" "$port" "$REQUESTS" "$VERB" "$NODES"
callgrind_control -d "$pid" >/dev/null 2>&1
sleep 1
stop
total=$(callgrind_annotate "$(ls "$work"/cg.out.* | head -1)" 2>/dev/null |
  sed -n 's/^ *\([0-9,]*\) (100.0%)  PROGRAM TOTALS/\1/p' | tr -d ,)
echo "$VERB, $NODES names: $((total / REQUESTS)) user-space instructions per request (callgrind, $REQUESTS requests)"

# 2. System calls.
start
strace -f -c -p "$pid" -o "$work/strace.txt" 2>/dev/null &
spid=$!
sleep 1
python3 "$work/client.py" "$port" "$REQUESTS" "$VERB" "$NODES"
kill -INT "$spid"; wait "$spid" 2>/dev/null || true
stop
echo "system calls per request (strace -c):"
awk -v n="$REQUESTS" '$NF ~ /^(recvmsg|recvfrom|sendmsg|sendto|epoll_wait|timerfd_settime|read|write)$/ {
  printf "  %-16s %.2f\n", $NF, $4 / n }' "$work/strace.txt"
