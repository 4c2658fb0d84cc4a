"""GemLite's float8 weights and activations (A8W8_fp8_dynamic): the activation quantized per call, one fp8 GEMM.

The counterpart of torchao's dynamic float8 configuration through GemLite's Triton kernels (per-channel
weight scales, per-row activation scales), so the report compares two libraries' kernels on one workload.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch13.optimized_fp8_linear_gemlite_weight_only import gemlite_prepare

PRECISION = "fp8"
DEVICES = ("cuda",)
REQUIRES = ("gemlite", "triton")


def prepare(w):
    return gemlite_prepare(w, "A8W8_fp8_dynamic")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
