"""40 small matrix products, one `torch.matmul` call each.

Workload: 40 independent fp32 products of 128x128 by 128x128 (2*128^3*40 =
168 MFLOP, 7.9 MB in and out). Each product is a few microseconds of GPU
work, so the loop is bound by launches: 40 Python calls, 40 kernel launches,
each costing more than the arithmetic it starts.

Per call: both operand stacks a and b (nothing prepared once but the output
buffer).

Bound: launch. Napkin math: ~40 x 5 us of launch overhead vs ~3 us of math
at the fp32 rate.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "launch"
BATCH, M, N, K = 40, 128, 128, 128


def workload(seed: int, device, quick: bool = False) -> Workload:
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(BATCH, M, K, device=device, generator=g)
    b = torch.randn(BATCH, K, N, device=device, generator=g)
    return Workload(inputs={"a": a, "b": b}, flops=2.0 * BATCH * M * N * K,
                    bytes_moved=4.0 * BATCH * (M * K + K * N + M * N), items=BATCH, item_name="GEMMs",
                    launches=BATCH)


def prepare(w: Workload):
    a, b = w.inputs["a"], w.inputs["b"]
    out = torch.empty(BATCH, M, N, device=a.device)

    def step():
        for i in range(BATCH):
            torch.matmul(a[i], b[i], out=out[i])
        return out
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
