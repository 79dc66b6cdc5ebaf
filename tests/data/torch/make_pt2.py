"""Writes the .pt2 files beside this script: small torch.export ExportedPrograms that
tests/test_import_torch.py imports. Run with a Python that has torch (not a dependency
of memconflict):  python tests/data/torch/make_pt2.py"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent


class BufferAdd(nn.Module):
    """A buffer mutated in place: the graph signature's BUFFER_MUTATION output."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(4))

    def forward(self, x):
        self.acc.add_(x)
        return x * 2 + self.acc


class BufferCopy(nn.Module):
    """`copy_` into a buffer, then a read of it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(3))

    def forward(self, x):
        self.state.copy_(x * 2)
        return self.state + 1


class InputAdd(nn.Module):
    """`add_` on a user input: USER_INPUT_MUTATION."""

    def forward(self, x, y):
        x.add_(y)
        return torch.relu(x)


class ConvNet(nn.Module):
    """conv / relu / matmul with a BatchNorm in training mode (running stats mutated)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Parameter(torch.randn(16, 5))

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 2), 1)
        return torch.matmul(y, self.fc)


class Misc(nn.Module):
    """cat, slicing, split, layer norm and an embedding: ops with list and default arguments."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, idx, x):
        y = torch.cat([x, x])[1:]
        a, b = torch.split(y, [2, 1])
        return self.norm(self.emb(idx) + a.sum(0, keepdim=True)), b


def main() -> None:
    torch.manual_seed(0)
    cases = {
        "buffer_add.pt2": (BufferAdd(), (torch.ones(4),)),
        "input_add.pt2": (InputAdd(), (torch.ones(2, 3), torch.ones(2, 3))),
        "buffer_copy.pt2": (BufferCopy(), (torch.ones(3),)),
        "convnet.pt2": (ConvNet().train(), (torch.randn(2, 3, 4, 4),)),
        "misc.pt2": (Misc(), (torch.tensor([1, 2]), torch.randn(2, 4))),
    }
    for name, (module, args) in cases.items():
        prog = torch.export.export(module, args)
        torch.export.save(prog, HERE / name)
        # the same program in core ATen: functionalized, mutations as output specs
        core = name.replace(".pt2", "_core.pt2")
        torch.export.save(prog.run_decompositions(), HERE / core)
        for f in (name, core):
            print(f, torch.__version__, (HERE / f).stat().st_size)


if __name__ == "__main__":
    main()
