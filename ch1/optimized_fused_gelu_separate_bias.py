"""Pitfall: the bias as an op of its own, x @ W then + b, then GELU (bf16).

How a layer is often written out by hand. The matmul writes x @ W; `+ b` reads the 128 MiB activation and
writes it again; GELU reads and writes it a third time. torch.addmm (the baseline, what nn.Linear runs) gives the
bias to cuBLASLt, which adds it in the GEMM's epilogue, so this costs 2 more passes over the activation, ≈ 256 MiB
≈ 0.09 ms at ~3 TB/s by the napkin; measured on the H100, 0.18 ms (0.967 against 0.783 ms,
profiles/h100/ch1-fused-gelu-67da15a), twice that, not taken apart (the plain x @ W may also get another cuBLAS
kernel than addmm with its bias). KIND = "pitfall": reported with its ratio, slower by design. This was the pair's
baseline until the review that found addmm's epilogue was the honest first write.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch.nn.functional as F

from common import Workload

KIND = "pitfall"


def prepare(wl: Workload):
    x, w, b = wl.inputs["x"], wl.inputs["w"], wl.inputs["b"]

    def layer():
        y = x @ w
        y = y + b
        return F.gelu(y, approximate="tanh")
    return layer


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
