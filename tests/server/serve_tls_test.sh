#!/usr/bin/env bash
# `ringmaster serve` with TLS (--tls-cert, --tls-key, then --tls-client-ca)
# on 127.0.0.1 with ephemeral ports, certificates made here by openssl: the
# extender answers HTTPS and not plain HTTP; the CLI reaches the admin API
# with --tls-ca (exit 0) and not without it (exit 3); with a client CA only
# a client with a certificate it signed gets in. Every wait is bounded.
set -euo pipefail
BIN=$(realpath "$1")
work=$(mktemp -d)
pid=""
stop() {
  if [[ -n $pid ]]; then kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  pid=""
}
trap 'stop; rm -rf "$work"' EXIT

cd "$work"
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
{
  openssl req -x509 $ec -keyout ca.key -out ca.crt -days 1 -subj /CN=test-ca
  echo "subjectAltName=IP:127.0.0.1" >san.ext
  openssl req $ec -keyout srv.key -out srv.csr -subj /CN=ringmaster
  openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 1 -extfile san.ext
  openssl req $ec -keyout client.key -out client.csr -subj /CN=admin
  openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 1
} >/dev/null 2>&1 || { echo "openssl could not make the certificates"; exit 1; }

# Half the TLS flags is a usage error.
set +e
msg=$("$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --tls-cert srv.crt 2>&1 >/dev/null)
rc=$?
set -e
[[ $rc == 2 && $msg == *"--tls-key"* ]] || { echo "--tls-cert alone: exit $rc: $msg"; exit 1; }

start() {  # extra serve flags...
  "$BIN" serve --no-bind --http 127.0.0.1:0 --grpc 127.0.0.1:0 --period-ms 50 --nodes 1 --gpus-per-node 8 \
    --tls-cert srv.crt --tls-key srv.key "$@" >out 2>err &
  pid=$!
  hport="" gport=""
  for _ in $(seq 100); do
    hport=$(sed -n 's/^extender listening on 127.0.0.1:\([0-9]*\) (TLS)$/\1/p' out 2>/dev/null || true)
    gport=$(sed -n 's/^admin API listening on 127.0.0.1:\([0-9]*\)$/\1/p' out 2>/dev/null || true)
    [[ -n $hport && -n $gport ]] && break
    sleep 0.1
  done
  [[ -n $hport && -n $gport ]] || { echo "serve did not start"; cat err; exit 1; }
}
cli() {  # verb flags... -> exit code
  set +e
  "$BIN" jobs --server "127.0.0.1:$gport" --timeout 5 "$@" >/dev/null 2>&1
  local rc=$?
  set -e
  echo $rc
}

start
[[ $(curl -s --max-time 5 --cacert ca.crt "https://127.0.0.1:$hport/healthz") == ok ]] || { echo "https healthz"; exit 1; }
if curl -s --max-time 5 "http://127.0.0.1:$hport/healthz" >/dev/null 2>&1; then echo "plain HTTP answered"; exit 1; fi
[[ $(cli --tls-ca ca.crt) == 0 ]] || { echo "jobs --tls-ca: not 0"; exit 1; }
[[ $(cli) == 3 ]] || { echo "jobs without --tls-ca against TLS: not 3"; exit 1; }
stop

start --tls-client-ca ca.crt
[[ $(cli --tls-ca ca.crt --tls-cert client.crt --tls-key client.key) == 0 ]] || { echo "jobs with a client cert: not 0"; exit 1; }
[[ $(cli --tls-ca ca.crt) == 3 ]] || { echo "jobs without a client cert: not 3"; exit 1; }
[[ $(curl -s --max-time 5 --cacert ca.crt --cert client.crt --key client.key "https://127.0.0.1:$hport/healthz") == ok ]] ||
  { echo "https healthz with a client cert"; exit 1; }
if curl -s --max-time 5 --cacert ca.crt "https://127.0.0.1:$hport/healthz" >/dev/null 2>&1; then
  echo "https without a client cert answered"; exit 1
fi
kill -TERM "$pid"
wait "$pid"
pid=""
echo "serve TLS: ok"
