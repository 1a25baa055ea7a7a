#!/usr/bin/env bash
# serve and the state directories it must not trust (issue 26 §5): it
# refuses loudly (exit 2, the file named, the way to start fresh on purpose)
# and never crashes on or overwrites a journal that is damaged (kill -9,
# then journal.db cut to half, its WAL kept), empty (0 bytes), or missing
# beside its WAL; --fresh-state sets the old files aside; a read-only state
# directory is refused at start; on a full disk a submission is refused with
# SQLite's reason in serve's log and the CLI's answer (exit 1, no "is serve
# running?" hint), and serve goes on once there is room; `ringmaster state
# backup` copies a live journal that serve starts on.
#
# The read-only directory and the full disk need mounts: the script re-runs
# itself in new user and mount namespaces (unshare -rm: a read-only bind
# mount, a 2 MiB tmpfs). Where unshare is not allowed, a non-root user gets
# the read-only part through chmod; what cannot be set up is skipped with a
# line saying so (the other parts still run and count).
set -euo pipefail
BIN=$1
if [[ -z ${RM_IN_NAMESPACE:-} ]] && unshare -rm true 2>/dev/null; then
  RM_IN_NAMESPACE=1 exec unshare -rm bash "$0" "$@"
fi
work=$(mktemp -d)
pid=""
pids=()
cleanup() {
  for p in "${pids[@]}" $pid; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [[ -n ${RM_IN_NAMESPACE:-} ]]; then
    for m in "$work/full" "$work/ro/journal.db" "$work/ro"; do umount "$m" 2>/dev/null || true; done
  fi
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- serve stderr"; tail -20 "$work/err" 2>/dev/null || true
  exit 1
}
# run WANT_RC CMD...: runs, keeps stdout+stderr in $out, checks the exit code.
run() {
  local want=$1; shift
  set +e
  out=$("$@" 2>&1)
  local rc=$?
  set -e
  [[ $rc == "$want" ]] || fail "exit $rc, want $want: $*"$'\n'"$out"
}
expect() { grep -qE -- "$1" <<<"$out" || fail "no /$1/ in:"$'\n'"$out"; }
reject() { ! grep -qE -- "$1" <<<"$out" || fail "/$1/ in:"$'\n'"$out"; }
SERVE=(serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --nodes 2 --gpus-per-node 8 --period-ms 50)
# start DIR [FLAGS...]: serve in the background on DIR; sets pid and RINGMASTER_SERVER.
start() {
  local dir=$1; shift
  : >"$work/out"
  "$BIN" "${SERVE[@]}" --state "$dir" "$@" >"$work/out" 2>>"$work/err" &
  pid=$!
  local port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/^admin API listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null || true)
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || fail "serve exited at start"
    sleep 0.1
  done
  [[ -n $port ]] || fail "serve did not start"
  export RINGMASTER_SERVER=127.0.0.1:$port
}
stop() { kill -"${1:-TERM}" "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
# refused DIR REGEX [FLAGS...]: serve on DIR exits 2 at start (not a signal),
# saying REGEX, the journal's path and how to start fresh.
refused() {
  local dir=$1 want=$2; shift 2
  run 2 timeout 10 "$BIN" "${SERVE[@]}" --state "$dir" "$@"
  expect "$want"
}
jobs_file() {  # N: a jobs file of N one-GPU jobs named NAME-i
  echo "jobs:"
  for i in $(seq "$2"); do echo "- {name: $1-$i, roles: [{name: w, replicas: 1, gpus: 1}]}"; done
}

# --- A damaged journal: kill -9, then journal.db cut to half, WAL kept.
mkdir "$work/state"
start "$work/state"
jobs_file a 300 >"$work/a.yaml"
run 0 "$BIN" submit -f "$work/a.yaml"
stop TERM  # a clean stop: everything is checkpointed into journal.db
start "$work/state"
jobs_file b 100 >"$work/b.yaml"
run 0 "$BIN" submit -f "$work/b.yaml"  # these are in the WAL only
stop KILL
[[ -s $work/state/journal.db-wal ]] || fail "kill -9 left no WAL"
size=$(stat -c %s "$work/state/journal.db")
truncate -s $((size / 2)) "$work/state/journal.db"
sums=$(md5sum "$work/state/journal.db" "$work/state/journal.db-wal")
refused "$work/state" "journal $work/state/journal.db: .*--fresh-state"
[[ $(md5sum "$work/state/journal.db" "$work/state/journal.db-wal") == "$sums" ]] ||
  fail "the refused journal or its WAL was written"
# On purpose: the damaged files are set aside, serve starts empty.
start "$work/state" --fresh-state
grep -q '^recovered' "$work/out" && fail "a fresh start recovered jobs"
run 0 "$BIN" jobs
reject 'a-1 '
stop TERM
aside=$(ls -d "$work/state"/set-aside-*)
[[ $(stat -c %s "$aside/journal.db") == $((size / 2)) && -s $aside/journal.db-wal ]] ||
  fail "the damaged journal.db and its WAL are not in $aside"

# --- An empty journal.db (0 bytes): refused, kept.
mkdir "$work/empty"
: >"$work/empty/journal.db"
refused "$work/empty" "journal $work/empty/journal.db is empty \(0 bytes\).*--fresh-state"
[[ -f $work/empty/journal.db && ! -s $work/empty/journal.db ]] || fail "the empty journal was replaced"

# --- A missing journal beside its WAL (kill -9, then journal.db deleted).
mkdir "$work/missing"
start "$work/missing"
run 0 "$BIN" submit --name m1 --gpus 1
stop KILL
rm "$work/missing/journal.db"
refused "$work/missing" "journal $work/missing/journal.db is missing, but .* holds a daemon's state \(journal.db-wal.*--fresh-state"
[[ ! -e $work/missing/journal.db ]] || fail "a journal was created"
# ... and beside the local executor's records.
mkdir -p "$work/missing2/executor"
refused "$work/missing2" "is missing, but .*\(executor\)"

# --- A read-only state directory: refused at start, not at the first submission.
mkdir "$work/ro"
start "$work/ro"
run 0 "$BIN" submit --name r1 --gpus 1
stop TERM
# make_ro PATH: PATH read-only (a read-only bind mount, else chmod a-w).
made_ro=""
make_ro() {
  if [[ -n ${RM_IN_NAMESPACE:-} ]]; then
    mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && made_ro=mount
  elif [[ $(id -u) != 0 ]]; then
    chmod a-w "$1" && made_ro=chmod
  fi
}
# journal.db alone read-only, the directory writable: SQLite opens it
# read-only without a word, and every submission would be refused.
make_ro "$work/ro/journal.db"
if [[ -n $made_ro ]]; then
  refused "$work/ro" "journal $work/ro/journal.db is read-only"
  if [[ $made_ro == mount ]]; then umount "$work/ro/journal.db"; else chmod u+w "$work/ro/journal.db"; fi
  make_ro "$work/ro"
  refused "$work/ro" "state directory $work/ro is not writable"
  echo "read-only journal and state directory ($made_ro): refused at start"
else
  echo "SKIP read-only state directory: root without unshare cannot make one"
fi

# --- A full disk: a 2 MiB tmpfs, filled while serve runs.
if [[ -n ${RM_IN_NAMESPACE:-} ]]; then
  mkdir "$work/full"
  mount -t tmpfs -o size=2m tmpfs "$work/full"
  start "$work/full"
  run 0 "$BIN" submit --name f1 --gpus 8 --replicas 2  # the whole cluster
  run 0 "$BIN" submit --name f0 --gpus 1               # waits for f1
  dd if=/dev/zero of="$work/full/filler" bs=4k 2>/dev/null || true  # until ENOSPC
  run 1 "$BIN" submit --name f2 --gpus 1
  expect "job 'f2' not accepted.*database or disk is full"
  reject 'is `ringmaster serve` running'
  grep -E "refused: not journaled.*name=f2.*database or disk is full" "$work/err" >/dev/null ||
    fail "the refused submission is not in serve's log"
  run 1 "$BIN" cancel f1
  expect "job 'f1' cancelled but not journaled.*database or disk is full"
  reject 'is `ringmaster serve` running'
  # f0 is placed in f1's GPUs: its placement (not waited for) fails, logged.
  for _ in $(seq 100); do grep -q 'journal write failed.*database or disk is full' "$work/err" && break; sleep 0.05; done
  grep -q 'journal write failed.*database or disk is full' "$work/err" ||
    fail "the failed placement write is not in serve's log"
  rm "$work/full/filler"
  run 0 "$BIN" submit --name f3 --gpus 1  # room again: serve goes on
  stop TERM
  echo "full disk (tmpfs): refused, logged, recovered"
else
  echo "SKIP full disk: unshare -rm is not allowed here (no tmpfs to fill)"
fi

# --- state backup of a live journal, while a client submits.
mkdir "$work/live" "$work/copy"
start "$work/live"
jobs_file c 50 >"$work/c.yaml"
run 0 "$BIN" submit -f "$work/c.yaml"
(for i in $(seq 200); do "$BIN" submit --name d-$i --gpus 1 >/dev/null 2>&1 || break; done) &
pids+=($!)
sleep 0.3
run 0 "$BIN" state backup "$work/live" "$work/copy"
expect "backed up $work/live/journal.db to $work/copy/journal.db: [0-9]+ jobs"
copied=$(sed -n 's/.*: \([0-9]*\) jobs.*/\1/p' <<<"$out")
[[ $copied -ge 50 ]] || fail "the backup holds $copied jobs, 50 were acknowledged before it"
run 1 "$BIN" state backup "$work/live" "$work/copy"
expect 'never overwrites'
run 2 "$BIN" state backup "$work/live"
live=$pid
live_server=$RINGMASTER_SERVER
start "$work/copy"  # the copy is a state directory
grep -q "^recovered $copied jobs" "$work/out" || fail "serve on the backup: $(cat "$work/out")"
run 0 "$BIN" job c-50
stop TERM
pid=$live
RINGMASTER_SERVER=$live_server run 0 "$BIN" job c-1
kill "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
pids=()
stop TERM
echo "journal state ok"
