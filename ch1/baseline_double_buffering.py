"""Stream batches from pinned host memory and process each one, all on one stream.

Workload: 8 chunks of 8192 x 1024 fp32 (32 MiB each) in pinned memory; each
is copied into a device buffer and then transformed, tanh(chunk @ W) with W
1024 x 2048, into its slice of the output. On one stream every copy waits
for the previous compute and every compute for its copy, so the copy engine
and the SMs take turns: time = sum of copies + sum of computes.

Prepared once: the weight W, the device buffer and the output. Per call: the
8 host chunks (a real loop's next batches), copied in by the call.

Bound: transfer (sized so one chunk's copy and compute take about as long).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "transfer"
DEVICES = ("cuda",)
ROWS, COLS, OUT_COLS = 8192, 1024, 2048


def workload(seed: int, device, quick: bool = False) -> Workload:
    chunks = 4 if quick else 8
    g = torch.Generator().manual_seed(seed)
    host = torch.randn(chunks, ROWS, COLS, generator=g).pin_memory()
    w = (torch.randn(COLS, OUT_COLS, generator=g) / COLS**0.5).to(device)
    return Workload(inputs={"host": host, "w": w}, once=("w",), flops=2.0 * chunks * ROWS * COLS * OUT_COLS,
                    bytes_moved=4.0 * host.numel(), items=chunks, item_name="chunks")


def compute(chunk: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    torch.matmul(chunk, w, out=out)
    out.tanh_()


def prepare(w: Workload):
    host, weight = w.inputs["host"], w.inputs["w"]
    buf = torch.empty(host.shape[1:], device=weight.device)
    out = torch.empty(host.shape[0], ROWS, OUT_COLS, device=weight.device)

    def run():
        for i in range(host.shape[0]):
            buf.copy_(host[i], non_blocking=True)  # same stream: waits for the previous compute
            compute(buf, weight, out[i])
        return out
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
