"""Pitfall: the same solver with __launch_bounds__(256, 2): at most 128 registers, two blocks per SM.

Asking for two resident 256-thread blocks caps registers at 65536 / 512 =
128 per thread. The compiler keeps most of the 72 values in registers and
spills the rest (a few hundred bytes per thread; ptxas prints the figure),
and theoretical occupancy doubles to 25%: while one block eliminates, the
other's loads are in flight, so the SM no longer alternates between
loading and computing. It would win if that overlap bought more than the
spill traffic costs. On the H100 it does not: Nsight Compute reads 128
registers and 23% achieved occupancy, 358 µs against the uncapped kernel's
262 µs at 12% (whose 159 registers keep every value on chip and whose
streaming loads already reach 2555 GB/s, 84.9% of the copy ceiling, in the
harness's 3a68426 run: there was no latency left to hide). ch1/README.md has
the harness's figures and the command.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from common import Workload
from ch1.baseline_launch_bounds import DEVICES, solver  # noqa: F401

KIND = "pitfall"  # slower on the H100 (ch1/README.md has the figures and ncu's counters): kept to show the trade


def prepare(w: Workload):
    return solver(w, 2)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
