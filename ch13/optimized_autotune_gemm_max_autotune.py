"""torch.compile(mode="max-autotune-no-cudagraphs") on the matmul: Inductor benchmarks its Triton templates
against cuBLAS and keeps the fastest. No CUDA graph, so the comparison is kernels only; prepare_s holds
the compile and autotune time.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(w):
    a, b = w.inputs["a"], w.inputs["b"]
    fn = torch.compile(lambda a, b: a @ b, mode="max-autotune-no-cudagraphs")
    fn(a, b)
    return lambda: fn(a, b)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
