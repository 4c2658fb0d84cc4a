"""The batch arrives in pinned memory: one DMA straight into a preallocated device buffer.

This is the copy a training loop pays when its loader delivers pinned batches
(DataLoader(pin_memory=True) pins on a background thread, off the loop's
critical path, so long as the host has a core to spare). From page-locked
memory the copy engine DMAs over the link at full speed, and
`non_blocking=True` returns at once so the host can prepare the next batch.
Prepared once: the device buffer. Per call: the batch in `host_pinned`.
The cost of pinning itself is measured by optimized_pinned_memory_staged.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload


def prepare(w: Workload):
    pinned = w.inputs["host_pinned"]
    dest = torch.empty(pinned.shape, dtype=pinned.dtype, device=w.inputs["device"])  # once

    def copy():
        dest.copy_(pinned, non_blocking=True)
        return dest
    return copy


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
