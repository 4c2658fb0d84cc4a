"""Privatized bins: each block counts into 256 shared-memory bins, then adds them to the global ones once.

Shared-memory atomics are resolved in the SM, and only the block's 256 threads contend for a bin; the L2
sees 256 reductions per block (1056 blocks: ~270 K) instead of one per byte (256 M).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch13.baseline_histogram import prepare as histogram_prepare


def prepare(w):
    return histogram_prepare(w, privatized=True)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
