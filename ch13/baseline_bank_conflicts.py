"""Transpose an 8192 x 8192 fp32 matrix through 32 x 32 shared-memory tiles, unpadded: 32-way bank conflicts.

Each block loads a tile row by row (coalesced) and writes it out column by column of the tile, so that the
global stores are coalesced too. The column read tile[tx][ty + j] makes the 32 threads of a warp read
addresses 32 floats apart: all in one of shared memory's 32 banks, served one after another.
Kernel: ch13/bottlenecks.cuh, transpose_smem<0>. The ncu metric that shows it:
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum (~31 extra wavefronts per warp-wide read).

Per call: x. Prepared once: the output buffer and the compiled extension. GPU only.

Bound: memory. Napkin math: read 256 MiB + write 256 MiB ≈ 0.18 ms at ~3 TB/s.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from common.cuda_ext import load_extension

BOUND = "memory"
DEVICES = ("cuda",)
PADDED = False


def kernels():
    return load_extension("ch13_bottlenecks", "ch13/bottlenecks.cu", "ch13/bottlenecks_binding.cpp")


def workload(seed: int, device, quick: bool = False) -> Workload:
    n = 2048 if quick else 8192
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(n, n, device=device, generator=g)
    return Workload(inputs={"x": x}, bytes_moved=2.0 * x.numel() * 4)


def prepare(w: Workload, padded: bool = PADDED):
    ext, x = kernels(), w.inputs["x"]
    out = torch.empty(x.shape[1], x.shape[0], device=x.device)
    return lambda: ext.transpose(x, out, padded)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
