"""An fp32 matrix product with ragged dimensions (8190 x 8190 x 8190): activations times weights.

Workload: C = A @ B in full fp32 (TF32 off: the harness runs every fp32
variant with torch's TF32 flags off), the default a model gets when nothing
asks for tensor cores. A is the per-call activation; B is a weight, prepared
once. FP32 FMA units run at a fraction of the tensor cores' rate, and 8190
is not a multiple of the tile sizes, so edge tiles are partly wasted as well.

Bound: compute. Napkin math: 2 x 8190^3 = 1.1 TFLOP; at the fp32 rate
(tens of TFLOP/s on an H100) that is ~20 ms; bf16 tensor cores would take ~1.5 ms.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

BOUND = "compute"


def size(device, quick: bool) -> int:
    if torch.device(device).type != "cuda":
        return 510  # a CPU has no tensor cores; the CPU path only checks the arithmetic
    return 2046 if quick else 8190


def workload(seed: int, device, quick: bool = False) -> Workload:
    n = size(device, quick)
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(n, n, device=device, generator=g)
    b = torch.randn(n, n, device=device, generator=g)
    return Workload(inputs={"a": a, "b": b}, once=("b",), flops=2.0 * n**3, bytes_moved=3 * 4.0 * n * n)


def prepare(w: Workload):
    a, b = w.inputs["a"], w.inputs["b"]
    return lambda: a @ b


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
