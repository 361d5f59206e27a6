#!/usr/bin/env python3
"""Writes a kernel graph file (Note [Kernel graph file]) as the GPU reader describes a capture:
a ResNet-shaped forward of BLOCKS blocks (conv, batch norm, ReLU; every num_batches_tracked unused),
then a kernel whose arguments could not be read. Usage: make_kernel_graph.py OUT.json [--no-times]
[--blocks N] (default 12)."""
import json
import struct
import sys

BASE = 0x7F0000000000


def main():
    out, with_times = sys.argv[1], "--no-times" not in sys.argv[2:]
    blocks = int(sys.argv[sys.argv.index("--blocks") + 1]) if "--blocks" in sys.argv else 12
    parameters, nodes = [], []
    address = BASE

    def parameter(name, size):
        nonlocal address
        parameters.append({"name": name, "address": address, "bytes": size})
        here = address
        address += (size + 511) // 512 * 512
        return here

    def kernel(name, pointers, time_ns):
        words = [0x1000, 7] + pointers
        node = {"kind": "kernel", "name": name, "dependencies": [len(nodes) - 1] if nodes else [],
                "arguments": struct.pack("<%dQ" % len(words), *words).hex(),
                "slots": [[8 * i, 8] for i in range(len(words))]}
        if with_times:
            node["time_ns"] = time_ns
        nodes.append(node)

    for b in range(blocks):
        conv = parameter("block%d.conv.weight" % b, 4 * 64 * 64 * 9)
        bn = [parameter("block%d.bn.%s" % (b, t), 256) for t in ("weight", "bias", "running_mean", "running_var")]
        parameter("block%d.bn.num_batches_tracked" % b, 8)
        kernel("implicit_convolve_sgemm", [conv], 40000)
        kernel("bn_fw_inf", bn, 5000)
        kernel("relu", [], 3000)
    unread = {"kind": "kernel", "name": "softmax", "dependencies": [len(nodes) - 1]}
    if with_times:
        unread["time_ns"] = 2000
    nodes.append(unread)
    with open(out, "w") as f:
        json.dump({"format": "psw-kernel-graph-1", "device": "synthetic", "parameters": parameters, "nodes": nodes}, f)


if __name__ == "__main__":
    main()
