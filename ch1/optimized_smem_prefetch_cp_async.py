"""Double-buffered cp.async: the next slice is copied while the current one is computed.

Two shared-memory buffers per operand. Before computing slice s, each
thread issues `cp.async.cg` copies of its part of slice s+1 into the other
buffer: global to shared directly, without passing through registers and
without waiting. `cp.async.wait_group 1` then waits only for slice s,
which was issued one iteration earlier and has had a whole slice of
compute to arrive. The block's own math now hides its load latency, not
just the other resident block's. Same tiling, order and register cap as the
baseline (sm_80 or newer).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from common import Workload
from ch1.baseline_smem_prefetch import DEVICES, gemm  # noqa: F401


def prepare(w: Workload):
    return gemm(w, "cp_async")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
