"""torch.softmax: PyTorch's own fused kernel, one read and one write per element.

The reference point for the Triton kernel: the op the naive composition should have been in the first
place. On a GPU it computes in fp32 internally and writes bf16; on a CPU it is vectorized C++.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch


def prepare(w):
    x = w.inputs["x"]
    return lambda: torch.softmax(x, dim=1)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
