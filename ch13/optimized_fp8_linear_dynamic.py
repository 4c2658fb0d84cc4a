"""Pitfall, called eagerly at 64 tokens: torchao's Float8DynamicActivationFloat8WeightConfig (per-row scales).

Each call quantizes the activation (64 x 4096: a few hundred KB) with a scale per row and runs
`torch._scaled_mm`, the float8 tensor-core GEMM, on float8 weights quantized once with a scale per output
row: the weights cross memory once, at 1 byte each. On paper, half of eager's time.

Measured on the H100 (profiles/h100/ch13-fp8-a6cbf1a): 0.875 ms a call against eager bf16's 0.105 (0.1201x).
The GPU's part is 115 us in 19 kernels (scripts/fp8_linear_kernels.py): the two fp8 GEMMs take 68 us
together (cuBLAS picks 128 x 128 tiles, built for many tokens), 16 small kernels (45 us) quantize the
activation op by op, and one is the GELU. The other ~760 us of the call are not GPU work but the host's:
in a rerun (profiles/h100/ch13-fp8-025372a) the call took 0.967 ms and its kernels the same 115.8 us.
torchao's float8 tensor subclass dispatches each op in Python (its CPU side was not profiled here). At decode sizes a layer's GPU work is tens of microseconds, so a
library's per-call host cost decides; ch13/optimized_fp8_linear_triton.py does the same job in two
kernels (0.0759 ms). KIND = "pitfall": reported with its slowdown.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch13.optimized_fp8_linear_weight_only import quantized_prepare

KIND = "pitfall"
PRECISION = "fp8"
DEVICES = ("cuda",)
REQUIRES = ("torchao",)


def prepare(w):
    from torchao.quantization import PerRow
    return quantized_prepare(w, "Float8DynamicActivationFloat8WeightConfig", granularity=PerRow())


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
