"""A pointwise step that allocates a fresh tensor for every intermediate.

Workload: one step of y = tanh(x * scale + shift) * x over 1M fp32 values
(4 MB per tensor), written the way most code first writes it: each of the
four operations returns a new tensor, so every step asks the caching
allocator for four blocks and hands them back.

Prepared once: scale and shift (parameters). Per call: x.

Bound: launch. Four small kernels of ~2 µs each; allocator calls and Python
dispatch add a few µs per op on top, and the fresh blocks rotate through
more memory than one reused buffer does.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "launch"
N = 1 << 20


def workload(seed: int, device, quick: bool = False) -> Workload:
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(N, device=device, generator=g)
    scale = torch.randn(N, device=device, generator=g)
    shift = torch.randn(N, device=device, generator=g)
    # 4 ops: each reads its inputs and writes one output of N floats
    return Workload(inputs={"x": x, "scale": scale, "shift": shift}, once=("scale", "shift"), flops=4.0 * N,
                    bytes_moved=4.0 * N * 4, launches=4)  # x, scale, shift in; y out


def prepare(w: Workload):
    x, scale, shift = w.inputs["x"], w.inputs["scale"], w.inputs["shift"]

    def step():
        y = x * scale
        y = y + shift
        y = torch.tanh(y)
        return y * x
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
