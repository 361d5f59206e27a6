#!/usr/bin/env python3
"""torchvision's ResNet-152 and Inception-v3 as the zoo's reference (tests/exec/test_weights.cpp).

For each model: builds torchvision's model with seeded random weights, in eval mode, and writes
into --out
  MODEL.safetensors     its state_dict (parameters and buffers, torchvision's names), and
  MODEL_io.safetensors  "input" (a seeded image batch) and "output" (torchvision's output for it).
The C++ test loads the first into the zoo's model, runs the input through the pipeline engine
on the host backend and compares with the output.

BatchNorm's affine parameters and running statistics are drawn around the identity (a fresh
torchvision model has weight 1, bias 0, mean 0, variance 1, under which a loader that mixed
them up would go unnoticed); each ResNet residual branch's last BatchNorm is scaled down as in
the zoo, so that 50 residual additions keep the activations in range; Inception's convolutions
are redrawn with He's variance (see randomise).

No safetensors package in Debian: the format is written here by hand (8-byte little-endian
header length, JSON header, the tensors' bytes back to back). Needs Debian's python3-torchvision
(scripts/setup.sh), run by /usr/bin/python3.
"""
import argparse
import json
import os
import struct
import sys

try:
    import torch
    import torchvision
except ImportError as e:  # pragma: no cover - the message is the point
    sys.exit(f"torchvision_reference.py: {e}: install python3-torchvision (scripts/setup.sh) "
             f"and run with Debian's python3 (/usr/bin/python3)")

# Small images keep the CPU forwards fast: ResNet-152 runs on 64 x 64 (2 x 2 maps in layer4,
# where every tap of the 3 x 3 kernels is used), Inception-v3 on 139 x 139 (3 x 3 maps in
# Mixed_7b/7c, so their 1 x 3 and 3 x 1 kernels see neighbours; 75 x 75 would leave 1 x 1).
MODELS = {"resnet152": 64, "inception_v3": 139}

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}


def write_safetensors(path, tensors):
    """tensors: list of (name, tensor). Writes the file in the given order."""
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors:
        t = t.detach().contiguous().cpu()
        if t.dtype not in DTYPES:
            raise ValueError(f"{name}: dtype {t.dtype} not handled")
        data = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def build(name):
    if name == "resnet152":
        return torchvision.models.resnet152(weights=None)
    # The zoo's inception_v3: aux_logits=True, transform_input=False (torchvision's defaults
    # without pretrained weights); init_weights=True says so and silences the warning.
    return torchvision.models.inception_v3(weights=None, aux_logits=True, transform_input=False,
                                           init_weights=True)


def randomise(model, name):
    with torch.no_grad():
        for module_name, m in model.named_modules():
            if isinstance(m, torch.nn.Conv2d) and name == "inception_v3":
                # torchvision's truncated normal of std 0.1 grows the activations about 5x per
                # layer here (to 1e12 at the logits); He's variance keeps them in range.
                torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.8, 1.2)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.num_batches_tracked.fill_(7)  # loaded as is; plays no part in eval
                if name == "resnet152" and module_name.endswith(".bn3"):
                    m.weight.mul_(0.2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory to write into (must exist)")
    parser.add_argument("--seed", type=int, default=20200701)
    parser.add_argument("--model", choices=list(MODELS), action="append",
                        help="only this model (repeatable; default: both)")
    args = parser.parse_args()
    if not os.path.isdir(args.out):
        sys.exit(f"torchvision_reference.py: --out {args.out}: not a directory")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for index, (name, size) in enumerate(MODELS.items()):
        if args.model and name not in args.model:
            continue
        torch.manual_seed(args.seed + index)
        model = build(name)
        randomise(model, name)
        model.eval()
        x = torch.rand(1, 3, size, size) * 2 - 1
        with torch.no_grad():
            y = model(x)
        if not isinstance(y, torch.Tensor):
            sys.exit(f"torchvision_reference.py: {name} returned {type(y)} in eval mode")
        write_safetensors(os.path.join(args.out, f"{name}.safetensors"),
                          list(model.state_dict().items()))
        write_safetensors(os.path.join(args.out, f"{name}_io.safetensors"),
                          [("input", x), ("output", y)])
        print(f"{name}: {len(model.state_dict())} tensors, input {list(x.shape)}, "
              f"output {list(y.shape)} max |y| {y.abs().max().item():.4g}, "
              f"torch {torch.__version__}, torchvision {torchvision.__version__}")


if __name__ == "__main__":
    main()
