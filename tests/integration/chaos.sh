#!/usr/bin/env bash
# The whole loop under a seeded schedule of faults (issue 25 §4): serve
# --local-executor --state with its coordinator, elastic and rigid jobs of
# examples/elastic_trainer and one ringmaster.torch job, kill -9 of workers
# and of serve (restarted on the same state and addresses), a policy update,
# a priority job. tests/integration/chaos.py says what it checks.
#
# Usage: chaos.sh RINGMASTER ELASTIC_TRAINER SOURCE_DIR PYTHON_STAGE [--long] [--seed N] [--keep]
# (about a minute; --long: three times the faults and the training). The
# seed is printed; RINGMASTER_TEST_SEED=N (or --seed N) replays a schedule.
set -euo pipefail
[[ $# -ge 4 ]] || { sed -n '2,11p' "$0"; exit 2; }
bin=$1 trainer=$2 src=$3 stage=$4
shift 4
exec /usr/bin/python3 "$(dirname "$0")/chaos.py" --ringmaster "$bin" --trainer "$trainer" --source-dir "$src" \
  --python-stage "$stage" "$@"
