"""Pitfall, called eagerly: GemLite's float8 weight-only layers (A16W8_FP8), dequantized inside the GEMM.

GemLite's Triton kernel loads the 1-byte weight tile, converts it to bf16 in registers and feeds the
tensor cores: the weights cross memory once, at 1 byte each, with no bf16 copy written out. Against the
torchao pitfall this isolates the cause: weight-only float8 is slow when the dequantization is a
separate pass, not by nature. GemLite picks its kernel (GEMV, split-K GEMM, GEMM) and tile from its
bundled H100 configurations (gemlite/configs/h100.json) and autotunes shapes it has not seen (its table has
no bf16-activation float8 entry at these shapes: ch13/autotune_sweep.py timed its first call, the tuning,
at 9.7 s); that happens in prepare() (prepare_s).

Measured on the H100 at 16 tokens (profiles/h100/ch13-07ac287): 0.492 ms a call against eager bf16's 0.1121 (0.227x).
Its kernels are not the problem: 57.6 us a call in 6 kernels (scripts/fp8_linear_kernels.py, kernels.log
there), the two split-K GEMMs 49.5 us together against eager's 85.8 us. The other ~430 us are not GPU work
but the host's: GemLite's layer prepares and launches its Triton kernel from Python on every call (its CPU
side was not profiled here). At 64 tokens it was 0.287x (profiles/h100/ch13-fp8-a6cbf1a). The same design
launched with its arguments bound once is ch13/optimized_fp8_linear_triton.py (0.0630 ms in the same run). KIND = "pitfall".
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_fp8_linear import mlp_module

KIND = "pitfall"
PRECISION = "fp8"
DEVICES = ("cuda",)
REQUIRES = ("gemlite", "triton")
PROCESSOR = "A16W8_FP8"


def gemlite_prepare(w, processor: str):
    from gemlite import helper
    model = mlp_module(w)
    make = getattr(helper, processor)(device=str(w.inputs["x"].device), dtype=w.inputs["x"].dtype)
    model[0] = make.from_linear(model[0])
    model[2] = make.from_linear(model[2])
    x = w.inputs["x"]

    @torch.no_grad()
    def call():
        return model(x)
    call()  # pick or autotune the kernels now
    return call


def prepare(w):
    return gemlite_prepare(w, PROCESSOR)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
