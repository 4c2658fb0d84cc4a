"""Pitfall: the same solver with __launch_bounds__(256, 4): at most 64 registers, four blocks per SM.

The cap of 65536 / 1024 = 64 registers is below the 72 values a system
needs at once, so the compiler spills about a kilobyte per thread to local
memory (ptxas prints the figure), in exchange for 50% theoretical
occupancy. Local memory is cached in L1; with four blocks' spills per SM
some of it reaches L2. On the H100 the spills win: Nsight Compute reads
45% achieved occupancy and 1.05 ms, four times the uncapped kernel's 262
µs. The lesson is the usual one: raise occupancy only until spills start
to cost more than the latency they hide, and here the uncapped kernel had
no latency left to hide.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from common import Workload
from ch1.baseline_launch_bounds import DEVICES, solver  # noqa: F401

KIND = "pitfall"  # slower on the H100 (ch1/README.md has the figures and ncu's counters): kept to show the trade


def prepare(w: Workload):
    return solver(w, 4)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
