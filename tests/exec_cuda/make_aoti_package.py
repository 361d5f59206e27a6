"""Writes small AOTInductor packages for the GPU tests (Note [AOTInductor packages]), as a user
would compile a model ahead of time, with the GPU host's PyTorch (2.6 or later):

    make_aoti_package.py OUT_DIR

    OUT_DIR/cnn.pt2         a conv-BatchNorm-ReLU-pool-linear net (the conv without bias, as ResNet's) compiled
                            for cuda at input 4x3x16x16
    OUT_DIR/cnn.pt          the same net traced to TorchScript (its weights the package's)
    OUT_DIR/two_inputs.pt2  a module of two inputs, features 4x6 (fp32) and ids 4x4 (int64), for cuda
    OUT_DIR/two_inputs.pt   the same module traced to TorchScript
    OUT_DIR/cnn-cpu.pt2     the net compiled for the CPU
"""
import os
import sys

import torch


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 3)
        self.embed = torch.nn.Embedding(512, 3)

    def forward(self, features, ids):
        return self.proj(features) * self.embed(ids).sum(1)


def package(module, example, path):
    with torch.no_grad():
        exported = torch.export.export(module, example)
        torch._inductor.aoti_compile_and_package(exported, package_path=path)


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(3)
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 5))
    cnn[1].running_mean.uniform_(-0.5, 0.5)
    cnn[1].running_var.uniform_(0.5, 1.5)
    cnn.eval()
    torch.jit.trace(cnn, torch.randn(4, 3, 16, 16)).save(os.path.join(out, "cnn.pt"))
    package(cnn, (torch.randn(4, 3, 16, 16),), os.path.join(out, "cnn-cpu.pt2"))
    cnn.cuda()
    package(cnn, (torch.randn(4, 3, 16, 16, device="cuda"),), os.path.join(out, "cnn.pt2"))
    two = TwoInputs().eval()
    torch.jit.trace(two, (torch.randn(4, 6), torch.randint(0, 512, (4, 4)))).save(os.path.join(out, "two_inputs.pt"))
    two.cuda()
    package(two, (torch.randn(4, 6, device="cuda"), torch.randint(0, 512, (4, 4), device="cuda")),
            os.path.join(out, "two_inputs.pt2"))


if __name__ == "__main__":
    main(sys.argv[1])
