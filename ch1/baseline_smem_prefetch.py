"""A tiled fp32 GEMM whose shared-memory tiles are loaded synchronously.

Workload: C = A @ B, 4096 x 4096 x 4096 fp32 (1024^3 in a quick run), by
a hand-written kernel (smem_prefetch.cuh, `sgemm_sync`): each 256-thread
block owns a 128 x 128 tile of C and walks K in 16-wide slices; for every
slice the threads copy their share of A and B from global memory into
shared memory, wait at __syncthreads, and only then compute 8 x 8 outputs
each. The load latency of every slice is exposed, hidden only by the other
block resident on the SM. Three variants share this tiling, summation
order and register cap, so they return identical bits; only the loads
differ. The kernel is checked once against torch.matmul in fp32.

Per call: a (the activations). Prepared once: b (a layer's weights,
Workload.once), the output buffer and the compiled kernel.

Bound: compute (fp32 FMA). Napkin math: 2 x 4096^3 = 137 GFLOP, 2.7 ms at
the fp32 ceiling of 51.7 TFLOP/s measured on the H100; per slice a block
reads 16 KiB for 524K FLOPs (32 FLOP/byte), so what the loads cost is
latency, not bandwidth.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from common.cuda_ext import ExtensionUnavailable, load_extension

BOUND = "compute"
DEVICES = ("cuda",)  # a custom CUDA kernel
VERSIONS = {"sync": 0, "cp_async": 1, "tma": 2}
NEEDS = {"cp_async": "sm_80 (cp.async)", "tma": "sm_90 (TMA, Hopper or newer)"}


def kernels():
    ext = load_extension("ch1_smem_prefetch", "ch1/smem_prefetch.cu", "ch1/smem_prefetch_binding.cpp")
    _check_against_torch(ext)
    return ext


def _check_against_torch(ext) -> None:
    """Every variant shares this kernel's arithmetic, so check it once against torch.matmul (fp32, TF32 off)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(256, 4096, device="cuda", generator=g)
    b = torch.randn(4096, 256, device="cuda", generator=g) / 64
    ref = torch.mm(a.double(), b.double())
    err = float((ext.sgemm(a, b, torch.empty(256, 256, device="cuda"), 0).double() - ref).norm() / ref.norm())
    if not err < 1e-5:
        raise RuntimeError(f"sgemm_sync disagrees with a float64 matmul: relative error {err:.2e}")


def workload(seed: int, device, quick: bool = False) -> Workload:
    n = 1024 if quick else 4096
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(n, n, device=device, generator=g)
    b = torch.randn(n, n, device=device, generator=g) / n**0.5
    return Workload(inputs={"a": a, "b": b}, once=("b",), flops=2.0 * n**3, bytes_moved=4.0 * 3 * n * n)


def gemm(w: Workload, version: str):
    """The timed call for one way of loading the tiles ("sync", "cp_async" or "tma")."""
    ext, a, b = kernels(), w.inputs["a"], w.inputs["b"]
    if not ext.supported(VERSIONS[version]):
        raise ExtensionUnavailable(f"{version} needs {NEEDS[version]}; this GPU is sm_"
                                   + "".join(map(str, torch.cuda.get_device_capability())))
    c = torch.empty(a.shape[0], b.shape[1], device=a.device)
    return lambda: ext.sgemm(a, b, c, VERSIONS[version])


def prepare(w: Workload):
    return gemm(w, "sync")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
