"""Double-buffered TMA: the Tensor Memory Accelerator copies the next slice (Hopper, sm_90+).

One thread per block issues two `cp.async.bulk.tensor.2d` copies per slice
(a 16 x 128 box of A and a 128 x 16 box of B, described by CUtensorMaps
that the host encodes each call) into the spare buffer and arms an
mbarrier with the 16 KiB it expects; every thread waits on that barrier's
phase before computing the slice. The copy engine generates the addresses,
so the other 255 threads issue no load instructions and spend no
registers on addresses. Same tiling, order and register cap as the
baseline. On a GPU older than sm_90 prepare() raises ExtensionUnavailable
with the reason.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from common import Workload
from ch1.baseline_smem_prefetch import DEVICES, gemm  # noqa: F401


def prepare(w: Workload):
    return gemm(w, "tma")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
