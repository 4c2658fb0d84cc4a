"""Zero copy where it wins: the GPU reads only the rows it needs from the pinned table, across PCIe.

One Triton kernel (ch1/image_kernels.gather_rows) takes the pinned table and the pinned indices as they
are: each program loads 32 indices, then those 32 rows, 512 contiguous bytes each, from host RAM, and
writes them to the device buffer. Nothing is staged: no CPU thread touches the rows, no copy waits for
a gather, and of the 512 MiB table only the 32 MiB asked for crosses the link, once. This is the access
pattern zero copy is for: data read once, and too scattered (or too large) to copy whole. Prepared
once: the output buffer. Per call: `idx`, read from host memory by the kernel too.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch1.image_kernels import gather_rows
from common import Workload

DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(w: Workload):
    table, idx = w.inputs["table"], w.inputs["idx"]
    assert table.is_pinned() and idx.is_pinned(), "zero copy needs pinned (page-locked) host memory"
    out = torch.empty(idx.numel(), table.shape[1], device=w.inputs["device"])  # once
    return lambda: gather_rows(table, idx, out)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
