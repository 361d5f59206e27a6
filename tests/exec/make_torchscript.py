"""Writes small TorchScript files for the tests (Note [TorchScript models]), with Debian's
python3-torch (/usr/bin/python3), as a user would export a model:

    make_torchscript.py OUT_DIR

    OUT_DIR/cnn.pt        torch.jit.trace of a conv-BatchNorm-ReLU-pool-linear net, input 1x3x16x16
    OUT_DIR/tuple_out.pt  torch.jit.script of a module returning (logits, features)
    OUT_DIR/no_params.pt  a module without parameters
    OUT_DIR/two_inputs.pt torch.jit.trace of a module of two inputs: features 2x6 (fp32), ids 2x4 (int64)
    OUT_DIR/classifier.pt torch.jit.script of a flatten-linear-BatchNorm-ReLU-linear net, input Nx3x16x16,
                          5 classes (scripted: its BatchNorm follows the training mode)
"""
import os
import sys

import torch


class TupleOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.proj(x), x


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 3)
        self.embed = torch.nn.Embedding(512, 3)  # ids below 512, as example inputs are

    def forward(self, features, ids):
        return self.proj(features) * self.embed(ids).sum(1)


class NoParams(torch.nn.Module):
    def forward(self, x):
        return x * 2


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(3)
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 5))
    # Non-trivial running statistics, so that eval mode shows in the outputs.
    cnn[1].running_mean.uniform_(-0.5, 0.5)
    cnn[1].running_var.uniform_(0.5, 1.5)
    cnn.eval()
    torch.jit.trace(cnn, torch.randn(1, 3, 16, 16)).save(os.path.join(out, "cnn.pt"))
    torch.jit.script(TupleOut().eval()).save(os.path.join(out, "tuple_out.pt"))
    torch.jit.script(NoParams()).save(os.path.join(out, "no_params.pt"))
    torch.jit.trace(TwoInputs().eval(), (torch.randn(2, 6), torch.randint(0, 512, (2, 4)))).save(
        os.path.join(out, "two_inputs.pt"))
    classifier = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
        torch.nn.Linear(32, 5))
    torch.jit.script(classifier.eval()).save(os.path.join(out, "classifier.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
