"""Pinning on the training thread: copy the pageable batch into a pinned staging buffer, then DMA it.

What a loop pays when nothing pins its batches for it: the same pageable
input as the baseline, a host memcpy into a pinned buffer allocated once,
then the full-speed DMA. Compared with the baseline it shows what manual
staging buys over the driver's own chunked staging; compared with
optimized_pinned_memory it shows what pinning costs when it is on the
critical path. Prepared once: the pinned staging buffer and the device
buffer. Per call: the pageable batch in `host`.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload


def prepare(w: Workload):
    host = w.inputs["host"]
    staging = torch.empty_like(host).pin_memory()                                  # once
    dest = torch.empty(host.shape, dtype=host.dtype, device=w.inputs["device"])  # once

    def copy():
        torch.cuda.current_stream().synchronize()  # the previous call's DMA may still read the staging buffer
        staging.copy_(host)                         # host memcpy, on this thread
        dest.copy_(staging, non_blocking=True)
        return dest
    return copy


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
