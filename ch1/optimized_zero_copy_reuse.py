"""Pitfall: zero copy on data read twice, so it crosses PCIe twice.

The baseline's two kernels given the pinned host tensor: the statistics pass reads the whole batch
across the link, and the normalizing pass reads it across the link again. Nothing caches it on the
GPU between the two launches, so the call moves twice the bytes the baseline's one DMA moves, over
the slowest link in the machine, and should take about twice as long. Kept to teach the rule: map
host memory for data a kernel reads once; copy data that is read more than once. Prepared once: the
output and statistics buffers. Per call: the batch in `images`, read where it lies, twice.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch1.image_kernels import standardize_images
from common import Workload

DEVICES = ("cuda",)
REQUIRES = ("triton",)
KIND = "pitfall"


def prepare(w: Workload):
    images, device = w.inputs["images"], w.inputs["device"]
    assert images.is_pinned(), "zero copy needs pinned (page-locked) host memory"
    out = torch.empty(images.shape, dtype=torch.bfloat16, device=device)  # once
    stats = torch.empty(2, images.shape[0], device=device)                # once
    return lambda: standardize_images(images, out, stats)  # both passes read host memory over PCIe


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
