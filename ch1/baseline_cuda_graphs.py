"""A small residual MLP step on a tiny batch, run eagerly: bound by launches.

Workload: batch 8, width 256, 6 blocks of h = h + gelu(h @ W + b), with
the GELU written out (tanh form) as it often is in model code: 11 kernels
per block (addmm, the GELU's 9 element-wise ops, the residual add), 66 per
step. Each kernel does microseconds of work or less, so the step costs what
it takes the CPU to issue 66 launches through Python and the PyTorch dispatcher.

Prepared once: the weights ws and bs. Per call: the activation x.

Bound: launch. Napkin math: 66 launches x ~5 µs of host work each ≈ 330 µs,
against ~6.4 MFLOP of math that a GPU finishes in well under a microsecond.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import math

import torch

from common import Workload

BOUND = "launch"
BATCH, WIDTH, BLOCKS = 8, 256, 6
C = math.sqrt(2.0 / math.pi)


def workload(seed: int, device, quick: bool = False) -> Workload:
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(BATCH, WIDTH, device=device, generator=g)
    ws = torch.randn(BLOCKS, WIDTH, WIDTH, device=device, generator=g) / math.sqrt(WIDTH)
    bs = torch.randn(BLOCKS, WIDTH, device=device, generator=g) * 0.1
    flops = BLOCKS * (2.0 * BATCH * WIDTH * WIDTH + 10 * BATCH * WIDTH)
    return Workload(inputs={"x": x, "ws": ws, "bs": bs}, once=("ws", "bs"), flops=flops,
                    bytes_moved=4.0 * (ws.numel() + bs.numel() + 2 * x.numel()), launches=BLOCKS * 11)


def gelu_tanh(y: torch.Tensor) -> torch.Tensor:
    return 0.5 * y * (1.0 + torch.tanh(C * (y + 0.044715 * y * y * y)))


def step(x: torch.Tensor, ws: torch.Tensor, bs: torch.Tensor) -> torch.Tensor:
    h = x
    for i in range(BLOCKS):
        h = h + gelu_tanh(torch.addmm(bs[i], h, ws[i]))
    return h


def prepare(w: Workload):
    x, ws, bs = w.inputs["x"], w.inputs["ws"], w.inputs["bs"]
    return lambda: step(x, ws, bs)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
