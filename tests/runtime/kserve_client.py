#!/usr/bin/python3
"""A KServe v2 (open inference protocol) gRPC client that checks a server answers by the protocol.

Written against the protocol alone, with Python's own gRPC and protobuf (the Debian
python3-grpcio and python3-protobuf: run it with /usr/bin/python3), so it checks `psw serve`
from outside the project's C++ code: the fake server in the tests, the real server later.

Options:
  --socket PATH        the server's Unix socket (default: $XDG_RUNTIME_DIR/psw/psw.sock, else
                       /tmp/psw-<uid>/psw.sock, as `psw serve` chooses)
  --server HOST:PORT   a TCP server instead of a socket
  --model NAME         the model to query and run (default: double)
  --batch N            the batch size put in the leading -1 dimension of each input (default: 2)
  --seed N             seed of the random input values (default: 1)
  --expect-doubled     require the first output to be exactly twice the first input (the fake
                       server's "double" model); without it, outputs are only checked to match
                       their declared datatype and shape
  --proto-dir DIR      where grpc_service_pb2.py is (generated at build time by
                       `protoc --python_out`; default: $PSW_PROTO_PYTHON_DIR)
  --timeout SECONDS    deadline of every call (default: 30)
  --shared-memory      also check the system shared memory extension: create a POSIX shared
                       memory object in /dev/shm, register it, run the same request with its
                       inputs and outputs in the region, require the same outputs as the raw
                       request, check its errors, unregister, and remove the object

Checks, in order: ServerLive, ServerReady, ServerMetadata, ModelReady, ModelMetadata, one
ModelInfer with raw_input_contents (random values of each input's datatype, answer verified),
the same request with its values typed (InferTensorContents; with --expect-doubled its outputs
must be the raw request's, byte for byte), and that the protocol's errors come back as they
should: an unknown model is NOT_FOUND; typed and raw contents together, a misnamed input and a
raw content of the wrong size are INVALID_ARGUMENT; with --shared-memory, the extension (above).
Prints one line per check; exits 0 when all pass, 1 on the first mismatch, 2 on bad options.

Example (a server started by `psw serve` on the default socket):
  /usr/bin/python3 tests/runtime/kserve_client.py --proto-dir build/tests/runtime_python \\
      --model resnet152 --batch 8
"""

import argparse
import mmap
import os
import random
import struct
import sys

# Element size and struct format of each datatype this client can generate and decode.
# FP16 and BF16 are generated as bit patterns of small values and checked only for size.
DATATYPES = {
    "FP32": (4, "f"), "FP64": (8, "d"), "INT64": (8, "q"), "INT32": (4, "i"), "INT16": (2, "h"),
    "INT8": (1, "b"), "UINT64": (8, "Q"), "UINT32": (4, "I"), "UINT16": (2, "H"), "UINT8": (1, "B"),
    "BOOL": (1, "B"), "FP16": (2, None), "BF16": (2, None),
}


# The protocol's typed field of each datatype (FP16 and BF16 have none).
TYPED_FIELDS = {
    "FP32": "fp32_contents", "FP64": "fp64_contents", "INT64": "int64_contents", "INT32": "int_contents",
    "INT16": "int_contents", "INT8": "int_contents", "UINT64": "uint64_contents", "UINT32": "uint_contents",
    "UINT16": "uint_contents", "UINT8": "uint_contents", "BOOL": "bool_contents",
}


class CheckFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CheckFailed(message)
    print("ok  " + message)


def default_socket():
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime_dir.startswith("/") and os.path.isdir(runtime_dir) and os.stat(runtime_dir).st_uid == os.geteuid():
        return os.path.join(runtime_dir, "psw", "psw.sock")
    return "/tmp/psw-%d/psw.sock" % os.geteuid()


def random_bytes(datatype, count, rng):
    size, fmt = DATATYPES[datatype]
    if datatype == "FP16":  # halves in [-1, 1): sign, exponent 0..14, any mantissa
        return b"".join(struct.pack("<H", (rng.getrandbits(1) << 15) | (rng.randrange(15) << 10) | rng.getrandbits(10))
                        for _ in range(count))
    if datatype == "BF16":  # the top half of a float in [-1, 1)
        return b"".join(struct.pack("<f", rng.uniform(-1, 1))[2:] for _ in range(count))
    if datatype in ("FP32", "FP64"):
        values = [rng.uniform(-1, 1) for _ in range(count)]
    elif datatype == "BOOL":
        values = [rng.randrange(2) for _ in range(count)]
    elif datatype in ("INT8", "UINT8"):
        values = [rng.randrange(100) for _ in range(count)]
    else:
        values = [rng.randrange(1000) for _ in range(count)]
    return struct.pack("<%d%s" % (count, fmt), *values)


def product(shape):
    result = 1
    for dim in shape:
        result *= dim
    return result


def aligned(offset):
    return (offset + 63) // 64 * 64


def check_shared_memory(pb, rpc, expect_error, grpc, server, request, response):
    """The system shared memory extension: the raw `request` again with its inputs and outputs in
    one registered region; its outputs must equal the raw `response`'s."""
    check("system_shared_memory" in server.extensions, "ServerMetadata: extensions %s" % list(server.extensions))
    # The layout: every input, then every output, each at a 64-byte boundary.
    layout, end = [], 0
    for raw in list(request.raw_input_contents) + list(response.raw_output_contents):
        layout.append((end, len(raw)))
        end = aligned(end + len(raw))
    key = "/psw-kserve-%d" % os.getpid()
    path = "/dev/shm" + key
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, end)
        region = mmap.mmap(fd, end)
        try:
            rpc("SystemSharedMemoryRegister", pb.SystemSharedMemoryRegisterRequest(name="kserve-py", key=key, byte_size=end),
                pb.SystemSharedMemoryRegisterResponse)
            status = rpc("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(),
                         pb.SystemSharedMemoryStatusResponse)
            got = status.regions.get("kserve-py")
            check(got is not None and got.key == key and got.byte_size == end and got.offset == 0,
                  "SystemSharedMemoryStatus: region kserve-py, key %s, %d bytes" % (key, end))
            expect_error("SystemSharedMemoryRegister",
                         pb.SystemSharedMemoryRegisterRequest(name="kserve-py", key=key, byte_size=end),
                         pb.SystemSharedMemoryRegisterResponse, grpc.StatusCode.ALREADY_EXISTS,
                         "SystemSharedMemoryRegister of a name in use")

            placed = pb.ModelInferRequest(model_name=request.model_name, id="kserve-client-shm")
            inputs = len(request.raw_input_contents)
            for i, tensor in enumerate(request.inputs):
                offset, size = layout[i]
                region[offset:offset + size] = request.raw_input_contents[i]
                entry = placed.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
                entry.parameters["shared_memory_region"].string_param = "kserve-py"
                entry.parameters["shared_memory_offset"].int64_param = offset
                entry.parameters["shared_memory_byte_size"].int64_param = size
            for k, tensor in enumerate(response.outputs):
                offset, size = layout[inputs + k]
                wanted = placed.outputs.add(name=tensor.name)
                wanted.parameters["shared_memory_region"].string_param = "kserve-py"
                wanted.parameters["shared_memory_offset"].int64_param = offset
                wanted.parameters["shared_memory_byte_size"].int64_param = size
            answer = rpc("ModelInfer", placed, pb.ModelInferResponse)
            check(len(answer.outputs) == len(response.outputs) and
                  all(len(raw) == 0 for raw in answer.raw_output_contents),
                  "ModelInfer in shared memory: %d outputs, no bytes in the message" % len(answer.outputs))
            for k, tensor in enumerate(answer.outputs):
                offset, size = layout[inputs + k]
                check(tensor.name == response.outputs[k].name and list(tensor.shape) == list(response.outputs[k].shape),
                      "output %s in shared memory: %s %s" % (tensor.name, tensor.datatype, list(tensor.shape)))
                check(region[offset:offset + size] == response.raw_output_contents[k],
                      "output %s: the %d bytes in the region equal the raw answer's" % (tensor.name, size))

            wrong = pb.ModelInferRequest()
            wrong.CopyFrom(placed)
            wrong.inputs[0].parameters["shared_memory_region"].string_param = "no-such-region"
            expect_error("ModelInfer", wrong, pb.ModelInferResponse, grpc.StatusCode.NOT_FOUND,
                         "ModelInfer naming an unknown region")
            wrong.CopyFrom(placed)
            wrong.inputs[0].parameters["shared_memory_byte_size"].int64_param = layout[0][1] - 1
            expect_error("ModelInfer", wrong, pb.ModelInferResponse, grpc.StatusCode.INVALID_ARGUMENT,
                         "ModelInfer with a shared_memory_byte_size one byte short")
            wrong.CopyFrom(placed)
            wrong.raw_input_contents.append(request.raw_input_contents[0])
            expect_error("ModelInfer", wrong, pb.ModelInferResponse, grpc.StatusCode.INVALID_ARGUMENT,
                         "ModelInfer with raw contents and a region for one input")
        finally:
            rpc("SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(),
                pb.SystemSharedMemoryUnregisterResponse)
            region.close()
        status = rpc("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(), pb.SystemSharedMemoryStatusResponse)
        check(len(status.regions) == 0, "SystemSharedMemoryUnregister: no region left")
    finally:
        os.close(fd)
        os.unlink(path)
    check(not os.path.exists(path), "%s removed" % path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--socket")
    where.add_argument("--server")
    parser.add_argument("--model", default="double")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--expect-doubled", action="store_true")
    parser.add_argument("--proto-dir", default=os.environ.get("PSW_PROTO_PYTHON_DIR", ""))
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--shared-memory", action="store_true")
    options = parser.parse_args()
    if options.batch < 1:
        parser.error("--batch must be at least 1")
    if options.proto_dir:
        sys.path.insert(0, options.proto_dir)
    try:
        import grpc
        import grpc_service_pb2 as pb
    except ImportError as error:
        print("FAIL cannot import the protocol modules (%s); give --proto-dir, and run with the Debian "
              "/usr/bin/python3 that has python3-grpcio and python3-protobuf" % error)
        return 1

    target = options.server if options.server else "unix:" + (options.socket or default_socket())
    channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 256 << 20),
                                                     ("grpc.max_send_message_length", 256 << 20)])

    def rpc(name, request, response_type):
        call = channel.unary_unary("/inference.GRPCInferenceService/" + name,
                                   request_serializer=type(request).SerializeToString,
                                   response_deserializer=response_type.FromString)
        return call(request, timeout=options.timeout)

    def expect_error(name, request, response_type, code, what):
        try:
            rpc(name, request, response_type)
        except grpc.RpcError as error:
            check(error.code() == code, "%s -> %s (got %s: %s)" % (what, code.name, error.code().name, error.details()))
            return
        raise CheckFailed("%s: expected %s, the call succeeded" % (what, code.name))

    try:
        print("server %s, model %s" % (target, options.model))
        check(rpc("ServerLive", pb.ServerLiveRequest(), pb.ServerLiveResponse).live, "ServerLive: live")
        check(rpc("ServerReady", pb.ServerReadyRequest(), pb.ServerReadyResponse).ready, "ServerReady: ready")
        server = rpc("ServerMetadata", pb.ServerMetadataRequest(), pb.ServerMetadataResponse)
        check(server.name != "", "ServerMetadata: %s %s" % (server.name, server.version))
        check(rpc("ModelReady", pb.ModelReadyRequest(name=options.model), pb.ModelReadyResponse).ready,
              "ModelReady: %s ready" % options.model)
        metadata = rpc("ModelMetadata", pb.ModelMetadataRequest(name=options.model), pb.ModelMetadataResponse)
        check(metadata.name == options.model and len(metadata.inputs) > 0 and len(metadata.outputs) > 0,
              "ModelMetadata: %d inputs, %d outputs, platform %s" % (len(metadata.inputs), len(metadata.outputs),
                                                                     metadata.platform))

        rng = random.Random(options.seed)
        request = pb.ModelInferRequest(model_name=options.model, id="kserve-client-1")
        for tensor in metadata.inputs:
            check(tensor.datatype in DATATYPES, "input %s: datatype %s" % (tensor.name, tensor.datatype))
            shape = [options.batch if (i == 0 and dim < 0) else dim for i, dim in enumerate(tensor.shape)]
            if any(dim < 0 for dim in shape):
                raise CheckFailed("input %s has a variable dimension besides the batch: %s" % (tensor.name, list(tensor.shape)))
            request.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=shape)
            request.raw_input_contents.append(random_bytes(tensor.datatype, product(shape), rng))
        response = rpc("ModelInfer", request, pb.ModelInferResponse)
        check(response.id == request.id, "ModelInfer: id echoed")
        check(len(response.raw_output_contents) == len(response.outputs) and len(response.outputs) > 0,
              "ModelInfer: %d outputs with raw contents" % len(response.outputs))
        for tensor, raw in zip(response.outputs, response.raw_output_contents):
            check(tensor.datatype in DATATYPES and all(dim >= 0 for dim in tensor.shape),
                  "output %s: %s %s" % (tensor.name, tensor.datatype, list(tensor.shape)))
            expected = product(tensor.shape) * DATATYPES[tensor.datatype][0]
            check(len(raw) == expected, "output %s: %d bytes for %d expected" % (tensor.name, len(raw), expected))
        if options.expect_doubled:
            sent, got = request.inputs[0], response.outputs[0]
            check(sent.datatype == "FP32" and got.datatype == "FP32" and list(got.shape) == list(sent.shape),
                  "doubled: output %s has the input's type and shape" % got.name)
            count = product(sent.shape)
            inputs = struct.unpack("<%df" % count, request.raw_input_contents[0])
            outputs = struct.unpack("<%df" % count, response.raw_output_contents[0])
            mismatches = [i for i in range(count) if outputs[i] != 2 * inputs[i]]
            check(not mismatches, "doubled: all %d values are exactly 2x the input (first %.6f -> %.6f)"
                  % (count, inputs[0], outputs[0]))

        # The same request with its values typed (InferTensorContents), as many clients send them.
        if all(tensor.datatype in TYPED_FIELDS for tensor in request.inputs):
            typed = pb.ModelInferRequest(model_name=options.model, id="kserve-client-typed")
            for tensor, raw in zip(request.inputs, request.raw_input_contents):
                count = product(tensor.shape)
                values = struct.unpack("<%d%s" % (count, DATATYPES[tensor.datatype][1]), raw)
                sent = typed.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
                getattr(sent.contents, TYPED_FIELDS[tensor.datatype]).extend(
                    [bool(v) for v in values] if tensor.datatype == "BOOL" else values)
            answer = rpc("ModelInfer", typed, pb.ModelInferResponse)
            check(answer.id == typed.id and len(answer.raw_output_contents) == len(response.raw_output_contents),
                  "ModelInfer with typed contents: answered, id echoed")
            if options.expect_doubled:
                check(list(answer.raw_output_contents) == list(response.raw_output_contents),
                      "ModelInfer with typed contents: the raw request's outputs, byte for byte")
            mixed = pb.ModelInferRequest()
            mixed.CopyFrom(typed)
            mixed.raw_input_contents.append(request.raw_input_contents[0])
            expect_error("ModelInfer", mixed, pb.ModelInferResponse, grpc.StatusCode.INVALID_ARGUMENT,
                         "ModelInfer with typed contents and raw_input_contents together")
        expect_error("ModelMetadata", pb.ModelMetadataRequest(name="no-such-model-xyz"), pb.ModelMetadataResponse,
                     grpc.StatusCode.NOT_FOUND, "ModelMetadata of an unknown model")
        misnamed = pb.ModelInferRequest()
        misnamed.CopyFrom(request)
        misnamed.inputs[0].name = request.inputs[0].name + "_misnamed"
        expect_error("ModelInfer", misnamed, pb.ModelInferResponse, grpc.StatusCode.INVALID_ARGUMENT,
                     "ModelInfer with a misnamed input")
        short = pb.ModelInferRequest()
        short.CopyFrom(request)
        short.raw_input_contents[0] = short.raw_input_contents[0][:-1]
        expect_error("ModelInfer", short, pb.ModelInferResponse, grpc.StatusCode.INVALID_ARGUMENT,
                     "ModelInfer with one byte missing")
        if options.shared_memory:
            check_shared_memory(pb, rpc, expect_error, grpc, server, request, response)
    except CheckFailed as failure:
        print("FAIL " + str(failure))
        return 1
    except grpc.RpcError as error:
        print("FAIL %s: %s" % (error.code().name, error.details()))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
