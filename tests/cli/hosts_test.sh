#!/usr/bin/env bash
# `ringmaster hosts JOB --format ...` against a real `ringmaster serve`: the
# job's members in ring order (the ranks GetJob reports) in each launcher's
# host-list format; a job without members and an unknown job exit 1.
set -euo pipefail
BIN=$1
work=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
PY=/usr/bin/python3

cat >"$work/policy.yaml" <<'YAML'
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: network-topology
  - name: binpack
YAML
# 6 nodes of 2 GPUs in racks of 2: a 5-task job spans three nodes, at most
# two in a rack, and its ring order keeps each node's tasks together.
"$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --nodes 6 --gpus-per-node 2 --nodes-per-rack 2 \
  --period-ms 50 --policy "$work/policy.yaml" >"$work/out" 2>"$work/err" &
pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^admin API listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null || true)
  [[ -n $port ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/err"; fail "serve exited"; }
  sleep 0.1
done
[[ -n $port ]] || { cat "$work/err"; fail "serve did not start"; }
export RINGMASTER_SERVER=127.0.0.1:$port

"$BIN" submit --name mpi --replicas 5 --gpus 1 >/dev/null
"$BIN" submit --name toobig --replicas 1 --gpus 8 >/dev/null || true
# Wait (with a deadline) until the job runs.
for _ in $(seq 200); do
  "$BIN" job mpi --json >"$work/job.json" 2>/dev/null && grep -q '"phase": "Running"' "$work/job.json" && break
  sleep 0.05
done
grep -q '"phase": "Running"' "$work/job.json" || fail "mpi did not start: $(cat "$work/job.json")"

for format in openmpi mpich slurm horovod; do
  "$BIN" hosts mpi --format "$format" >"$work/hosts.$format" || fail "hosts --format $format exited $?"
done
"$PY" - "$work" <<'PY' || fail "host lists do not follow the ring order"
import json, re, sys
work = sys.argv[1]
job = json.load(open(f"{work}/job.json"))
members = sorted((t for t in job["tasks"] if t.get("node")), key=lambda t: t.get("rank", 0))
assert len(members) == 5, members
assert [t.get("rank", 0) for t in members] == list(range(5)), members
hosts = []
for t in members:
    if hosts and hosts[-1][0] == t["node"]:
        hosts[-1][1] += 1
    else:
        hosts.append([t["node"], 1])
assert len({h for h, _ in hosts}) == len(hosts), f"a node's tasks are not together in the ring order: {hosts}"
read = lambda f: open(f"{work}/hosts.{f}").read()
assert read("openmpi") == "".join(f"{h} slots={n}\n" for h, n in hosts), read("openmpi")
assert read("mpich") == "".join(f"{h}:{n}\n" for h, n in hosts), read("mpich")
assert read("horovod") == read("mpich"), read("horovod")
# slurm: the hosts in order, runs of consecutive numbers compressed.
def expand(text):
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", text.strip()):
        m = re.fullmatch(r"(.*)\[(\d+)-(\d+)\]", part)
        if m:
            w = len(m.group(2))
            out += [f"{m.group(1)}{i:0{w}d}" for i in range(int(m.group(2)), int(m.group(3)) + 1)]
        else:
            out.append(part)
    return out
assert expand(read("slurm")) == [h for h, _ in hosts], read("slurm")
print("ok", hosts)
PY

set +e
out=$("$BIN" hosts toobig 2>&1); rc=$?
[[ $rc == 1 ]] || fail "hosts of a job without members: exit $rc, want 1: $out"
grep -q "no members placed" <<<"$out" || fail "no reason: $out"
out=$("$BIN" hosts nosuch 2>&1); rc=$?
[[ $rc == 1 ]] || fail "hosts of an unknown job: exit $rc, want 1: $out"
out=$("$BIN" hosts mpi --format pbs 2>&1); rc=$?
[[ $rc == 2 ]] || fail "hosts --format pbs: exit $rc, want 2: $out"
set -e
echo "PASS"
