#!/usr/bin/env bash
# `ringmaster policy import volcano` on the public volcano-scheduler.conf files
# of Volcano's Helm chart and docs (tests/cli/volcano/README.md): each converts without
# error, `policy check` accepts the result, and the parts reported as not
# carried over are exactly those of NAME.expect.
set -euo pipefail
BIN=$1
DIR=$(cd "$(dirname "$0")/volcano" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0
for conf in "$DIR"/helm-*.conf "$DIR"/docs-*.conf "$DIR"/website-*.conf; do
  name=$(basename "$conf" .conf)
  "$BIN" policy import volcano "$conf" >"$work/$name.yaml" 2>"$work/$name.notes" \
    || { cat "$work/$name.notes"; echo "FAIL: $name: import exited $?"; exit 1; }
  "$BIN" policy check "$work/$name.yaml" >/dev/null \
    || { echo "FAIL: $name: policy check rejects the import"; exit 1; }
  sed -n 's/^not carried over: \(action [^:]*\|plugin [^:]*\):.*/\1/p' "$work/$name.notes" | sort >"$work/$name.got"
  if grep -v '^not carried over: \(action\|plugin\) ' "$work/$name.notes" | grep -q .; then
    echo "FAIL: $name: unexpected notes:"; grep -v '^not carried over: \(action\|plugin\) ' "$work/$name.notes"; exit 1
  fi
  sort "$DIR/$name.expect" | diff -u - "$work/$name.got" || { echo "FAIL: $name: notes differ from $name.expect"; exit 1; }
  n=$((n + 1))
done
[[ $n -ge 6 ]] || { echo "FAIL: only $n public files found in $DIR"; exit 1; }
echo "PASS: $n files"
