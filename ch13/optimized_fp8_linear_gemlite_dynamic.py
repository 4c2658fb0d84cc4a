"""Pitfall, called eagerly: GemLite's float8 weights and activations (A8W8_fp8_dynamic), one fp8 GEMM a layer.

The counterpart of torchao's dynamic float8 configuration through GemLite's Triton kernels (per-channel
weight scales, per-row activation scales), so the report compares two libraries' kernels on one workload.

Measured on the H100 at 16 tokens (profiles/h100/ch13-07ac287): 0.617 ms a call against eager bf16's 0.1056 in
the same rounds (0.1723x; eager's median over the whole run was 0.1121).
Its GPU work is 59.4 us a call in 8 kernels (scripts/fp8_linear_kernels.py), the two fp8 GEMMs 46.8 us
together and the activation scaling 4.3 us; the other ~560 us are the host's, as in GemLite's weight-only
layer. The kernels show what float8 can do here (1.52x eager's 90.3 us of kernels); the call shows what a
Python layer costs at decode sizes. At 64 tokens it was 0.202x (profiles/h100/ch13-fp8-a6cbf1a). KIND = "pitfall".
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch13.optimized_fp8_linear_gemlite_weight_only import gemlite_prepare

KIND = "pitfall"
PRECISION = "fp8"
DEVICES = ("cuda",)
REQUIRES = ("gemlite", "triton")


def prepare(w):
    return gemlite_prepare(w, "A8W8_fp8_dynamic")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
