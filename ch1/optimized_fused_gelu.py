"""Matmul, bias and GELU in one cuBLASLt call (the GELU_BIAS epilogue).

`torch._addmm_activation(b, x, W, use_gelu=True)` asks cuBLASLt to apply the bias and the tanh GELU to each
output tile while it is still in registers, so the activation is written once and never read back: the
baseline's addmm adds the bias in the same epilogue, but its GELU is a second kernel, one more read and write of
the 128 MiB activation. This is the kernel `nn.Linear` + GELU becomes under torch.compile's max-autotune or in
fused-MLP libraries. A CPU has no such epilogue: there the file runs addmm then the tanh GELU, as the baseline
does. Nothing is prepared once beyond the baseline's weights.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.nn.functional as F

from common import Workload


def prepare(wl: Workload):
    x, w, b = wl.inputs["x"], wl.inputs["w"], wl.inputs["b"]
    if x.is_cuda:  # cuBLASLt's GELU_BIAS epilogue computes the tanh GELU
        return lambda: torch._addmm_activation(b, x, w, use_gelu=True)
    return lambda: F.gelu(torch.addmm(b, x, w), approximate="tanh")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
