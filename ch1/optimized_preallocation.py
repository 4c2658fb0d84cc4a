"""Pitfall under PyTorch's caching allocator: the same step into one buffer allocated once (out=, in place).

Preallocation removes the allocator from the step, which pays only where allocating costs something.
PyTorch's caching allocator hands back a freed block of the same size without asking the driver, so
the baseline's four "allocations" are free-list hits. Measured on the H100 (ch1/preallocation_profile.py,
profiles/h100/ch1/preallocation_profile.json): with the cache, neither loop calls cudaMalloc, and 2000
steps take 31.2 µs (fresh tensors) and 30.7 µs (this) per step; the harness's per-call figure puts this
variant a little slower (ch1/README.md). With the cache off (PYTORCH_NO_CUDA_MEMORY_CACHING=1), every
fresh tensor is a cudaMalloc (48.9 µs) and a cudaFree (42.4 µs): 397 µs per step against 41.6 µs, 9.6x:
the cost a guide's "210 ms of aten::empty_strided" describes, and the one this pattern removes.
Prepared once: the output buffer. Per call: x. The returned tensor is the preallocated buffer, so a
caller must use it before the next step.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload

KIND = "pitfall"  # no gain under the caching allocator (see above); kept to show when preallocation pays


def prepare(w: Workload):
    x, scale, shift = w.inputs["x"], w.inputs["scale"], w.inputs["shift"]
    out = torch.empty_like(x)  # allocated once, outside the step

    def step():
        torch.mul(x, scale, out=out)
        out.add_(shift)
        out.tanh_()
        out.mul_(x)
        return out
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
