"""BF16 tensor cores on operands padded to a multiple of 16 (8190 -> 8192).

bf16 halves the bytes per operand and runs on the tensor cores at ~16x the
fp32 FMA rate; accumulation stays in fp32 inside cuBLAS. The operands are
converted and padded once, as a model keeps its weights and activations in
bf16; the result comes back in bf16 (relative error ~3e-3 at K = 8190).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch1.optimized_tensor_cores_tf32 import pad16

PRECISION = "bf16"
DEVICES = ("cuda",)  # CPUs here have no bf16 matrix units: it would only measure a slow fallback


def prepare(w: Workload):
    a = pad16(w.inputs["a"]).to(torch.bfloat16)
    b = pad16(w.inputs["b"]).to(torch.bfloat16)
    n = w.inputs["a"].shape[0]
    return lambda: (a @ b)[:n, :n]


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
