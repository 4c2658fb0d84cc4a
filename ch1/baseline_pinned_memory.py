"""Copy a 256 MB batch from pageable host memory to the GPU.

Workload: 64M fp32 values (256 MiB), the batch a data loader hands the
training loop each step. The baseline gets it in ordinary (pageable) memory,
`host`, and copies it with `.to("cuda")` into a freshly allocated device
tensor. The driver cannot DMA from pageable memory: it stages the data
through a pinned bounce buffer chunk by chunk, and the call blocks the host.

The workload also holds the same batch already in pinned memory,
`host_pinned`: where a loader produces batches (DataLoader(pin_memory=True)
pins each batch on a background thread, or a dataset kept in pinned memory).
Both are per-call inputs; nothing is prepared once in the baseline.

Bound: transfer (the host-to-device link). Napkin math: 268 MB over a PCIe
Gen5 x16 link (~55 GB/s usable) is ~5 ms at best.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "transfer"
DEVICES = ("cuda",)  # a host-to-device copy needs a device


def workload(seed: int, device, quick: bool = False) -> Workload:
    n = (16 if quick else 64) << 20
    g = torch.Generator().manual_seed(seed)
    host = torch.randn(n, generator=g)  # pageable
    return Workload(inputs={"host": host, "host_pinned": host.pin_memory(), "device": torch.device(device)},
                    bytes_moved=4.0 * n)


def prepare(w: Workload):
    host, device = w.inputs["host"], w.inputs["device"]
    return lambda: host.to(device)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
