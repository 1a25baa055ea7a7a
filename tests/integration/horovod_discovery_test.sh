#!/usr/bin/env bash
# examples/horovod/discover_hosts.sh under a stand-in for Horovod Elastic's
# driver (Horovod is not packaged for Debian): the stand-in follows Horovod's
# documented contract for --host-discovery-script — it runs the script every
# poll interval, reads one "hostname:slots" per line, and treats the hosts
# that appear or disappear between two polls as added or removed. The job is
# an elastic ringmaster job that a higher-priority job shrinks and that grows
# back once that job is cancelled: the stand-in must see 4 hosts, then 2,
# then 4, each list in the ring order GetJob reports.
set -euo pipefail
BIN=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat >"$work/policy.yaml" <<'YAML'
actions: "enqueue, allocate, preempt, elastic, backfill"
configurations:
- name: preempt
  arguments: {gracePeriod: 0, cooldown: 0}
- name: elastic
  arguments: {growIdle: 0, cooldown: 0}
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
"$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --nodes 4 --gpus-per-node 2 --nodes-per-rack 2 \
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
export RINGMASTER_SERVER=127.0.0.1:$port RINGMASTER=$BIN RINGMASTER_JOB=hvd

# Before the job exists the script fails (the daemon does not know it);
# while it waits it prints no host and exits 0.
"$BIN" submit --name hvd --replicas 4 --gpus 2 --elastic 2:4 >/dev/null

/usr/bin/python3 - "$SRC/examples/horovod/discover_hosts.sh" "$BIN" <<'PY' || fail "the stand-in saw the wrong hosts"
import json, subprocess, sys, time
script, binary = sys.argv[1], sys.argv[2]

def discover():
    """One poll, as Horovod's driver does it: run the script, read host:slots lines."""
    r = subprocess.run([script], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, f"discovery script exited {r.returncode}: {r.stderr}"
    hosts = []
    for line in r.stdout.splitlines():
        if not line.strip():
            continue
        host, slots = line.rsplit(":", 1)
        hosts.append((host, int(slots)))
    return hosts

def ring_order():
    j = json.loads(subprocess.run([binary, "job", "hvd", "--json"], capture_output=True, text=True, check=True).stdout)
    members = sorted((t for t in j["tasks"] if t.get("node")), key=lambda t: t.get("rank", 0))
    out = []
    for t in members:
        if out and out[-1][0] == t["node"]:
            out[-1] = (t["node"], out[-1][1] + 1)
        else:
            out.append((t["node"], 1))
    return out

def wait_for(count, what, deadline_s=20):
    end = time.time() + deadline_s
    last = None
    while time.time() < end:
        hosts = discover()
        if hosts != last:
            print(f"poll: {hosts}")
            last = hosts
        if len(hosts) == count:
            # Between two polls nothing changed: the list is the ring order now.
            assert hosts == ring_order() or discover() != hosts, (hosts, ring_order())
            return hosts
        time.sleep(0.1)
    raise AssertionError(f"{what}: never {count} hosts, last {last}")

full = wait_for(4, "the job started")
assert all(s == 1 for _, s in full), full
subprocess.run([binary, "submit", "--name", "urgent", "--replicas", "2", "--gpus", "2", "--priority", "100"],
               check=True, capture_output=True)
shrunk = wait_for(2, "shrunk for urgent")
removed = {h for h, _ in full} - {h for h, _ in shrunk}
assert len(removed) == 2, (full, shrunk)
subprocess.run([binary, "cancel", "urgent"], check=True, capture_output=True)
grown = wait_for(4, "grown back")
assert {h for h, _ in grown} == {h for h, _ in full}, (full, grown)
print("ok: 4 -> 2 -> 4 hosts")
PY
echo PASS
