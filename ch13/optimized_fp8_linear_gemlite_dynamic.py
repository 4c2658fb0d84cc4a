"""Pitfall, called eagerly: GemLite's float8 weights and activations (A8W8_fp8_dynamic), one fp8 GEMM a layer.

The counterpart of torchao's dynamic float8 configuration through GemLite's Triton kernels (per-channel
weight scales, per-row activation scales), so the report compares two libraries' kernels on one workload.

Measured on the H100 (profiles/h100/ch13-fp8-a6cbf1a): 0.520 ms a call against eager bf16's 0.105 (0.202x),
with the least GPU work of any variant: 62.5 us a call in 7 kernels (scripts/fp8_linear_kernels.py), the
two fp8 GEMMs 49.2 us together and the activation scaling 5 us. The other ~457 us are not GPU work but
the host's, as in GemLite's weight-only layer (a rerun: 0.726 ms a call, 62.4 us of kernels). The kernels show what float8 can do here (1.45x eager's 90.6 us of kernels);
the call shows what a Python layer costs at decode sizes. KIND = "pitfall": reported with its slowdown.
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
