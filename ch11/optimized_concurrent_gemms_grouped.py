"""The same 16 GEMMs in one launch: a grouped GEMM, one block per output tile of every product.

When you own the kernel, you need not ask streams to overlap it: one grid of
245 blocks covers every 64 x 64 tile of all 16 products, and each block looks
its product up in a small table (A, B, C, N, K, first tile, tiles) on the device
(grouped_tile_gemm in tile_gemm.cu, the idea of CUTLASS's grouped GEMM). The
block scheduler then fills every SM from the start, no stream waits for its
previous GEMM, and the host issues one launch instead of 16. The per-tile
source is the baseline's, and every run found the outputs equal bit for bit.

Products are numbered longest K first, so the longest-running blocks start
first and the short ones fill the gaps at the end (the order only moves blocks
between SMs; each tile is computed the same way): 0.669 ms, against 0.703 ms in
SHAPES order.

On the H100: 0.667 ms, 7.56x (7.61-7.63x in four runs at b77aede), with p10 to
p90 within 2.2% in every run. Where the time goes, read from an instrumented
copy with this kernel's 80 registers: the 245 blocks sit two to an SM on 113
SMs and alone on 19, all starting together, and the call ends with the 20
blocks of K = 8192, which take 0.71-0.72 ms in the copy sharing their SMs; the
real kernel's 16-block 256 x 256 x 8192 product alone takes 0.40 ms. One way
to give those blocks an SM each is a kernel that places tiles itself (a
persistent kernel); this one leaves placement to the hardware's block
scheduler.

Prepared once: the device table, built from the baseline's buffers, besides
the baseline's weights and output buffer. The table holds raw pointers, so it
stays valid only while the activations arrive in the same buffer, as here (the
harness refills per-call inputs in place). A program that receives each step's
activations in new tensors would copy them into this buffer, or rebuild and
upload the table every step, a cost this pair does not time.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from common import Workload
from ch11.baseline_concurrent_gemms import LONGEST_K_FIRST, kernels, operands

DEVICES = ("cuda",)


def prepare(w: Workload):
    ext = kernels()
    a, b, out, outs = operands(w)
    order = LONGEST_K_FIRST  # the baseline's SHAPES, longest K first
    table, tiles = ext.grouped_table([a[i] for i in order], [b[i] for i in order], [outs[i] for i in order])
    buffers = (w.inputs["a"], w.inputs["b"], out)  # the storage the table points into, kept alive with run

    def run():
        ext.grouped_tile_gemm(table, tiles)
        return buffers[2]
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
