"""A Triton GEMM with the bias and the tanh GELU in its epilogue (ch13/triton_kernels.py), autotuned.

The fp32 accumulator tile gets the bias and GELU (x * sigmoid(2u), the tanh form) before its one store
in bf16: the output crosses memory once. The tile shape is autotuned over ch13/triton_kernels.py's
GEMM_CONFIGS in prepare() (reported as prepare_s); the chosen one is printed to stderr.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13 import triton_kernels as tk

DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(w):
    x, weight, b = w.inputs["x"], w.inputs["w"], w.inputs["b"]
    out = torch.empty(x.shape[0], weight.shape[1], dtype=x.dtype, device=x.device)
    tk.gemm(x, weight, b, out, gelu=True)  # autotune now
    print(f"linear_gelu_triton: autotuner chose {tk.best_config()}", file=sys.stderr)
    return lambda: tk.gemm(x, weight, b, out, gelu=True)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
