"""A linear layer with bias, then GELU, as nn.Linear and F.gelu run them eagerly (bf16 on a GPU, fp32 on a CPU).

Workload: 16384 tokens x 4096 -> 4096, y = gelu(x @ W + b) with the tanh GELU. torch.addmm (what F.linear
calls) hands the bias to cuBLASLt, which adds it in the GEMM's epilogue: the matmul writes x @ W + b once. GELU
is a second kernel: it reads the 128 MiB activation back and writes it again, 2 passes a GELU in the epilogue
never makes. (The bias as an op of its own, x @ W then + b, costs 2 more: optimized_fused_gelu_separate_bias.py,
a pitfall.)

Prepared once: the weight W and bias b. Per call: the activation x.

A sweep sets the tokens (the rows of x; the layer stays 4096 -> 4096, or 512 -> 512 on a CPU and with
--quick) and the dtype: `benchmark.py --pair fused_gelu --sizes 2048 16384 --dtypes bfloat16 float16`.
Not float32: the Triton variant's tl.dot would compute it in TF32.

Bound: compute. Napkin math: 550 GFLOP ≈ 0.75 ms at ~730 TFLOP/s; the GELU pass moves 256 MiB ≈ 0.09 ms at
~3 TB/s, so fusing it can buy ~1.1x at most.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.nn.functional as F

from common import Workload

BOUND = "compute"
SWEEP = {"size": "tokens (rows of x)", "dtype": ("bfloat16", "float16")}


def workload(seed: int, device, quick: bool = False, size: int | None = None, dtype: str | None = None) -> Workload:
    on_gpu = torch.device(device).type == "cuda"
    tokens, d_in, d_out = (16384, 4096, 4096) if on_gpu and not quick else (512, 512, 512)
    tokens = size or tokens
    # a CPU's bf16 matmul is a slow fallback: fp32 there unless a sweep asks for a dtype
    dtype = getattr(torch, dtype) if dtype else torch.bfloat16 if on_gpu else torch.float32
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(tokens, d_in, device=device, generator=g).to(dtype)
    w = (torch.randn(d_in, d_out, device=device, generator=g) / d_in**0.5).to(dtype)
    b = torch.randn(d_out, device=device, generator=g).to(dtype)
    return Workload(inputs={"x": x, "w": w, "b": b}, once=("w", "b"), flops=2.0 * tokens * d_in * d_out,
                    bytes_moved=x.element_size() * (x.numel() + w.numel() + b.numel() + tokens * d_out))


def prepare(wl: Workload):
    x, w, b = wl.inputs["x"], wl.inputs["w"], wl.inputs["b"]

    def layer():
        y = torch.addmm(b, x, w)  # F.linear's op, W stored (in, out) as the variants take it: the bias in the epilogue
        return F.gelu(y, approximate="tanh")
    return layer


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
