"""torchao's Float8DynamicActivationFloat8WeightConfig (per-row scales): both operands in float8, one fp8 GEMM.

Each call quantizes the activation (64 x 4096: a few hundred KB, tiny) with a scale per row and runs
`torch._scaled_mm`, the float8 tensor-core GEMM, on float8 weights quantized once with a scale per output
row: the weights cross memory once, at 1 byte each, half of bf16's bytes. This is the configuration that
is faster; the profiler shows one quantize kernel and one fp8 GEMM per layer.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch13.optimized_fp8_linear_weight_only import quantized_prepare

PRECISION = "fp8"
DEVICES = ("cuda",)
REQUIRES = ("torchao",)


def prepare(w):
    from torchao.quantization import PerRow
    return quantized_prepare(w, "Float8DynamicActivationFloat8WeightConfig", granularity=PerRow())


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
