"""Pitfall, called eagerly: torchao's Float8DynamicActivationFloat8WeightConfig (per-tensor scales).

Each call quantizes the activation (16 x 4096) with one scale and runs `torch._scaled_mm`, the float8
tensor-core GEMM, on float8 weights quantized once: the weights cross memory once, at 1 byte each. On
paper, half of eager's time.

Per-tensor, not torchao's per-row granularity: at 16 tokens per-row scales fail on the H100 inside
cuBLASLt (CUBLAS_STATUS_NOT_SUPPORTED from cublasLtMatmulAlgoGetHeuristic: no row-wise-scaled fp8 algorithm
for this shape; profiles/h100/ch13-951f95d/ch13.log), where at 64 tokens they ran (0.875 ms a call against
eager's 0.105, 0.1201x: profiles/h100/ch13-fp8-a6cbf1a; 115 us of GPU work in 19 kernels, the rest the
host's: torchao's float8 tensor subclass dispatches each op in Python). At decode sizes a layer's GPU work
is tens of microseconds, so a library's per-call host cost decides; ch13/optimized_fp8_linear_triton.py
does the same job in two kernels. Per-tensor at 16 tokens
(profiles/h100/ch13-07ac287): 0.902 ms a call against eager's 0.0954 in the same rounds (0.1061x; eager's median
over the whole run was 0.1121); 96.0 us of GPU work in 21 kernels (scripts/fp8_linear_kernels.py: the two fp8
GEMMs 48.0 us, the rest quantizing the activation op by op), the other ~800 us the host's. KIND = "pitfall".
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch13.optimized_fp8_linear_weight_only import quantized_prepare

KIND = "pitfall"
PRECISION = "fp8"
DEVICES = ("cuda",)
REQUIRES = ("torchao",)


def prepare(w):
    from torchao.quantization import PerTensor
    return quantized_prepare(w, "Float8DynamicActivationFloat8WeightConfig", granularity=PerTensor())


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
