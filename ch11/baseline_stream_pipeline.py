"""Copy in, compute, copy back: 8 chunks one after another on one stream.

Workload: 8 chunks of 4096 x 1024 fp32 (16 MiB each) in pinned host memory.
Each chunk is copied to the GPU, transformed (tanh(x @ W1) @ W2, two 4096 x
1024 x 1024 matmuls) and copied back into a pinned host buffer. The copies
are `non_blocking` from pinned memory (no staging), but everything is on one
stream, so the host-to-device engine, the SMs and the device-to-host engine
take turns: time = 8 x (copy in + compute + copy out).

Prepared once: the weights W1, W2 and the pinned output buffer. Per call: the
8 input chunks in pinned host memory.

Bound: transfer, both ways: 128 MiB in and 128 MiB out per call, held to the
measured two-way ceiling (the copy engines run both directions at once)
(sized so each of the three stages takes about as long).
Napkin math: 16.8 MB at ~55 GB/s ≈ 0.3 ms each way; 17 GFLOP at ~50 TFLOP/s ≈ 0.35 ms.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "transfer"
DEVICES = ("cuda",)  # copy engines and streams
CHUNKS, ROWS, COLS = 8, 4096, 1024


def workload(seed: int, device, quick: bool = False) -> Workload:
    chunks = 4 if quick else CHUNKS
    g = torch.Generator().manual_seed(seed)
    host_in = torch.randn(chunks, ROWS, COLS, generator=g).pin_memory()
    w1 = (torch.randn(COLS, COLS, generator=g) / COLS**0.5).to(device)
    w2 = (torch.randn(COLS, COLS, generator=g) / COLS**0.5).to(device)
    return Workload(inputs={"host_in": host_in, "w1": w1, "w2": w2}, once=("w1", "w2"),
                    flops=4.0 * chunks * ROWS * COLS * COLS, bytes_moved=2 * 4.0 * host_in.numel(), duplex=True,
                    items=chunks, item_name="chunks")


def compute(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ w1) @ w2


def stages(w: Workload):
    """One chunk's three stages, each alone: the harness times them to find the ideal overlap."""
    host_in, w1, w2 = w.inputs["host_in"], w.inputs["w1"], w.inputs["w2"]
    d = torch.empty(host_in.shape[1:], device=w1.device)
    h = torch.empty(host_in.shape[1:]).pin_memory()
    return host_in.shape[0], {"copy_in": lambda: d.copy_(host_in[0], non_blocking=True),
                              "compute": lambda: compute(d, w1, w2),
                              "copy_out": lambda: h.copy_(d, non_blocking=True)}


def prepare(w: Workload):
    host_in, w1, w2 = w.inputs["host_in"], w.inputs["w1"], w.inputs["w2"]
    host_out = torch.empty_like(host_in).pin_memory()
    d_in = torch.empty(host_in.shape[1:], device=w1.device)

    def run():
        for i in range(host_in.shape[0]):
            d_in.copy_(host_in[i], non_blocking=True)
            host_out[i].copy_(compute(d_in, w1, w2), non_blocking=True)
        return host_out  # complete once the caller's stream reaches this point
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
