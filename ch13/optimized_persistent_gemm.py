"""The persistent form: one program per SM (132 on an H100), each looping over tiles pid, pid + 132, ...

Same tile, same K loop, same grouped tile order; what changes is that 132 programs start once and walk
324 tiles, so no program launch or scheduling happens between tiles. The thin last wave remains (the
same 324 tiles on 132 SMs: persistence alone does not rebalance work, Stream-K would); the gain to
expect is the per-tile start-up, larger at small K. The ncu view: same SM throughput per tile, fewer
"launch" stalls, a shorter kernel.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_persistent_gemm import CONFIG

DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(w):
    from ch13 import triton_kernels as tk
    a, b = w.inputs["a"], w.inputs["b"]
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    return lambda: tk.persistent_gemm(a, b, None, out, gelu=False, config=CONFIG, num_programs=sms)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
