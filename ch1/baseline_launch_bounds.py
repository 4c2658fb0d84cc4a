"""Batched 8x8 linear solves, one system per thread, compiled without __launch_bounds__.

Workload: 2M independent 8x8 systems A x = b (1M in a quick run), stored as
a struct of arrays (entry (i, j) of every system contiguous, so each warp
load is coalesced). The kernel (launch_bounds.cuh, `solve8_free`) keeps a
system's 64 + 8 values in registers, eliminates without pivoting (the
systems are diagonally dominant) and back-substitutes. Left to itself,
nvcc keeps all of it, and the addresses, in registers: about 160 per
thread (`make -C ch1 launch_bounds_demo` prints ptxas's count), so one
256-thread block fills an SM's 64K registers: 8 of 64 warps, 12.5%
theoretical occupancy. While that block computes, its SM has no loads in
flight.

Per call: A and b (new systems every call). Prepared once: the output
buffer and the compiled kernel.

Bound: memory. Napkin math: 2M x 320 bytes (A and b read, x written) =
671 MB ≈ 0.22 ms at 3 TB/s; 436 FLOPs per system is 1.4 FLOP/byte,
far below the fp32 ridge point.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from common.cuda_ext import load_extension

BOUND = "memory"
DEVICES = ("cuda",)  # a custom CUDA kernel
S = 8
FLOPS_PER_SYSTEM, BYTES_PER_SYSTEM = 436.0, 320.0  # as counted in launch_bounds.cuh


def kernels():
    ext = load_extension("ch1_launch_bounds", "ch1/launch_bounds.cu", "ch1/launch_bounds_binding.cpp")
    _check_against_torch(ext)
    return ext


def _check_against_torch(ext) -> None:
    """Every variant runs this kernel's code, so check it once against torch.linalg.solve in float64."""
    A, b = systems(4096, torch.Generator(device="cuda").manual_seed(0), torch.device("cuda"))
    x = ext.solve8(A, b, torch.empty_like(b), 0)
    ref = torch.linalg.solve(A.double().T.reshape(-1, S, S), b.double().T).T
    err = float((x.double() - ref).norm() / ref.norm())
    if not err < 1e-5:
        raise RuntimeError(f"solve8 disagrees with torch.linalg.solve: relative error {err:.2e}")


def systems(m: int, g: torch.Generator, device) -> tuple[torch.Tensor, torch.Tensor]:
    """m random diagonally dominant systems: A (64, m) and b (8, m), one column per system."""
    A = torch.rand(S * S, m, device=device, generator=g) * 2 - 1
    A[torch.arange(S, device=device) * (S + 1)] += 8.0  # |diagonal| >= 7 > sum of |off-diagonal| (< 7)
    b = torch.rand(S, m, device=device, generator=g) * 2 - 1
    return A.contiguous(), b.contiguous()


def workload(seed: int, device, quick: bool = False) -> Workload:
    m = (1 if quick else 2) << 20
    A, b = systems(m, torch.Generator(device=device).manual_seed(seed), device)
    return Workload(inputs={"A": A, "b": b}, flops=FLOPS_PER_SYSTEM * m, bytes_moved=BYTES_PER_SYSTEM * m,
                    items=m, item_name="systems")


def solver(w: Workload, min_blocks: int):
    """The timed call for one version: min_blocks 0 = no __launch_bounds__, else __launch_bounds__(256, min_blocks)."""
    ext, A, b = kernels(), w.inputs["A"], w.inputs["b"]
    x = torch.empty_like(b)
    return lambda: ext.solve8(A, b, x, min_blocks)


def prepare(w: Workload):
    return solver(w, 0)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
