#!/usr/bin/env python3
"""A decoder generating through psw serve over gRPC, using only `grpcio` and the generated
messages of the project's Control service (docs/llm.md, Generation; `psw_control_pb2.py` is
generated at build time into build/tests/runtime_python from exec/runtime/proto/psw_control.proto).

    python3 docs/examples/grpc_generate.py --proto-dir build/tests/runtime_python --model llama-tiny

Prints each token as the server streams it, then the whole answer.
"""
import argparse
import os
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--proto-dir", required=True)
parser.add_argument("--socket", default="")
parser.add_argument("--model", default="llama-tiny")
parser.add_argument("--max-tokens", type=int, default=8)
options = parser.parse_args()
sys.path.insert(0, options.proto_dir)
import grpc  # noqa: E402
import psw_control_pb2 as pb  # noqa: E402

socket = options.socket or os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/tmp/psw-%d" % os.getuid()), "psw", "psw.sock")
channel = grpc.insecure_channel("unix:" + socket)
generate = channel.unary_stream("/psw.control.Control/Generate", request_serializer=pb.GenerateRequest.SerializeToString,
                                response_deserializer=pb.GenerateResponse.FromString)
request = pb.GenerateRequest(model=options.model, id="py-1", input_ids=[1, 15, 43, 290], max_tokens=options.max_tokens)
for message in generate(request, timeout=60):
    if not message.done:
        print("token %d: %d" % (message.index, message.output_id), flush=True)
        continue
    print("answer: %s, prompt bucket %d, %.3f ms to the first token, %.3f ms per token after it"
          % (list(message.output_ids), message.prompt_bucket, message.ttft_ns / 1e6, message.tpot_ns / 1e6))
