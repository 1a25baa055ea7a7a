#!/usr/bin/env bash
# examples/mpi under `mpirun --hostfile` from `ringmaster hosts JOB --format
# openmpi`, on one machine (the hosts are node names of a --no-bind serve,
# started here by examples/mpi/local_ssh.sh instead of ssh): MPI rank r must run
# on the node of the job's rank-r member (GetJob's ranks) and the all-reduce
# must be right. Exit 77 (skipped) without mpirun or the program.
set -euo pipefail
BIN=$1 PROG=${2:-} MPIRUN=${3:-}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
[[ -n $PROG && -x $PROG && -n $MPIRUN && -x $MPIRUN ]] || { echo "SKIP: no MPI"; exit 77; }
work=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

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
# 6 nodes of 2 GPUs in racks of 2; a 1-GPU job first, so the 5-task job has
# hosts of 1 and 2 slots (with --map-by node instead of slot this test fails).
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

"$BIN" submit --name first --replicas 1 --gpus 1 >/dev/null
"$BIN" submit --name mpi --replicas 5 --gpus 1 >/dev/null
for _ in $(seq 200); do
  "$BIN" job mpi --json >"$work/job.json" 2>/dev/null && grep -q '"phase": "Running"' "$work/job.json" && break
  sleep 0.05
done
grep -q '"phase": "Running"' "$work/job.json" || fail "mpi did not start: $(cat "$work/job.json")"

# The snippet of docs/LAUNCHERS.md ("Plain mpirun"), with the local stand-in for ssh.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=$SRC/examples/mpi/local_ssh.sh
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
# Open MPI's session directories under this run's own folder (examples/mpi/
# local_ssh.sh gives each stand-in host one inside it): nothing left by
# another run, or by a daemon of another stand-in host, is in the way.
export TMPDIR=$work
"$BIN" hosts mpi --format openmpi > "$work/hostfile"
# Under the sanitizer build, Open MPI's own allocations (libmpi, libopen-pal
# and its dlopen'ed components, which LeakSanitizer cannot name) are reported
# as leaks at the ranks' exit; leak checking is off for the MPI ranks only
# (ASan's other checks stay on; ringmaster's own commands above keep it).
mpi_asan=${ASAN_OPTIONS:+${ASAN_OPTIONS}:}detect_leaks=0
ASAN_OPTIONS=$mpi_asan timeout 60 "$MPIRUN" --map-by slot --hostfile "$work/hostfile" -np 5 "$PROG" >"$work/mpi.out" 2>"$work/mpi.err" \
  || { cat "$work/mpi.err"; fail "mpirun exited $?"; }
cat "$work/mpi.out"

/usr/bin/python3 - "$work" <<'PY' || fail "MPI ranks are not the engine's ranks"
import json, re, sys
work = sys.argv[1]
job = json.load(open(f"{work}/job.json"))
members = sorted((t for t in job["tasks"] if t.get("node")), key=lambda t: t.get("rank", 0))
want = [t["node"] for t in members]
assert [t.get("rank", 0) for t in members] == list(range(5)), members
got = {}
for line in open(f"{work}/mpi.out"):
    m = re.fullmatch(r"rank (\d+) of 5 on (\S+) sum 10\n", line)
    assert m, f"unexpected line: {line!r}"
    got[int(m.group(1))] = m.group(2)
assert sorted(got) == list(range(5)), got
assert [got[r] for r in range(5)] == want, f"MPI ranks on {[got[r] for r in range(5)]}, engine ranks on {want}"
print("ok", want)
PY
echo PASS
