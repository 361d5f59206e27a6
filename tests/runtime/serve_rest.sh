#!/usr/bin/env bash
# psw serve's REST front end (Note [REST front end]) on a host-backend server, asked as any HTTP
# client would (Python's urllib, nothing of the project's): health, metadata, one request of fp32
# values with JSON tensors and the same with the binary tensor extension (the outputs must be the
# same values), and a misnamed input refused with 400. The model: a small TorchScript net of fp32
# input beside host-tiny.yaml's BERT-Tiny (serve_lib.sh's tiny_config_with_fp32_model).
#
#   serve_rest.sh PSW
set -euo pipefail
psw=$1
source "$(dirname "$0")/serve_lib.sh"  # sets work (removed at exit) and sock
tiny_config_with_fp32_model
start_ready_server --http-listen 127.0.0.1:0
url=$(sed -n 's/^psw serve: REST on \(http:[^ ]*\)$/\1/p' "$work/serve.log")
test -n "$url" || { cat "$work/serve.log"; echo "FAIL: no REST address in the log"; exit 1; }
/usr/bin/python3 - "$url" <<'PY' || { tail -20 "$work/serve.log"; echo "FAIL"; exit 1; }
import json, random, struct, sys, urllib.error, urllib.request

url = sys.argv[1]

def call(path, body=None, headers=None):
    request = urllib.request.Request(url + path, data=body, headers=headers or {}, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()

assert call("/v2/health/live")[0] == 200
assert call("/v2/health/ready")[0] == 200
status, _, body = call("/v2/models/cnn")
metadata = json.loads(body)
assert status == 200 and metadata["inputs"][0]["name"] == "input", metadata
assert call("/v2/models/cnn/ready")[0] == 200
print("ok  health, ready, metadata:", metadata["inputs"][0])

rng = random.Random(3)
# A batch of 64: a body of about a megabyte in JSON.
values = [rng.uniform(-1, 1) for _ in range(64 * 3 * 16 * 16)]
tensor = {"name": "input", "shape": [64, 3, 16, 16], "datatype": "FP32"}
status, _, body = call("/v2/models/cnn/infer",
                       json.dumps({"id": "rest-1", "inputs": [dict(tensor, data=values)]}).encode(),
                       {"Content-Type": "application/json"})
assert status == 200, body[:300]
answer = json.loads(body)
assert answer["id"] == "rest-1" and answer["outputs"][0]["shape"] == [64, 5], answer["outputs"][0]["shape"]
from_json = answer["outputs"][0]["data"]
print("ok  infer with JSON tensors: %d logits" % len(from_json))

header = json.dumps({"inputs": [dict(tensor, parameters={"binary_data_size": 4 * len(values)})],
                     "outputs": [{"name": answer["outputs"][0]["name"], "parameters": {"binary_data": True}}]}).encode()
status, headers, body = call("/v2/models/cnn/infer", header + struct.pack("<%df" % len(values), *values),
                             {"Content-Type": "application/octet-stream",
                              "Inference-Header-Content-Length": str(len(header))})
assert status == 200, body[:300]
length = int(headers["Inference-Header-Content-Length"])
binary = struct.unpack("<320f", body[length:])
assert all(abs(a - b) <= 1e-5 * max(1.0, abs(a)) for a, b in zip(binary, from_json)), "binary and JSON answers differ"
print("ok  infer with the binary tensor extension: the same logits")

status, _, body = call("/v2/models/cnn/infer",
                       json.dumps({"inputs": [dict(tensor, name="image", data=values)]}).encode(),
                       {"Content-Type": "application/json"})
error = json.loads(body)["error"]
assert status == 400 and "has no input 'image'" in error, (status, error)
print("ok  a misnamed input: 400,", error)
PY
kill -TERM "$server"
wait "$server"
server=
echo "serve REST: ok"
