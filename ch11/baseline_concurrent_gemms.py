"""16 independent small GEMMs, one after another on one stream.

Workload: 16 unrelated fp32 products of 256 x 4096 by 4096 x 256 (say, 16
small models, one request each), computed by a plain tiled kernel
(tile_gemm.cu) with one thread block per 64 x 64 output tile and no split of
K: each product is 16 blocks, so it keeps 16 of the H100's 132 SMs busy
while the rest sit idle, and on one stream the next product cannot start
until the previous one ends. (cuBLAS avoids this for a single large-K GEMM
by splitting K; ch11/probe_concurrency.py shows that streams then add little.
Kernels that cannot split their work, such as many fused kernels, are where
streams pay.)

Prepared once: the 16 models' weights b and the output buffer. Per call: the
16 requests' activations a.

Bound: compute, underfilled: 16 x 0.54 GFLOP = 8.6 GFLOP, at a rate set by
how many SMs are in use.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from common.cuda_ext import load_extension

BOUND = "compute"
DEVICES = ("cuda",)  # a custom CUDA kernel
GEMMS, M, N, K = 16, 256, 256, 4096


def kernels():
    ext = load_extension("ch11_tile_gemm", "ch11/tile_gemm.cu", "ch11/tile_gemm_binding.cpp")
    _check_against_cublas(ext)
    return ext


def _check_against_cublas(ext) -> None:
    """Both sides of the pair use this kernel, so check it once against cuBLAS in fp64."""
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g)
    b = torch.randn(K, N, device="cuda", generator=g)
    ref = (a.double() @ b.double()).float()
    err = float((ext.tile_gemm(a, b, torch.empty_like(ref)) - ref).norm() / ref.norm())
    if not err < 1e-5:
        raise RuntimeError(f"tile_gemm disagrees with cuBLAS: relative error {err:.2e}")


def workload(seed: int, device, quick: bool = False) -> Workload:
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(GEMMS, M, K, device=device, generator=g)
    b = torch.randn(GEMMS, K, N, device=device, generator=g) / K**0.5
    return Workload(inputs={"a": a, "b": b}, once=("b",), flops=2.0 * GEMMS * M * N * K,
                    bytes_moved=4.0 * GEMMS * (M * K + K * N + M * N), items=GEMMS, item_name="GEMMs")


def prepare(w: Workload):
    ext = kernels()
    a, b = list(w.inputs["a"].unbind(0)), list(w.inputs["b"].unbind(0))
    out = torch.empty(GEMMS, M, N, device=w.inputs["a"].device)
    outs = list(out.unbind(0))

    def run():
        for i in range(GEMMS):
            ext.tile_gemm(a[i], b[i], outs[i])
        return out
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
