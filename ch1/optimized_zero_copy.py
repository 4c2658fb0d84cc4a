"""Zero copy: the kernel reads the pinned batch across PCIe itself; no DMA, no staging buffer.

The same kernel as the baseline, given the pinned host tensor instead of a device copy. Pinned memory
is mapped into the GPU's address space (unified addressing), so each load instruction becomes a PCIe
read of host RAM. The batch never lands in device memory: the kernel streams it in, normalizes it
and writes only the bf16 result, and the transfer and the arithmetic overlap inside one launch instead
of running one after the other. It wins where every byte is read once; where the kernel reads its
input again, each read crosses the link again (baseline_zero_copy_reuse). Prepared once: the output
buffer. Per call: the batch in `images`, read where it lies.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch1.image_kernels import normalize_channels
from common import Workload

DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(w: Workload):
    images = w.inputs["images"]
    assert images.is_pinned(), "zero copy needs pinned (page-locked) host memory"
    out = torch.empty(images.shape, dtype=torch.bfloat16, device=w.inputs["device"])  # once
    return lambda: normalize_channels(images, out)  # pointer to host memory: read over PCIe


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
