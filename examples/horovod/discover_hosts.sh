#!/usr/bin/env bash
# Horovod Elastic's host discovery script for a job that ringmaster places:
#
#   RINGMASTER_JOB=hvd-train horovodrun --min-np 2 --max-np 8 \
#     --host-discovery-script examples/horovod/discover_hosts.sh python train.py
#
# Horovod runs it every few seconds and takes the lines it prints, one
# "hostname:slots" per host, as the hosts to run on: a host that leaves the
# list is removed at the next poll, a new one added. Here the list is the
# job's current members in ring order (`ringmaster hosts JOB --format
# horovod`), so ringmaster's shrink and grow decisions become Horovod's.
# The daemon is found as by any ringmaster client: RINGMASTER_SERVER
# (HOST:PORT, default 127.0.0.1:7070) and RINGMASTER_TOKEN; RINGMASTER names
# the binary (default: ringmaster on PATH).
#
# A job with no member placed (waiting, or between a stop and a restart)
# prints no host and exits 0, so Horovod waits for --min-np hosts; any
# other failure (the daemon unreachable: exit 3) is Horovod's to report.
set -uo pipefail
job=${RINGMASTER_JOB:?set RINGMASTER_JOB to the job ringmaster runs}
out=$("${RINGMASTER:-ringmaster}" hosts "$job" --format horovod 2>&1)
rc=$?
if [[ $rc == 0 ]]; then
  printf '%s\n' "$out"
  exit 0
fi
if [[ $rc == 1 ]] && grep -q "no members placed" <<<"$out"; then
  echo "$out" >&2
  exit 0
fi
echo "$out" >&2
exit "$rc"
