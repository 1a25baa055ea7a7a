#!/usr/bin/env bash
# `ringmaster serve` as kube-scheduler, an admin and a stranger use it
# (issue 26): the health port answers /healthz and /metrics and nothing
# else; a flood of Node objects is bounded by --max-learned-nodes; a
# stranger's /bind is refused with an audit line; kill -9 between the two
# binds of a gang: the gang completes after the restart, no pod bound twice;
# `ringmaster cancel` of a bound pod gang keeps its GPUs (Cancelling) until
# the grace deadline, and the gang stays cancelled across kill -9.
# Every wait is bounded; serve is killed if anything fails.
set -euo pipefail
BIN=$1
work=$(mktemp -d)
mkdir "$work/state"
pid=""
cleanup() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- serve stderr"; tail -30 "$work/err" || true
  exit 1
}

start() {
  : >"$work/out"
  "$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --metrics 127.0.0.1:0 --period-ms 50 \
    --state "$work/state" --max-learned-nodes 4 --cancel-grace-ms 4000 >"$work/out" 2>>"$work/err" &
  pid=$!
  port="" gport="" mport=""
  for _ in $(seq 100); do
    port=$(sed -n 's/^extender listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null || true)
    gport=$(sed -n 's/^admin API listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null || true)
    mport=$(sed -n 's/^health and metrics listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null || true)
    [[ -n $port && -n $gport && -n $mport ]] && break
    sleep 0.1
  done
  [[ -n $port && -n $gport && -n $mport ]] || fail "serve did not start: $(cat "$work/out")"
  url=http://127.0.0.1:$port
  export RINGMASTER_SERVER=127.0.0.1:$gport
}
kill9() {
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
}
post() { curl -s --max-time 5 -X POST -H 'Content-Type: application/json' -d "$2" "$url/$1"; }
node() { echo "{\"metadata\":{\"name\":\"$1\"},\"status\":{\"allocatable\":{\"cpu\":\"64\",\"nvidia.com/gpu\":\"8\"}}}"; }
nodes() { local out="" n; for n in "$@"; do out+="${out:+,}$(node "$n")"; done; echo "{\"items\":[$out]}"; }
pod() {  # name group min -> a Pod of profile ringmaster asking for 8 GPUs
  echo "{\"metadata\":{\"name\":\"$1\",\"namespace\":\"t\",\"uid\":\"u-$1\",
    \"labels\":{\"scheduling.x-k8s.io/pod-group\":\"$2\"},
    \"annotations\":{\"scheduling.volcano.sh/group-min-member\":\"$3\"}},
    \"spec\":{\"schedulerName\":\"ringmaster\",\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]}}"
}
filter() { post filter "{\"Pod\":$(pod "$1" "$2" "$3"),\"Nodes\":$(nodes n1 n2)}"; }
passed() { sed -n 's/.*"Nodes":{"items":\[{"metadata":{"name":"\([^"]*\)".*/\1/p'; }
bind() { post bind "{\"PodName\":\"$1\",\"PodNamespace\":\"t\",\"PodUID\":\"u-$1\",\"Node\":\"$2\"}"; }
# grep -q on all of stdin (a pipe that grep -q closes early would make the
# writer fail under pipefail).
has() { local in; in=$(cat); grep -q -- "$1" <<<"$in"; }
phase() { "$BIN" job "$1" --json | sed -n 's/^ *"phase": "\([A-Za-z]*\)",*$/\1/p' | head -1; }

start
# The health port: /healthz and /metrics, nothing of the extender.
[[ $(curl -s --max-time 5 "http://127.0.0.1:$mport/healthz") == ok ]] || fail "health port /healthz"
metrics=$(curl -s --max-time 5 "http://127.0.0.1:$mport/metrics")
grep -q '^ringmaster_binds_total ' <<<"$metrics" || fail "health port /metrics"
code=$(curl -s --max-time 5 -o "$work/body" -w '%{http_code}' -X POST -d '{}' "http://127.0.0.1:$mport/filter")
[[ $code == 404 ]] && grep -q '"Error"' "$work/body" || fail "health port answered /filter: $code $(cat "$work/body")"

# The gang's first pod teaches the engine n1 and n2; a flood of 10 more
# Node objects: 2 learned (4 at most), 8 refused, one audit line.
filter a-0 a 2 | has '1 of 2 member pods seen' || fail "first member"
flood=$(post filter "{\"Pod\":$(pod x-0 x 2),\"Nodes\":$(nodes f-0 f-1 f-2 f-3 f-4 f-5 f-6 f-7 f-8 f-9)}")
[[ $(grep -o 'learns at most 4 nodes' <<<"$flood" | wc -l) == 8 ]] || fail "flood answer: $flood"
[[ $("$BIN" nodes | grep -c '^f-') == 2 ]] || fail "flood learned: $("$BIN" nodes)"
grep -q 'msg=refused who=127.0.0.1:[0-9]* what="learn 8 nodes from a filter"' "$work/err" || fail "no audit line for the flood"

# A stranger's /bind: no credentials, no UID, a node of its choosing.
stranger=$(post bind '{"PodName":"coredns-1","PodNamespace":"kube-system","PodUID":"","Node":"control-plane-1"}')
[[ $stranger == *"was not admitted by ringmaster"* ]] || fail "stranger's bind: $stranger"
grep -q 'msg=refused who=127.0.0.1:[0-9]* what="bind pod kube-system/coredns-1' "$work/err" || fail "no audit line for the bind"

# A pod name with a NUL and a line end is no Kubernetes name: refused (the
# journal could not keep it). A job name with a tab and a line end (the
# admin API takes any) is escaped in the jobs table.
evil=$(post filter '{"Pod":{"metadata":{"name":"ev\u0000il\nx","namespace":"t","uid":"u-evil"},"spec":{"schedulerName":"ringmaster"}},"NodeNames":["n1"]}')
[[ $evil == *"Pod.metadata.name: a control character (byte 0 at 2)"* ]] || fail "a NUL in a pod name: $evil"
"$BIN" submit --name "$(printf 'ev\til\nx')" --replicas 1 >/dev/null || fail "submit"
jobs=$("$BIN" jobs)
grep -qF 'ev\x09il\x0ax ' <<<"$jobs" || fail "control characters not escaped: $jobs"
! grep -q '^x ' <<<"$jobs" || fail "a job name broke the jobs table: $jobs"

# kill -9 between the two binds of gang a; meanwhile jobs shows what is bound.
node_b=$(filter a-1 a 2 | passed)
[[ -n $node_b ]] || fail "a-1 got no node"
[[ $(bind a-1 "$node_b") == '{"Error":""}' ]] || fail "bind a-1"
"$BIN" jobs | has '^t/a .* Running *2/2 (1 binding) .* binding' || fail "jobs hides the unbound pod: $("$BIN" jobs)"
"$BIN" job t/a | has '^expected start: *binding' || fail "job hides the unbound pod: $("$BIN" job t/a)"
kill9
start
node_a=$(filter a-0 a 2 | passed)
[[ -n $node_a && $node_a != "$node_b" ]] || fail "a-0 after the restart: '$node_a' (a-1 on $node_b)"
[[ $(bind a-0 "$node_a") == '{"Error":""}' ]] || fail "bind a-0"
[[ $(bind a-1 "$node_b") == '{"Error":""}' ]] || fail "repeated bind a-1"
for p in a-0 a-1; do
  n=$(grep -c "msg=\"pod bound\" pod=t/$p " "$work/err" || true)
  [[ $n == 1 ]] || fail "pod $p bound $n times"
done
"$BIN" jobs | has '^t/a .* Running *2/2 ' || fail "jobs: $("$BIN" jobs)"

# Cancel the bound gang: Cancelling, its GPUs held; a gang that needs them waits.
out=$("$BIN" cancel t/a)
[[ $out == "cancelling t/a"* ]] || fail "cancel said: $out"
[[ $(phase t/a) == Cancelling ]] || fail "phase after cancel: $(phase t/a)"
filter c-0 c 2 >/dev/null
[[ -z $(filter c-1 c 2 | passed) ]] || fail "a gang was placed on the GPUs of the cancelled one"
kill9
start
p=$(phase t/a)
[[ $p == Cancelling || $p == Aborted ]] || fail "t/a came back $p after kill -9"
filter a-0 a 2 | has 'was cancelled' || fail "a pod of the cancelled gang was not refused"
# After the grace deadline the GPUs are free: the waiting gang is placed.
for _ in $(seq 100); do [[ $(phase t/a) == Aborted ]] && break; sleep 0.1; done
[[ $(phase t/a) == Aborted ]] || fail "t/a not Aborted after its grace period: $(phase t/a)"
# kube-scheduler filters every pending pod again, as here: gang c's record
# may not have reached the journal before the kill -9 (only a bind waits
# for the journal; a filter that passed nothing promised nothing), and then
# c-1 makes it whole again.
c0=""
for _ in $(seq 20); do
  c0=$(filter c-0 c 2 | passed)
  [[ -n $c0 ]] && break
  filter c-1 c 2 >/dev/null
  sleep 0.1
done
[[ -n $c0 ]] || fail "gang c not placed after the grace period"
kill -TERM "$pid"
wait "$pid"
pid=""
echo "serve trust: ok"
