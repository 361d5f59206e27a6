#!/usr/bin/env bash
# The examples of docs/examples/ against a host-backend server, as a user would run them: curl
# for every REST call, a REST client using only `requests`, a gRPC client using only `grpcio`;
# the repository index through psw client.
#
#   serve_examples.sh PSW PROTO_DIR
set -euo pipefail
psw=$1
proto=$2
source "$(dirname "$0")/serve_lib.sh"  # sets work (removed at exit) and sock
# The examples ask for configs/serve/host-small.yaml's models by name; none of them trains, so its
# ResNet-152 job is left out (on a CPU it takes a third of the server's start and the cores its
# requests need).
start_ready_server --http-listen 127.0.0.1:0 --set training=null
url=$(sed -n 's/^psw serve: REST on \(http:[^ ]*\)$/\1/p' "$work/serve.log")
fail() { tail -20 "$work/serve.log"; echo "FAIL: $1"; exit 1; }
bash docs/examples/rest_curl.sh "$url" > "$work/curl.log" 2>&1 || { cat "$work/curl.log"; fail "rest_curl.sh"; }
cat "$work/curl.log"
grep -q '"id":"curl-1"' "$work/curl.log" || fail "rest_curl.sh: no answer to its JSON request"
grep -q '"name":"bert_base","state":"READY"' "$work/curl.log" || fail "rest_curl.sh: no repository index"
grep -qi '^inference-header-content-length' "$work/curl.log" || fail "rest_curl.sh: no binary answer"
grep -q "unknown model 'gpt2'.*(HTTP 404)" "$work/curl.log" || fail "rest_curl.sh: no 404"
grep -q '^{} inception_v3 unloaded$' "$work/curl.log" && grep -q '^{} inception_v3 loaded$' "$work/curl.log" ||
  fail "rest_curl.sh: no unload and load"
# The same index over gRPC, through psw client (Note [Repository index]).
"$psw" client --socket "$sock" --index --format json > "$work/index.json" || fail "psw client --index"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); m={e["name"]: e for e in d["models"]}; assert m["bert_base"]["state"] == "READY" and m["bert_base"]["version"] == "1" and "inception_v3" in m, d' "$work/index.json" || fail "psw client --index: $(cat "$work/index.json")"
/usr/bin/python3 docs/examples/rest_requests.py "$url" inception_v3 > "$work/requests.log" 2>&1 ||
  { cat "$work/requests.log"; fail "rest_requests.py"; }
cat "$work/requests.log"
json=$(sed -n 's/^JSON  : .*\[\(.*\)\]$/\1/p' "$work/requests.log")
binary=$(sed -n 's/^binary: .*\[\(.*\)\]$/\1/p' "$work/requests.log")
test -n "$json" && test "$json" == "$binary" || fail "rest_requests.py: JSON '$json' and binary '$binary' differ"
/usr/bin/python3 docs/examples/grpc_client.py --proto-dir "$proto" --socket "$sock" --model bert_base > "$work/grpc.log" 2>&1 ||
  { cat "$work/grpc.log"; fail "grpc_client.py"; }
cat "$work/grpc.log"
grep -q '^answer: grpc-example pooled_output FP32 \[1, 768\] 3072 bytes$' "$work/grpc.log" || fail "grpc_client.py: unexpected answer"
kill -TERM "$server"
wait "$server"
server=
echo "serve examples: ok"
