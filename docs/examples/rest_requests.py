#!/usr/bin/env python3
"""A REST client of psw serve using only `requests` (docs/serving.md, REST).

    python3 docs/examples/rest_requests.py http://127.0.0.1:8000 inception_v3

Asks the model's metadata, sends one request of random values with JSON tensors and the same
with the binary tensor extension, and prints the first outputs of both (they are equal).
"""
import json
import random
import struct
import sys

import requests

url, model = sys.argv[1], sys.argv[2]
metadata = requests.get(f"{url}/v2/models/{model}", timeout=30).json()
tensor = metadata["inputs"][0]
shape = [1 if d < 0 else d for d in tensor["shape"]]
count = 1
for d in shape:
    count *= d
rng = random.Random(0)
if tensor["datatype"] == "INT64":
    values, fmt = [rng.randrange(1000) for _ in range(count)], "q"
else:
    values, fmt = [rng.uniform(-1, 1) for _ in range(count)], "f"
spec = {"name": tensor["name"], "shape": shape, "datatype": tensor["datatype"]}

answer = requests.post(f"{url}/v2/models/{model}/infer", json={"inputs": [dict(spec, data=values)]}, timeout=120)
answer.raise_for_status()
output = answer.json()["outputs"][0]
print("JSON  :", output["name"], output["datatype"], output["shape"], [round(v, 5) for v in output["data"][:4]])

header = json.dumps({"inputs": [dict(spec, parameters={"binary_data_size": count * struct.calcsize(fmt)})],
                     "parameters": {"binary_data_output": True}}).encode()
answer = requests.post(f"{url}/v2/models/{model}/infer", data=header + struct.pack(f"<{count}{fmt}", *values),
                       headers={"Content-Type": "application/octet-stream",
                                "Inference-Header-Content-Length": str(len(header))}, timeout=120)
answer.raise_for_status()
length = int(answer.headers["Inference-Header-Content-Length"])
first = struct.unpack("<4f", answer.content[length:length + 16])
print("binary:", output["name"], [round(v, 5) for v in first])

error = requests.get(f"{url}/v2/models/gpt2", timeout=30)
print("error :", error.status_code, error.json()["error"])
