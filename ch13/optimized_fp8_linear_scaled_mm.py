"""Pitfall, called eagerly: the float8 path by hand, the activation quantized op by op before each _scaled_mm.

Per-tensor scales (amax / 448), so the few lines are readable: quantize x (abs-max, scale, cast), then
`_scaled_mm(x8, w8, scale_a, scale_b, bias)` twice with the GELU between in bf16. What torchao's dynamic
config does, minus its per-row scales, its kernel choices and its Python dispatch.

Measured on the H100 at 16 tokens (profiles/h100/ch13-07ac287): 0.29x, the median of its rounds' ratios over
eager bf16 (0.116 ms a call in those rounds; 0.1121 over the whole run). Its own calls ran at two levels, 0.362
and 0.589 ms, about half at each, so its median, 0.493 ms, falls between them (0.2988 against 0.1017, 0.345x, in
the run at d19f8c2). Yet its two fp8 GEMMs take 23.8 + 24.0 us against eager's bf16 GEMMs' 42.7 + 43.1 us: the
float8 tensor cores do win. The loss is everything around them: 21 kernels a call (scripts/fp8_linear_kernels.py), most
of them quantizing the activation (abs, amax, divide, cast, each a kernel over 16 x 4096 or 16 x 14336
values), and the call's other 200-400 us, which are not GPU work: the host launching all 21 (at 64 tokens:
0.473x, profiles/h100/ch13-fp8-a6cbf1a). Quantizing in the GEMM's prologue, or compiling the call, is the
fix this file does not make. KIND = "pitfall": reported with its slowdown.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.nn.functional as F

KIND = "pitfall"
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
