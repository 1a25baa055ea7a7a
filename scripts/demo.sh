#!/usr/bin/env bash
# Sets everything up, builds ringmaster (Release) and runs the scheduler on the
# bundled example: a 16-node, 128-GPU cluster in racks and spines, two queues.
# Act 1: eight jobs; prints where each went or why it waits. Act 2: a full
# cluster of elastic jobs at their maximum, an urgent multi-node gang arrives
# and starts by shrinking them (no job stopped whole), and they grow back
# once it ends: a time-stamped event log, then the final table. Act 3: a real
# trace (Tiresias' 60-job sample, data/traces/tiresias) replayed through the
# same engine on a virtual clock: the summary table and where the plots went.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh >/dev/null
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DRINGMASTER_BUILD_TESTS=OFF -DRINGMASTER_BUILD_BENCH=OFF >/dev/null
cmake --build build/release --target ringmaster -j "$(nproc)" >/dev/null

echo "== ringmaster policy check examples/demo/policy.yaml"
build/release/cli/ringmaster policy check examples/demo/policy.yaml
echo
echo "== ringmaster schedule (16 nodes x 8 GPUs, 4 nodes per rack, 2 racks per spine)"
build/release/cli/ringmaster schedule --nodes 16 --gpus-per-node 8 --nodes-per-rack 4 \
  --racks-per-spine 2 --jobs examples/demo/jobs.yaml --policy examples/demo/policy.yaml --check
echo
echo "== act 2: ringmaster policy check examples/policies/elastic.yaml"
build/release/cli/ringmaster policy check examples/policies/elastic.yaml
echo
echo "== act 2: an urgent gang on a full cluster of elastic jobs (virtual clock)"
build/release/cli/ringmaster schedule --nodes 16 --gpus-per-node 8 --nodes-per-rack 4 \
  --racks-per-spine 2 --jobs examples/demo/elastic-jobs.yaml --policy examples/policies/elastic.yaml --check
echo
echo "== act 3: ringmaster simulate: a real trace replayed through the same engine (4 nodes x 8 GPUs)"
build/release/cli/ringmaster simulate --trace data/traces/tiresias/60_job.csv --nodes 4 --gpus-per-node 8 \
  --nodes-per-rack 2 --check --plot --out build/demo-simulate 2> >(grep -v -i "warning" >&2)
echo
echo "== next: the whole loop with real processes on this machine (about a minute):"
echo "   examples/local-elastic/run.sh   (serve --local-executor; an elastic trainer shrinks for a priority job and grows back)"
