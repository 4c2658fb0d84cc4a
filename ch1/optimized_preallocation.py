"""The same step into one buffer allocated once (out=, in place): less host work per op, no fewer cudaMallocs.

Why it wins: the step is launch-bound, so each op's host time is on the critical path of a synchronized
call. A functional op (x * scale) must build its result: take a block from the caching allocator, make a
tensor around it, work out the new tensor's shape and strides. An out= or in-place op writes into a tensor
that exists. Measured on the H100 at 3a68426 (ch1/preallocation_profile.py, profiles/h100/ch1-3a68426/
preallocation_profile.json): torch.profiler puts each functional op at 5.8-6.3 µs of self CPU time and
each out= or in-place op at 3.6-4.1 µs; issuing one step with the GPU idle takes 40.1 µs against 31.6 µs,
and the harness reads this variant 1.166x (1.153-1.172) faster per call (ch1/README.md).

What it does not remove: under PyTorch's caching allocator neither step calls cudaMalloc (a freed block of
the same size comes back from the free list). The guide's "210 ms of aten::empty_strided" is the cost with
the cache off (PYTORCH_NO_CUDA_MEMORY_CACHING=1), where every fresh tensor is a cudaMalloc and a cudaFree:
476.6 µs per step back to back against 46.7 µs, 10.2x. That is where preallocation pays most.
Prepared once: the output buffer. Per call: x. The returned tensor is the preallocated buffer, so a
caller must use it before the next step.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload


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
