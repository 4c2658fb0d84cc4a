"""Pitfall: torchao's Float8WeightOnlyConfig, slower than the bf16 layers it replaces.

The weights are stored in float8 (half the bytes), but the activation stays bf16, and a GEMM needs both
operands in one type: the float8 weight is dequantized to bf16 on every call (read 1 byte, write 2 bytes
per weight) and then fed to the same bf16 GEMM, which reads the 2-byte copy again. Per call that is
1 + 2 + 2 = 5 bytes per weight against eager's 2: ~2.5x the memory traffic in a memory-bound layer.
The profiler shows it: a dequantize (element-wise, or a copy kernel) before each GEMM (run with
`benchmark.py --pair ch13/fp8_linear --profile torch`). Weight-only float8 saves memory capacity,
not time. Measured on the H100 at 16 tokens (profiles/h100/ch13-07ac287): 1.115 ms a call against eager's 0.1121
(0.097x); of its 1114.9 us of kernels a call, 1006.2 us are the three bf16 rewrite passes (an element-wise
kernel, a copy and a bf16 cast, each twice: scripts/fp8_linear_kernels.py) and 98.4 us the two bf16 GEMMs.
KIND = "pitfall": reported with its slowdown.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_fp8_linear import mlp_module

KIND = "pitfall"
PRECISION = "fp8"
DEVICES = ("cuda",)
REQUIRES = ("torchao",)
CONFIG = "Float8WeightOnlyConfig"


def quantized_prepare(w, config_name: str, **kwargs):
    import torchao.quantization as q
    model = mlp_module(w)
    q.quantize_(model, getattr(q, config_name)(**kwargs))
    x = w.inputs["x"]

    @torch.no_grad()
    def call():
        return model(x)
    return call


def prepare(w):
    return quantized_prepare(w, CONFIG)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
