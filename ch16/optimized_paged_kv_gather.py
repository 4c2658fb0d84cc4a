"""Pitfall: the same paged cache, but attention first gathers each request's blocks into a contiguous
tensor, every layer of every step: an extra write and read of all the KV the step attends over. It
saves the memory and gives back the time (the block table is only worth it with a kernel that reads
through it)."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.optimized_paged_kv import paged_prepare

KIND = "pitfall"


def prepare(w):
    return paged_prepare(w, "attend_gather")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
