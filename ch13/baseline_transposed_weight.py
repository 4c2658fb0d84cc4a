"""A linear layer as nn.Linear computes it: y = F.linear(x, W), W stored (out, in).

Workload (GPU): the up projection of a 70B-class transformer's MLP, 8192 -> 28672, bf16, for a decode
batch of 16 tokens. W is stored as nn.Linear stores it, (out, in) = (28672, 8192), 470 MB. F.linear hands
cuBLAS the view W.t() with its transpose flag set: cuBLAS reads W in its stored layout, and no (in, out) copy
is ever made. This is the layer a competent engineer writes first. On a CPU: 64 tokens, 256 -> 512, fp32,
to be checked. At --quick a GPU runs that small shape in bf16: a smoke test, not the chapter's result.

The variants ask whether the layout matters: optimized_transposed_weight keeps an (in, out) copy made once,
at load time (what a kernel that wants that layout needs); optimized_transposed_weight_per_call makes that
copy on every call instead, the pitfall of feeding such a kernel from nn.Linear's weight.
`ch13/transpose_sweep.py` measures all three from 1 to 4096 tokens, in bf16 and fp32.

Prepared once: W. Per call: x.

Bound: memory. At 16 tokens the product is a matrix-vector-like read of W: 2 x 16 x 8192 x 28672 = 7.5
GFLOP against 470 MB, 16 FLOP per byte, far below the H100's ridge (~250). Napkin math: one read of W,
0.16 ms at 3 TB/s; a transposing copy adds a read and a write of W, 0.31 ms more at the copy rate.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.nn.functional as F

from common import Workload

BOUND = "memory"


def shape(device, quick: bool):
    return (16, 8192, 28672) if torch.device(device).type == "cuda" and not quick else (64, 256, 512)


def linear_workload(seed: int, device, tokens: int, k: int, n: int, dtype) -> Workload:
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(tokens, k, device=device, generator=g).to(dtype)
    w = (torch.randn(n, k, device=device, generator=g) / k**0.5).to(dtype)   # (out, in), as nn.Linear
    return Workload(inputs={"x": x, "w": w}, once=("w",), flops=2.0 * tokens * k * n,
                    bytes_moved=x.element_size() * (x.numel() + w.numel() + tokens * n))


def workload(seed: int, device, quick: bool = False) -> Workload:
    dtype = torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    return linear_workload(seed, device, *shape(device, quick), dtype)


def prepare(w: Workload):
    x, weight = w.inputs["x"], w.inputs["w"]
    return lambda: F.linear(x, weight)   # x @ weight.t(): the view, with cuBLAS's transpose flag


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
