#!/usr/bin/env bash
# deploy/check.py accepts deploy/ and rejects copies broken in the ways a
# manifest edit goes wrong; kubectl kustomize renders it where kubectl exists.
# usage: check_test.sh SOURCE_DIR RINGMASTER_BINARY
set -uo pipefail
src=$1 bin=$2
py=/usr/bin/python3
fail=0
"$py" "$src/deploy/check.py" "$src/deploy" "$bin" || { echo "FAIL: deploy/ itself is rejected"; fail=1; }

# Each case: a sed expression applied to one file, and the message expected.
cases=(
  "scheduler-config.yaml|s#127.0.0.1:8080/#127.0.0.1:9090/#|extender urlPrefix port 9090"
  "deployment.yaml|s#--api-server=http://127.0.0.1:8001#--api-server=http://127.0.0.1:8002#|does not match kubectl proxy"
  "deployment.yaml|s#--reservation-timeout=60#--reservation-timeot=60#|has no flag --reservation-timeot"
  "policy.yaml|s#name: binpack#name: binpak#|policy check failed"
  "policy.yaml|s#preemptAfter: 600 #preemptAfter: 900 #|is not \`ringmaster policy default\`"
  "rbac.yaml|s#pods/binding#pods/bindings#|pods/binding"
  "deployment.yaml|s#name: ringmaster-policy#name: ringmaster-policies#|not defined"
  "service.yaml|s#namespace: ringmaster-system#namespace: yes#|metadata.namespace must be a string"
  "policy.yaml|s#namespace: ringmaster-system#namespace: n#|metadata.namespace must be a string"
  "deployment.yaml|s#--http=127.0.0.1:8080#--http=0.0.0.0:8080#|the extender must listen on loopback"
  "deployment.yaml|s#--metrics=0.0.0.0:9090#--metrics=0.0.0.0:9091#|not ringmaster's --metrics port 9091"
  "deployment.yaml|s#containerPort: 9090#containerPort: 8080#|is the extender's --http port"
  "service.yaml|s#targetPort: metrics#targetPort: 8080#|the Service exposes port 8080, the extender's --http port"
  "deployment.yaml|0,/port: metrics}/s#port: metrics}#port: 8080}#|readinessProbe uses port 8080"
  "deployment.yaml|/--state=/d|ringmaster serve needs --state DIR"
  "deployment.yaml|s#--state=/var/lib/ringmaster#--state=/var/lib/other#|--state /var/lib/other is not the mountPath"
)
for c in "${cases[@]}"; do
  IFS='|' read -r file expr want <<<"$c"
  tmp=$(mktemp -d)
  cp -r "$src/deploy/." "$tmp/"
  sed -i "$expr" "$tmp/$file"
  if cmp -s "$tmp/$file" "$src/deploy/$file"; then echo "FAIL: case '$expr' changed nothing"; fail=1; fi
  out=$("$py" "$src/deploy/check.py" "$tmp" "$bin" 2>&1); rc=$?
  if [[ $rc -ne 1 || "$out" != *"$want"* ]]; then
    echo "FAIL: $file with '$expr': rc=$rc, wanted '$want' in: $out"; fail=1
  fi
  rm -rf "$tmp"
done
# A file kustomization.yaml does not list.
tmp=$(mktemp -d); cp -r "$src/deploy/." "$tmp/"; cp "$tmp/service.yaml" "$tmp/extra.yaml"
out=$("$py" "$src/deploy/check.py" "$tmp" "$bin" 2>&1); rc=$?
[[ $rc -eq 1 && "$out" == *"does not list extra.yaml"* ]] || { echo "FAIL: unlisted file: rc=$rc $out"; fail=1; }
rm -rf "$tmp"

if command -v kubectl >/dev/null; then
  n=$(kubectl kustomize "$src/deploy" | grep -c '^kind:')
  [[ "$n" -ge 10 ]] || { echo "FAIL: kubectl kustomize rendered $n objects"; fail=1; }
else
  echo "kubectl not installed: kustomize rendering not checked"
fi
[[ $fail -eq 0 ]] && echo "deploy check test: all cases passed"
exit $fail
