"""Pinned host memory, a preallocated device buffer and a non_blocking copy.

From page-locked memory the copy engine DMAs straight over the link at full
speed, and `non_blocking=True` returns at once so the host can prepare the
next batch (DataLoader(pin_memory=True) gives batches in pinned memory).
The pinning is done once, when the buffer is made, not per copy.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload


def prepare(w: Workload):
    pinned = w.inputs["host"].pin_memory()  # once: where a pinned DataLoader would put the batch
    dest = torch.empty(pinned.shape, dtype=pinned.dtype, device=w.inputs["device"])

    def copy():
        dest.copy_(pinned, non_blocking=True)
        return dest
    return copy


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
