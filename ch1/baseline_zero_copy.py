"""Normalize a batch of images that arrives in pinned host memory: copy it to the GPU, then compute.

Workload: 64 RGB images of 224x224 in float32 (38.5 MB), in pinned host memory: the batch a loader
hands the training loop each step (DataLoader(pin_memory=True)). One kernel subtracts each channel's
dataset mean, divides by its std and writes bf16 for the model (ch1/image_kernels.py): every input
byte is read exactly once.

The baseline is the usual two steps: one DMA of the batch into a device buffer allocated once, then
the kernel reading that buffer. The kernel waits for the whole copy, and the batch crosses device
memory twice more (written by the DMA, read by the kernel). optimized_zero_copy runs the same kernel
on the pinned buffer itself. Prepared once: the device buffers. Per call: the batch in `images`.

Bound: transfer (the host-to-device link). Napkin math: 38.5 MB at the measured 55 GB/s is 0.70 ms;
the kernel on device memory reads 38.5 MB and writes 19 MB, ~0.02 ms at 3 TB/s. A single pass over
data used once is zero copy's case: it saves that kernel's pass over device memory and the wait
between the copy and the kernel, if SMs reading across PCIe keep up with the copy engine. How that
plays out from 1 to 256 images is ch1/zero_copy_sweep.py's figure; baseline_zero_copy_reuse is the
case where zero copy loses.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch1.image_kernels import normalize_channels
from common import Workload

BOUND = "transfer"
DEVICES = ("cuda",)     # a host-to-device pair needs a device
REQUIRES = ("triton",)


def image_batch(seed: int, device, quick: bool) -> Workload:
    """A pinned float32 batch of images with values in [0, 1), and the bytes that cross the link."""
    n = 16 if quick else 64
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(n, 3, 224, 224, generator=g).pin_memory()
    return Workload(inputs={"images": images, "device": torch.device(device)},
                    bytes_moved=images.numel() * 4.0, items=n, item_name="images")


def workload(seed: int, device, quick: bool = False) -> Workload:
    return image_batch(seed, device, quick)


def prepare(w: Workload):
    images = w.inputs["images"]
    staged = torch.empty(images.shape, device=w.inputs["device"])                          # once
    out = torch.empty(images.shape, dtype=torch.bfloat16, device=w.inputs["device"])      # once

    def step():
        staged.copy_(images, non_blocking=True)  # one DMA from pinned memory
        return normalize_channels(staged, out)   # then the kernel, on device memory
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
