#!/usr/bin/env bash
# `ringmaster serve` end to end: starts on 127.0.0.1 with an ephemeral port,
# answers /healthz, a gang of two over /filter and /bind, and /metrics, logs
# in key=value lines, and exits 0 on SIGTERM; refuses a bad log level. Every wait is bounded; the server is killed if anything fails.
set -euo pipefail
BIN=$1
work=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# With neither --no-bind nor --api-server it refuses to start (exit 2).
set +e
"$BIN" serve --http 127.0.0.1:0 >/dev/null 2>&1
rc=$?
set -e
[[ $rc == 2 ]] || { echo "serve without --no-bind: exit $rc, want 2"; exit 1; }

# --api-server in-cluster outside a pod says what is missing.
set +e
msg=$(env -u KUBERNETES_SERVICE_HOST "$BIN" serve --api-server in-cluster --http 127.0.0.1:0 2>&1 >/dev/null)
rc=$?
set -e
[[ $rc == 2 && $msg == *"KUBERNETES_SERVICE_HOST"* ]] || { echo "in-cluster outside a pod: exit $rc: $msg"; exit 1; }

# A bad log level (flag or RINGMASTER_LOG) is refused at start, saying which.
set +e
msg=$("$BIN" serve --no-bind --http 127.0.0.1:0 --log-level chatty 2>&1 >/dev/null)
rc=$?
set -e
[[ $rc == 2 && $msg == *"serve: --log-level: unknown log level 'chatty'"* ]] || { echo "bad --log-level: exit $rc: $msg"; exit 1; }
set +e
msg=$(RINGMASTER_LOG=loud "$BIN" serve --no-bind --http 127.0.0.1:0 2>&1 >/dev/null)
rc=$?
set -e
[[ $rc == 2 && $msg == *"RINGMASTER_LOG: unknown log level 'loud'"* ]] || { echo "bad RINGMASTER_LOG: exit $rc: $msg"; exit 1; }

"$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --period-ms 50 --nodes 2 --gpus-per-node 8 >"$work/out" 2>"$work/err" &
pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^extender listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out")
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { echo "serve did not start"; cat "$work/err"; exit 1; }
url=http://127.0.0.1:$port
[[ $(curl -s --max-time 5 "$url/healthz") == ok ]]

pod() {  # name -> a Pod of gang "pair" (min member 2) asking for 8 GPUs
  echo "{\"metadata\":{\"name\":\"$1\",\"namespace\":\"t\",\"uid\":\"u-$1\",
    \"labels\":{\"scheduling.x-k8s.io/pod-group\":\"pair\"},
    \"annotations\":{\"scheduling.volcano.sh/group-min-member\":\"2\"}},
    \"spec\":{\"schedulerName\":\"ringmaster\",\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]}}"
}
filter() {
  curl -s --max-time 5 -X POST -H 'Content-Type: application/json' \
    -d "{\"Pod\":$(pod "$1"),\"NodeNames\":[\"node-0000\",\"node-0001\"]}" "$url/filter"
}
filter a | grep -q '"NodeNames":\[\]' || { echo "first member passed a node"; exit 1; }
answer=$(filter b)
node=$(echo "$answer" | sed -n 's/.*"NodeNames":\["\([^"]*\)"\].*/\1/p')
[[ -n $node ]] || { echo "second member got no node: $answer"; exit 1; }
bind=$(curl -s --max-time 5 -X POST -d "{\"PodName\":\"b\",\"PodNamespace\":\"t\",\"PodUID\":\"u-b\",\"Node\":\"$node\"}" "$url/bind")
[[ $bind == '{"Error":""}' ]] || { echo "bind: $bind"; exit 1; }
[[ $(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -X POST -d '{' "$url/filter") == 400 ]]

# Metrics: the gang's two binds, the requests by verb and code, a cycle
# histogram, the default queue's gauges.
metrics=$(curl -s --max-time 5 "$url/metrics")
for want in '^ringmaster_binds_total 2$' '^ringmaster_queue_allocated_gpus{queue="default"} 16$' \
    '^ringmaster_queue_pending_jobs{queue="default"} 0$' '^ringmaster_http_requests_total{path="filter",code="200"} 2$' \
    '^ringmaster_http_requests_total{path="filter",code="400"} 1$' '^ringmaster_cycle_duration_seconds_count [1-9][0-9]*$' \
    '^# TYPE ringmaster_http_request_duration_seconds histogram$'; do
  grep -q "$want" <<<"$metrics" || { echo "metrics lack $want:"; echo "$metrics"; exit 1; }
done
# Logs: key=value lines on stderr with the gang and the pod.
grep -q 'level=info msg="gang submitted" gang=t/pair' "$work/err" || { echo "no gang log line:"; cat "$work/err"; exit 1; }
grep -q 'level=info msg="pod bound" pod=t/b node=' "$work/err" || { echo "no bind log line:"; cat "$work/err"; exit 1; }

kill -TERM "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then echo "serve did not stop within 5 s of SIGTERM"; exit 1; fi
set +e
wait "$pid"
rc=$?
set -e
pid=""
[[ $rc == 0 ]] || { echo "serve exited $rc after SIGTERM"; cat "$work/err"; exit 1; }
grep -q "serve stopped after .* cycles, 1 bindings" "$work/out" || { cat "$work/out"; exit 1; }
echo "serve ok: port $port, gang placed, bound to $node, stopped on SIGTERM"
