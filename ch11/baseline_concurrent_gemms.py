"""16 independent small GEMMs of different shapes, one after another on one stream.

Workload: 16 small models of different widths, each serving one batch of
requests: product i is an fp32 activation block of M_i x K_i times that
model's K_i x N_i weights (SHAPES; M from 64 to 512 rows, N from 128 to 512,
K from 1024 to 8192). The shapes differ, so the 16 products are not one
batched GEMM (`bmm` takes equal shapes). Each is computed by a plain tiled
kernel (tile_gemm.cu) with one thread block per 64 x 64 output tile and no
split of K: a product is 4 to 32 blocks, so it keeps at most 32 of the H100's
132 SMs busy while the rest sit idle, and on one stream the next product
cannot start until the previous one ends. (cuBLAS avoids this for a single
large-K GEMM by splitting K; ch11/probe_concurrency.py shows that streams then
add little. Kernels that cannot split their work, such as many fused kernels,
are where streams pay.)

Prepared once: the 16 models' weights b (one flat buffer, a view per model)
and the output buffer. Per call: the 16 batches' activations a (one flat
buffer). The output is every product's C, flattened and concatenated.

Bound: compute, underfilled: 7.45 GFLOP in all (245 output tiles), at a rate
set by how many SMs are in use. A tile's time grows with its K, so no schedule
of these tiles ends before the 20 tiles with K = 8192 do: 0.40 ms on an H100
with an SM each (one 256 x 256 x 8192 product alone, 16 blocks). On one
stream the 16 products' times add up: 5.04 ms, 1.48 TFLOP/s
(profiles/h100/ch11-concurrent-8cd9c94/).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import math

import torch

from common import Workload
from common.cuda_ext import load_extension

BOUND = "compute"
DEVICES = ("cuda",)  # a custom CUDA kernel
# (M, N, K) of each product, in units of (64, 64, 1024): tiles are 64 x 64, and K is never split.
SHAPES = tuple((64 * m, 64 * n, 1024 * k) for m, n, k in (
    (8, 4, 4), (4, 8, 2), (2, 4, 8), (6, 2, 4), (4, 4, 4), (3, 6, 2), (7, 2, 6), (2, 2, 8),
    (5, 4, 3), (4, 3, 4), (8, 2, 2), (2, 6, 6), (6, 4, 1), (4, 2, 8), (3, 3, 4), (1, 8, 4)))
GEMMS = len(SHAPES)
# The products in the order the optimized variants issue them: longest K first, since those tiles take longest.
LONGEST_K_FIRST = tuple(sorted(range(GEMMS), key=lambda i: -SHAPES[i][2]))


def kernels():
    ext = load_extension("ch11_tile_gemm", "ch11/tile_gemm.cu", "ch11/tile_gemm_binding.cpp")
    _check_against_cublas(ext)
    return ext


def _check_against_cublas(ext) -> None:
    """Every variant uses this kernel's tile code, so check it once against cuBLAS in fp64."""
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(128, 4096, device="cuda", generator=g)
    b = torch.randn(4096, 192, device="cuda", generator=g)
    ref = (a.double() @ b.double()).float()
    err = float((ext.tile_gemm(a, b, torch.empty_like(ref)) - ref).norm() / ref.norm())
    if not err < 1e-5:
        raise RuntimeError(f"tile_gemm disagrees with cuBLAS: relative error {err:.2e}")


def views(flat: torch.Tensor, shapes) -> list[torch.Tensor]:
    """Consecutive 2-D views of one flat buffer, one per shape."""
    return [part.view(shape) for part, shape in zip(flat.split([math.prod(s) for s in shapes]), shapes)]


def operands(w: Workload) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor, list[torch.Tensor]]:
    """Each product's a and b (views of the inputs), the flat output buffer and each product's view of it."""
    a = views(w.inputs["a"], [(m, k) for m, n, k in SHAPES])
    b = views(w.inputs["b"], [(k, n) for m, n, k in SHAPES])
    out = torch.empty(sum(m * n for m, n, k in SHAPES), device=w.inputs["a"].device)
    return a, b, out, views(out, [(m, n) for m, n, k in SHAPES])


def workload(seed: int, device, quick: bool = False) -> Workload:
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(sum(m * k for m, n, k in SHAPES), device=device, generator=g)
    b = torch.cat([torch.randn(k * n, device=device, generator=g) / k**0.5 for m, n, k in SHAPES])
    return Workload(inputs={"a": a, "b": b}, once=("b",), flops=sum(2.0 * m * n * k for m, n, k in SHAPES),
                    bytes_moved=4.0 * sum(m * k + k * n + m * n for m, n, k in SHAPES), items=GEMMS,
                    item_name="GEMMs")


def prepare(w: Workload):
    ext = kernels()
    a, b, out, outs = operands(w)

    def run():
        for i in range(GEMMS):
            ext.tile_gemm(a[i], b[i], outs[i])
        return out
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
