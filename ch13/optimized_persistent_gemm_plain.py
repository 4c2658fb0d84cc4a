"""Pitfall: a persistent GEMM without the split, expected to fix the wave tail, and not fixing it.

One program per SM walks tiles pid, pid + 132, ...: 144 tiles are still 132 tiles then 12, each on one
SM for a whole tile's time. Persistence saves the per-tile program start (a launch slot, the pointer set-up,
the pipeline's first loads), which is small beside a tile of K = 8192. On the H100 the sweep
(ch13/persistent_sweep.py, profiles/h100/ch13-persistent-8a9b340) measured it at 0.935-1.05x one program per
tile over 24 shapes (K = 512 to 8192, 1 to 3.1 waves): no shape where persistence alone wins by more than
noise; in the pair, 0.985x (0.980-0.990) (profiles/h100/ch13-e9abe53) and 0.986x (0.981-0.991)
(profiles/h100/ch13-persistent-92f1ef6/pair). The tile loop flattened into the
K loop's pipeline (Triton's persistent-matmul tutorial's flatten=True), tried in the same sweep at
commit 8a9b340, was 0.29-0.62x: slower everywhere. KIND = "pitfall": reported with its ratio.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch13 import optimized_persistent_gemm as persistent

KIND = "pitfall"
DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(w):
    return persistent.prepare(w, split_tail=False)   # the same persistent grid, every tile whole


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
