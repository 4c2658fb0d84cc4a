"""BF16 tensor cores: the weight kept in bf16 (padded once), the activation cast and padded per call.

bf16 halves the bytes per operand and runs on the tensor cores at ~16x the
fp32 FMA rate; accumulation stays in fp32 inside cuBLAS; the result comes
back in bf16 (relative error ~3e-3 at K = 8190). Prepared once: the weight B,
converted to bf16 and padded to 8192 x 8192, as a model stores its weights.
Per call: the fp32 activation A is cast to bf16 and padded along K (the cast
reads 268 MB and writes 134 MB; F.pad fills a new 8190 x 8192 buffer, 134 MB,
and copies A in, 134 MB each way: 402 MB read, 402 MB written, included in the
time, as a model whose activations arrive in fp32 pays it every step).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch1.optimized_tensor_cores_tf32 import pad_to_16

PRECISION = "bf16"
DEVICES = ("cuda",)  # CPUs here have no bf16 matrix units: it would only measure a slow fallback


def prepare(w: Workload):
    a, n = w.inputs["a"], w.inputs["a"].shape[1]
    b = pad_to_16(w.inputs["b"]).to(torch.bfloat16)  # once

    def mm():
        return (pad_to_16(a.to(torch.bfloat16), rows=False) @ b)[:, :n]  # per call: cast and pad A
    return mm


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
