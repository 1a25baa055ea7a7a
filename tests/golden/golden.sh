#!/usr/bin/env bash
# Golden decisions: contended replays of slices of the bundled traces under
# every shipped policy, compared byte for byte with the committed jobs.csv and
# timeline.csv (tests/golden/README.md). A change that alters a decision is a
# policy change: regenerate on purpose with --update and explain the
# difference in its own commit.
#
#   tests/golden/golden.sh BIN            # compare (ctest golden_decisions)
#   tests/golden/golden.sh BIN --update   # rewrite the expected files
#   tests/golden/golden.sh BIN --list     # the cases and their arguments
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${1:?usage: golden.sh BIN [--update|--list]}
MODE=${2:-compare}
case "$MODE" in compare|--update|--list) ;; *) echo "golden.sh: unknown mode '$MODE' (--update, --list)" >&2; exit 2 ;; esac
[[ -x $BIN ]] || { echo "golden.sh: $BIN is not an executable" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BIN" policy default > "$work/default.yaml"

P=$root/examples/policies
PHILLY="--trace $root/data/traces/philly/philly.csv --from 3456000 --max-jobs 200 --nodes 4 --gpus-per-node 8 --nodes-per-rack 2 --walltime-oracle"
MIXED="--trace $here/mixed_philly.csv --max-jobs 250 --nodes 4 --gpus-per-node 8 --nodes-per-rack 2"
TIRESIAS="--trace $root/data/traces/tiresias/60_job.csv --nodes 1 --gpus-per-node 8 --nodes-per-rack 1 --walltime-oracle"
COMMON="--checkpoint-interval 600 --seed 1 --quiet"
# name|arguments
cases=(
  "philly-fifo-gang|$PHILLY --one-queue default --policy $P/fifo-gang.yaml"
  "philly-sjf|$PHILLY --one-queue default --policy $P/sjf.yaml"
  "philly-las|$PHILLY --one-queue default --policy $P/las.yaml"
  "philly-default|$PHILLY --one-queue default --policy $work/default.yaml"
  "philly-ringmaster|$PHILLY --one-queue default --policy $P/ringmaster.yaml"
  "philly-elastic|$PHILLY --one-queue research --policy $P/elastic.yaml"
  "mixed-ringmaster|$MIXED --policy $P/ringmaster.yaml"
  "mixed-elastic|$MIXED --policy $P/elastic.yaml"
  "mixed-las|$MIXED --one-queue default --policy $P/las.yaml"
  "tiresias-las|$TIRESIAS --one-queue default --policy $P/las.yaml"
  "tiresias-ringmaster|$TIRESIAS --one-queue default --policy $P/ringmaster.yaml"
  "tiresias-fifo-gang|$TIRESIAS --one-queue default --policy $P/fifo-gang.yaml"
)
failed=0
for c in "${cases[@]}"; do
  name=${c%%|*}
  args=${c#*|}
  if [[ $MODE == --list ]]; then echo "$name: simulate ${args//$root\//} $COMMON"; continue; fi
  out=$work/$name
  # shellcheck disable=SC2086
  if ! "$BIN" simulate $args $COMMON --out "$out" > "$work/$name.log" 2>&1; then
    echo "FAIL $name: simulate failed:"; cat "$work/$name.log"; failed=1; continue
  fi
  if [[ $MODE == --update ]]; then
    mkdir -p "$here/expected/$name"
    cp "$out/jobs.csv" "$out/timeline.csv" "$here/expected/$name/"
    echo "updated $name"
    continue
  fi
  for f in jobs.csv timeline.csv; do
    if ! cmp -s "$out/$f" "$here/expected/$name/$f"; then
      echo "FAIL $name/$f differs from tests/golden/expected/$name/$f (first lines of the diff):"
      diff "$here/expected/$name/$f" "$out/$f" | head -20 || true
      failed=1
    fi
  done
  [[ $failed == 0 ]] && echo "ok $name"
done
[[ $MODE == --list ]] && exit 0
if [[ $failed != 0 ]]; then
  echo "golden decisions changed. If on purpose: tests/golden/golden.sh BIN --update, and say why in the commit."
  exit 1
fi
echo "all golden replays identical"
