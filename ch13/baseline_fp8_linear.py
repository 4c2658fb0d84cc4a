"""An MLP's two linear layers in bf16, eager: y = down(gelu(up(x))), as nn.Linear runs them.

Workload (GPU): 16 tokens (a decode batch: 16 sequences, one new token each), 4096 -> 14336 -> 4096
(Llama-3-8B's MLP widths, no gate), bf16. On a CPU and --quick: 16 tokens, 256 -> 512 -> 256, fp32.
ch13/fp8_weight_only.py's sweep times the same layers at 1, 16 and 64 tokens.

Prepared once: the weights and biases (nn.Linear layout, out x in). Per call: x.

Bound: memory. Napkin math: at 16 tokens a GEMM does 2 x 16 = 32 FLOPs per weight element read (2 bytes
in bf16): far below the ~220 FLOPs/byte an H100 needs to be compute-bound. One call reads the weights,
2 x 4096 x 14336 x 2 bytes = 235 MB ≈ 0.078 ms at ~3 TB/s. In float8 the same weights are 117 MB:
a float8 GEMM could take half the time, if the weights reach the tensor cores as float8.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import Workload

BOUND = "memory"
# The biases are large enough that forgetting one fails verification. The float8 variants are checked at fp8's
# tolerance (0.15 norm-wise); with biases of 0.1 a float8 MLP without its up bias read 0.11 and verified. At 0.5
# it reads 0.38, and without its down bias 0.57, on an H200 with the Triton kernel (profiles/h200/ch13-45a308d;
# tests/test_ch13.py::test_the_fp8_tolerance_catches_a_float8_mlp_that_drops_a_bias).
BIAS_STD = 0.5


def workload(seed: int, device, quick: bool = False) -> Workload:
    on_gpu = torch.device(device).type == "cuda"
    tokens, d, h = (16, 4096, 14336) if on_gpu and not quick else (16, 256, 512)
    dtype = torch.bfloat16 if on_gpu else torch.float32
    g = torch.Generator(device=device).manual_seed(seed)
    wg = torch.Generator(device=device).manual_seed(1234)  # the same layer for every seed
    x = torch.randn(tokens, d, device=device, generator=g).to(dtype)
    w_up = (torch.randn(h, d, device=device, generator=wg) / d**0.5).to(dtype)
    b_up = (BIAS_STD * torch.randn(h, device=device, generator=wg)).to(dtype)
    w_down = (torch.randn(d, h, device=device, generator=wg) / h**0.5).to(dtype)
    b_down = (BIAS_STD * torch.randn(d, device=device, generator=wg)).to(dtype)
    es = x.element_size()
    return Workload(inputs={"x": x, "w_up": w_up, "b_up": b_up, "w_down": w_down, "b_down": b_down},
                    once=("w_up", "b_up", "w_down", "b_down"), flops=2.0 * tokens * 2 * d * h,
                    bytes_moved=es * (2 * d * h + h + d + 2 * tokens * d), items=tokens, item_name="tokens")


def mlp_module(w) -> nn.Module:
    """The layers as nn.Linear modules (what torchao's quantize_ rewrites), with the workload's weights."""
    w_up, w_down = w.inputs["w_up"], w.inputs["w_down"]
    up = nn.Linear(w_up.shape[1], w_up.shape[0], device=w_up.device, dtype=w_up.dtype)
    down = nn.Linear(w_down.shape[1], w_down.shape[0], device=w_up.device, dtype=w_up.dtype)
    with torch.no_grad():
        up.weight.copy_(w_up), up.bias.copy_(w.inputs["b_up"])
        down.weight.copy_(w_down), down.bias.copy_(w.inputs["b_down"])
    return nn.Sequential(up, nn.GELU(approximate="tanh"), down).eval()


def prepare(w: Workload):
    x = w.inputs["x"]
    w_up, b_up, w_down, b_down = (w.inputs[k] for k in ("w_up", "b_up", "w_down", "b_down"))

    @torch.no_grad()
    def call():
        return F.linear(F.gelu(F.linear(x, w_up, b_up), approximate="tanh"), w_down, b_down)
    return call


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
