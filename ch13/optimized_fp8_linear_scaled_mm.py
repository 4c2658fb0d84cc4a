"""The same float8 path without torchao: weights quantized once, the activation each call, torch._scaled_mm.

Per-tensor scales (amax / 448), so the few lines are readable: quantize x (abs-max, scale, cast), then
`_scaled_mm(x8, w8, scale_a, scale_b, bias)` twice with the GELU between in bf16. What torchao's dynamic
config does, minus its per-row scales and its kernel choices; a check that the speed comes from the
fp8 GEMM, not the library.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.nn.functional as F

PRECISION = "fp8"
DEVICES = ("cuda",)
FP8, FP8_MAX = torch.float8_e4m3fn, 448.0


def quantize(t: torch.Tensor):
    scale = (t.abs().max().float() / FP8_MAX).clamp(min=1e-12)
    return (t.float() / scale).to(FP8), scale


def prepare(w):
    x = w.inputs["x"]
    # nn.Linear's weight (out x in) transposed is a column-major (in x out) matrix: what _scaled_mm wants
    w_up, s_up = quantize(w.inputs["w_up"])
    w_down, s_down = quantize(w.inputs["w_down"])
    b_up, b_down = w.inputs["b_up"], w.inputs["b_down"]

    def linear(a, wq, ws, b):
        aq, a_s = quantize(a)
        return torch._scaled_mm(aq, wq.t(), scale_a=a_s, scale_b=ws, bias=b, out_dtype=torch.bfloat16)

    @torch.no_grad()
    def call():
        return linear(F.gelu(linear(x, w_up, s_up, b_up), approximate="tanh"), w_down, s_down, b_down)
    return call


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
