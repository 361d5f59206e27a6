#!/usr/bin/env python3
"""A gRPC client of psw serve using only `grpcio` and the protocol's generated modules
(docs/serving.md; `grpc_service_pb2.py`, the messages, is generated at build time into
build/tests/runtime_python from exec/runtime/proto/grpc_service.proto).

    python3 docs/examples/grpc_client.py --proto-dir build/tests/runtime_python --model bert_base

Checks the server is ready, reads the model's metadata, and sends one request with its values
typed (`int64_contents` / `fp32_contents`, as many clients send them).
"""
import argparse
import os
import random
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--proto-dir", required=True)
parser.add_argument("--socket", default="")
parser.add_argument("--model", default="bert_base")
options = parser.parse_args()
sys.path.insert(0, options.proto_dir)
import grpc  # noqa: E402
import grpc_service_pb2 as pb  # noqa: E402

socket = options.socket or os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/tmp/psw-%d" % os.getuid()), "psw", "psw.sock")
channel = grpc.insecure_channel("unix:" + socket)


def rpc(name, request, response_type, timeout=30):
    """One call of the protocol's service (inference.GRPCInferenceService)."""
    call = channel.unary_unary("/inference.GRPCInferenceService/" + name, request_serializer=type(request).SerializeToString,
                               response_deserializer=response_type.FromString)
    return call(request, timeout=timeout)


print("ready:", rpc("ServerReady", pb.ServerReadyRequest(), pb.ServerReadyResponse).ready)
metadata = rpc("ModelMetadata", pb.ModelMetadataRequest(name=options.model), pb.ModelMetadataResponse)
tensor = metadata.inputs[0]
shape = [1 if d < 0 else d for d in tensor.shape]
count = 1
for d in shape:
    count *= d
request = pb.ModelInferRequest(model_name=options.model, id="grpc-example")
sent = request.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=shape)
rng = random.Random(0)
if tensor.datatype == "INT64":
    sent.contents.int64_contents.extend(rng.randrange(1000) for _ in range(count))
else:
    sent.contents.fp32_contents.extend(rng.uniform(-1, 1) for _ in range(count))
response = rpc("ModelInfer", request, pb.ModelInferResponse, timeout=120)
output = response.outputs[0]
print("answer:", response.id, output.name, output.datatype, list(output.shape),
      "%d bytes" % len(response.raw_output_contents[0]))
