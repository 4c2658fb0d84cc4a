"""The same layer in float8 (e4m3) through torch._scaled_mm, padded to multiples of 16, which fp8 requires.

`_scaled_mm` refuses dimensions that are not multiples of 16: in fp8, alignment is not a speed question but
a precondition. W is quantized once (per-tensor scale = amax / 448, padded, stored column-major as the
fp8 GEMM wants its second operand); each call quantizes x with its own per-tensor scale into the padded
buffer and runs the fp8 tensor-core GEMM, which has twice bf16's peak. Quantizing x takes a few eager element-wise
passes (abs-max, scale, cast; ~0.1-0.2 ms at this size), paid every call. GPU only (sm_89 and later).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_alignment import padded

PRECISION = "fp8"
DEVICES = ("cuda",)
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


def quantize_weight(weight: torch.Tensor, k_pad: int, n_pad: int):
    """(k_pad x n_pad column-major fp8 weight, its scale): zeros past the real rows and columns."""
    k, n = weight.shape
    scale = (weight.abs().max().float() / FP8_MAX).clamp(min=1e-12)
    wq = torch.zeros(n_pad, k_pad, dtype=FP8, device=weight.device)
    wq[:n, :k] = (weight.float() / scale).t().to(FP8)
    return wq.t(), scale  # a column-major view: what _scaled_mm wants for its second operand


def prepare(w):
    x, weight = w.inputs["x"], w.inputs["w"]
    k, n = weight.shape
    wq, w_scale = quantize_weight(weight, padded(k), padded(n))
    xq = torch.zeros(x.shape[0], padded(k), dtype=FP8, device=x.device)

    def call():
        x_scale = (x.abs().max().float() / FP8_MAX).clamp(min=1e-12)
        xq[:, :k].copy_((x.float() / x_scale).to(FP8))
        y = torch._scaled_mm(xq, wq, scale_a=x_scale, scale_b=w_scale, out_dtype=torch.bfloat16)
        return y[:, :n]
    return call


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
