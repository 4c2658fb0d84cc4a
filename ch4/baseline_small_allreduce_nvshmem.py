"""The small all-reduce again (64 KiB bf16, NCCL or Gloo), as the baseline for the NVSHMEM backend.

A separate pair because the symmetric-memory backend is chosen once per process: it cannot
change after the first symmetric tensor exists, and each pair runs in its own processes.
Everything else is baseline_small_allreduce's.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch4.baseline_small_allreduce import BOUND, NPROC, prepare, reference, workload  # noqa: F401

if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
