"""A linear layer at prefill size in bf16: y = x @ W.T, 8192 tokens, 8192 -> 8192 (F.linear, cuBLAS).

Workload (GPU): x 8192 x 8192, W 8192 x 8192 (out x in, nn.Linear's layout), bf16. On a CPU and at
--quick: 256 x 256 -> 256 (fp32 on a CPU): a smoke test that the code runs, not the chapter's result.

Prepared once: W. Per call: x (a new batch of tokens every step).

Bound: compute. Napkin math: 2 x 8192^3 = 1.10 TFLOP; 8192 tokens make ~2700 FLOPs per byte moved (x, W
and y), far past the ~250 FLOP/byte where an H100 stops waiting on memory. At the 751 TFLOP/s of dense bf16
the harness measured in the chapter's run (profiles/h100/ch13-07ac287, its "Measured ceilings") that is
≈ 1.46 ms. The H100's float8 tensor cores have twice bf16's peak (that run measured 1470 TFLOP/s): the pair
is chapter 13's float8 on the side where it pays in FLOPs, where fp8_linear is the side where it pays in bytes.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.nn.functional as F

from common import Workload

BOUND = "compute"


def workload(seed: int, device, quick: bool = False) -> Workload:
    on_gpu = torch.device(device).type == "cuda"
    tokens, d_in, d_out = (8192, 8192, 8192) if on_gpu and not quick else (256, 256, 256)
    dtype = torch.bfloat16 if on_gpu else torch.float32
    g = torch.Generator(device=device).manual_seed(seed)
    wg = torch.Generator(device=device).manual_seed(1234)  # the same layer for every seed
    x = torch.randn(tokens, d_in, device=device, generator=g).to(dtype)
    w = (torch.randn(d_out, d_in, device=device, generator=wg) / d_in**0.5).to(dtype)
    return Workload(inputs={"x": x, "w": w}, once=("w",), flops=2.0 * tokens * d_in * d_out,
                    bytes_moved=x.element_size() * (x.numel() + w.numel() + tokens * d_out),
                    items=tokens, item_name="tokens")


def prepare(w: Workload):
    x, weight = w.inputs["x"], w.inputs["w"]
    return lambda: F.linear(x, weight)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
