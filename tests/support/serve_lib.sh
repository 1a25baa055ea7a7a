# Helpers for the serve --local-executor --state end-to-end scripts
# (executor_readopt_test.sh, cancel_restart_test.sh). The caller sets BIN
# (the ringmaster binary) and work (a scratch folder holding state/), and
# keeps serve's pid in $pid.

fail() {
  echo "FAIL: $*"
  echo "--- serve stderr"; tail -40 "$work/err" || true
  exit 1
}
# start SERVE-FLAGS...: serve on loopback with the local executor and
# $work/state; exports RINGMASTER_SERVER for the CLI.
start() {
  : >"$work/out"
  "$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --period-ms 50 \
    --state "$work/state" --local-executor "$@" >"$work/out" 2>>"$work/err" &
  pid=$!
  local port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/^admin API listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null || true)
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || fail "serve did not start"
  export RINGMASTER_SERVER=127.0.0.1:$port
  http_port=$(sed -n 's/^extender listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null || true)
  [[ -n $http_port ]] || fail "serve named no extender (metrics) port"
}
# The engine cycles serve has run (its /metrics).
cycles() {
  curl -s --max-time 5 "http://127.0.0.1:$http_port/metrics" |
    sed -n 's/^ringmaster_cycle_duration_seconds_count \([0-9]*\)$/\1/p'
}
# wait_cycles N: until serve has run N more cycles (10 s at most).
wait_cycles() {
  local from
  from=$(cycles)
  [[ -n $from ]] || fail "no cycle count in /metrics"
  at_least() { local now; now=$(cycles); [[ -n $now && $now -ge $((from + $1)) ]]; }
  wait_for at_least "$1"
}
# The pids the executor recorded, sorted.
records() { sed -n 's/^ *"pid": \([0-9]*\),*$/\1/p' "$work/state/executor/processes.json" 2>/dev/null | sort; }
phase() { "$BIN" job "$1" --json | sed -n 's/^ *"phase": "\([A-Za-z]*\)",*$/\1/p' | head -1; }
wait_for() {  # CONDITION-COMMAND... ; 10 s at most
  for _ in $(seq 200); do "$@" && return 0; sleep 0.05; done
  return 1
}
# Alive and not a zombie (an orphaned process's new parent may not reap it).
alive() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [[ -n $st && $st != Z && $st != X ]]
}
# Kill the process groups of every recorded task (cleanup).
kill_recorded() { for p in $(records) "$@"; do kill -KILL -- "-$p" 2>/dev/null || true; done; }
