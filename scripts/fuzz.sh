#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, build/fuzz) and fuzzes.
#
#   scripts/fuzz.sh TARGET [SECONDS]   fuzz one target (default 300 s); new
#                                      inputs go to build/fuzz/corpus/TARGET,
#                                      crashes to build/fuzz/crashes/TARGET
#   scripts/fuzz.sh --all [SECONDS]    every target in turn (what scripts/test.sh
#                                      runs, with a few seconds each)
#   scripts/fuzz.sh --list             the targets
#   scripts/fuzz.sh --merge TARGET|--all [SECONDS]
#                                      fuzz as above, then add to the kept
#                                      corpus fuzz/corpus/TARGET the new inputs
#                                      that reach code its seeds do not
#                                      (libFuzzer -merge=1); commit them
#
# Each run starts from the seeds in fuzz/corpus/TARGET and the inputs that
# once crashed it (fuzz/regressions/TARGET). A crash fails the script and
# leaves the input under build/fuzz/crashes/TARGET; docs/FUZZING.md says
# what to do with it. Extra arguments after SECONDS go to libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(extender_wire extender policy job_file cluster_file nvidia_smi trace admin)
BUILD=build/fuzz

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage
merge=0
if [[ $1 == --merge ]]; then
  merge=1
  shift
  [[ $# -ge 1 ]] || usage
fi
case "$1" in
  --list) printf '%s\n' "${TARGETS[@]}"; exit 0 ;;
  --all) selected=("${TARGETS[@]}") ;;
  -h|--help) usage ;;
  *)
    if [[ ! " ${TARGETS[*]} " =~ " $1 " ]]; then
      echo "fuzz.sh: unknown target '$1' (one of: ${TARGETS[*]})" >&2
      exit 2
    fi
    selected=("$1") ;;
esac
SECONDS_EACH="${2:-300}"
shift $(( $# >= 2 ? 2 : 1 ))

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (scripts/setup.sh installs it)" >&2
  exit 2
fi
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
JOBS="${JOBS:-$(nproc)}"
# -O1 with line tables only: quick to compile, fast enough to fuzz, stack
# traces with lines; no NDEBUG, so that assert()s fire too.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Fuzz \
  -DCMAKE_C_FLAGS_FUZZ="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DRINGMASTER_FUZZ=ON -DRINGMASTER_BUILD_TESTS=OFF -DRINGMASTER_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target $(printf 'fuzz_%s ' "${selected[@]}")

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=()
for t in "${selected[@]}"; do
  corpus="$BUILD/corpus/$t"
  crashes="$BUILD/crashes/$t"
  mkdir -p "$corpus" "$crashes"
  seeds=(fuzz/corpus/"$t")
  [[ -d fuzz/regressions/$t ]] && seeds+=(fuzz/regressions/"$t")
  echo "== fuzz $t for ${SECONDS_EACH}s"
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: 2 GiB.
  if ! "$BUILD/fuzz/fuzz_$t" "$corpus" "${seeds[@]}" -max_total_time="$SECONDS_EACH" \
      -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
      -artifact_prefix="$crashes/" "$@" 2>"$BUILD/fuzz-$t.log"; then
    tail -40 "$BUILD/fuzz-$t.log" >&2
    echo "== fuzz $t: FAILED (input under $crashes/, log $BUILD/fuzz-$t.log)" >&2
    failed+=("$t")
    continue
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$BUILD/fuzz-$t.log" | tr '\n' ' '
  echo
  if ((merge)); then
    mkdir -p "fuzz/corpus/$t"
    before=$(find "fuzz/corpus/$t" -type f | wc -l)
    if ! "$BUILD/fuzz/fuzz_$t" -merge=1 -use_counters=0 -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        "fuzz/corpus/$t" "$corpus" 2>"$BUILD/merge-$t.log"; then
      tail -20 "$BUILD/merge-$t.log" >&2
      echo "== merge $t: FAILED (log $BUILD/merge-$t.log)" >&2
      failed+=("$t")
      continue
    fi
    echo "== merge $t: fuzz/corpus/$t $before -> $(find "fuzz/corpus/$t" -type f | wc -l) inputs"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: every target ran ${SECONDS_EACH}s without a crash"
