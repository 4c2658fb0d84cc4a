"""One `torch.bmm` call for all 40 products: one launch instead of 40.

cuBLAS runs the 40 products as one strided-batched kernel, so the launch
overhead is paid once and the 40 small problems fill the GPU together.
Nothing is prepared once: bmm allocates its output each call.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload


def prepare(w: Workload):
    a, b = w.inputs["a"], w.inputs["b"]
    return lambda: torch.bmm(a, b)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
