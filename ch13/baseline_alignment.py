"""A linear layer whose dimensions are not multiples of 16: y = x @ W with K = N = 4090.

Workload (GPU): 8192 tokens x 4090 -> 4090, bf16. A row of x is 8180 bytes, so rows start at
addresses that are multiples of 4 bytes but not of 16: cuBLAS cannot use its kernels that load 16-byte
vectors (and TMA, which needs 16-byte-aligned strides), and falls back to slower ones.
On a CPU: 512 x 250 -> 250, fp32 (a CPU's BLAS cares much less; the pair runs to be checked).
At --quick a GPU runs that small shape in bf16: a smoke test that the code runs, not the chapter's result.

Prepared once: W. Per call: x.

Bound: compute. Napkin math: 2 x 8192 x 4090 x 4090 = 274 GFLOP ≈ 0.42 ms at ~650 TFLOP/s.
`ch13/alignment_sweep.py` draws the cost curve as the dimension crosses 4080..4112.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "compute"
ALIGN = 16  # elements: 32 bytes of bf16, a multiple of the 16 bytes vector loads and TMA need (and fp8's 16)


def shape(device, quick: bool):
    return (8192, 4090, 4090) if torch.device(device).type == "cuda" and not quick else (512, 250, 250)


def workload(seed: int, device, quick: bool = False) -> Workload:
    tokens, k, n = shape(device, quick)
    dtype = torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(tokens, k, device=device, generator=g).to(dtype)
    w = (torch.randn(k, n, device=device, generator=g) / k**0.5).to(dtype)
    return Workload(inputs={"x": x, "w": w}, once=("w",), flops=2.0 * tokens * k * n,
                    bytes_moved=x.element_size() * (x.numel() + w.numel() + tokens * n))


def padded(n: int, align: int = ALIGN) -> int:
    return -(-n // align) * align


def prepare(w: Workload):
    x, weight = w.inputs["x"], w.inputs["w"]
    return lambda: x @ weight


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
