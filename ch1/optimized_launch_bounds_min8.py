"""Pitfall: __launch_bounds__(256, 8) forces 32 registers per thread for full occupancy.

Eight resident blocks leave 65536 / 2048 = 32 registers per thread for a
kernel whose system alone is 72 values: ptxas spills most of the matrix
(close to 2 KB of spill stores per thread), the spills of 2048 threads
overflow the SM's L1 into L2, and every elimination step reloads what it
needs from there. 100% theoretical occupancy, paid for in memory traffic
that exceeds the kernel's useful bytes several times over. Kept to show
that occupancy is a means: the cap that maximizes it is rarely the fastest.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from common import Workload
from ch1.baseline_launch_bounds import DEVICES, solver  # noqa: F401

KIND = "pitfall"


def prepare(w: Workload):
    return solver(w, 8)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
