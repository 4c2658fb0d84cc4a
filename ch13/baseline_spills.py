"""A kernel forced to spill registers: rows of 32 floats mixed for 8 rounds, under __launch_bounds__(256, 8).

Each thread keeps its row (32 floats) and the next round's values (32 more) live. Asking for 8 blocks of
256 threads per SM caps it at 65536 / 2048 = 32 registers per thread: ptxas spills (sm_90, this repo's
nvcc: 288 bytes of spill stores, 316 of loads per thread) to local memory, which lives in L1 and DRAM.
Kernel: ch13/bottlenecks.cuh, mix<8>. ncu: l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum > 0.

Per call: x (4 M rows of 32 floats). Prepared once: the output buffer and the extension. GPU only.

Bound: memory. Napkin math: 4 M rows x 32 floats = 512 MiB read + 512 MiB written ≈ 0.36 ms at ~3 TB/s;
the arithmetic (8 rounds x 32 x 6 FLOPs per row) is 25 GFLOP, a few percent of the fp32 peak.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_bank_conflicts import kernels
from common import Workload

BOUND = "memory"
DEVICES = ("cuda",)


def workload(seed: int, device, quick: bool = False) -> Workload:
    rows = (1 if quick else 4) << 20
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.rand(rows, 32, device=device, generator=g)
    return Workload(inputs={"x": x}, flops=rows * 32 * 8 * 6.0, bytes_moved=2.0 * x.numel() * 4)


def prepare(w: Workload, spills: bool = True):
    ext, x = kernels(), w.inputs["x"]
    y = torch.empty_like(x)
    return lambda: ext.mix(x, y, spills)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
