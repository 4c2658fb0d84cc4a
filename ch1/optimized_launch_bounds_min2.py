"""The same solver with __launch_bounds__(256, 2): at most 128 registers, two blocks per SM.

Asking for two resident 256-thread blocks caps registers at 65536 / 512 =
128 per thread. The compiler keeps most of the 72 values in registers and
spills the rest (a few hundred bytes per thread; ptxas prints the figure),
and theoretical occupancy doubles to 25%: while one block eliminates, the
other's loads are in flight, so the SM no longer alternates between
loading and computing. It wins if that overlap buys more than the spill
traffic costs; the report says which. Achieved occupancy and local-memory
traffic come from Nsight Compute (ch1/README.md has the command).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from common import Workload
from ch1.baseline_launch_bounds import DEVICES, solver  # noqa: F401


def prepare(w: Workload):
    return solver(w, 2)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
