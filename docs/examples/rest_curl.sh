#!/usr/bin/env bash
# Every REST call of psw serve with curl (docs/serving.md, REST). Start a server with
#   build/cli/psw serve --config configs/serve/host-small.yaml --backend host --http-listen 127.0.0.1:8000
# then:  bash docs/examples/rest_curl.sh http://127.0.0.1:8000
set -euo pipefail
url=${1:-http://127.0.0.1:8000}
curl -sf "$url/v2/health/live" && echo "live"
curl -sf "$url/v2/health/ready" && echo "ready"
curl -sf "$url/v2" && echo                                   # server metadata
curl -sf "$url/v2/models/bert_base" && echo                  # model metadata: inputs, outputs
curl -sf "$url/v2/models/bert_base/ready" && echo "bert_base ready"
curl -sf "$url/v2/repository/index" -H 'Content-Type: application/json' -d '{}' && echo  # every model's state
# Inference with a JSON tensor: 128 token ids (BERT-base takes INT64 [batch, 128]).
ids=$(seq -s, 101 228)
# (The answer is read whole, then cut: `curl | head -c` would end curl early, and the line.)
answer=$(curl -sf "$url/v2/models/bert_base/infer" -H 'Content-Type: application/json' \
  -d "{\"id\": \"curl-1\", \"inputs\": [{\"name\": \"input_ids\", \"shape\": [1, 128], \"datatype\": \"INT64\", \"data\": [$ids]}]}")
echo "${answer:0:300} ..."
# The same with the binary tensor extension: the JSON header, then the raw little-endian bytes;
# the answer comes back binary too (its JSON header's length in Inference-Header-Content-Length).
header='{"inputs": [{"name": "input_ids", "shape": [1, 128], "datatype": "INT64", "parameters": {"binary_data_size": 1024}}], "parameters": {"binary_data_output": true}}'
body=$(mktemp)
trap 'rm -f "$body"' EXIT
{ printf '%s' "$header"; for i in $(seq 101 228); do printf "$(printf '\\x%02x\\x%02x' $((i % 256)) $((i / 256)))\\x00\\x00\\x00\\x00\\x00\\x00"; done; } > "$body"
curl -sf "$url/v2/models/bert_base/infer" -H 'Content-Type: application/octet-stream' \
  -H "Inference-Header-Content-Length: ${#header}" --data-binary "@$body" -D - -o /dev/null \
  | grep -i '^inference-header-content-length'
# The model repository: a model unloaded while the server runs, then loaded again from the serve
# config (a model it does not list: {"parameters": {"config": "{\"name\": ..., \"batch\": 1}"}}).
curl -sf "$url/v2/repository/models/inception_v3/unload" -d '{}' && echo " inception_v3 unloaded"
curl -sf "$url/v2/repository/models/inception_v3/load" -d '{}' && echo " inception_v3 loaded"
# An error: its HTTP status and the protocol's {"error": ...} body.
curl -s -w ' (HTTP %{http_code})\n' "$url/v2/models/gpt2"
