"""One-shot all-reduce on symmetric memory allocated by NVSHMEM (set_backend("NVSHMEM")).

The same op as optimized_small_allreduce_symm_mem, with the buffer on NVSHMEM's symmetric heap;
the backend is chosen before this process allocates its first symmetric tensor.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch4.optimized_small_allreduce_symm_mem import symm_one_shot

DEVICES = ("cuda",)


def prepare(w):
    return symm_one_shot(w, "NVSHMEM")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
