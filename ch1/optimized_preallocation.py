"""The same step into one buffer allocated once (out=, in place): less host work per op, no fewer cudaMallocs.

Why it wins: the step is launch-bound, so each op's host time is on the critical path of a synchronized
call. A functional op (x * scale) must build its result: take a block from the caching allocator, make a
tensor around it, work out the new tensor's shape and strides. An out= or in-place op writes into a tensor
that exists. torch.profiler on the H100 (ch1/preallocation_profile.py, profiles/h100/ch1/
preallocation_profile.json, 6e43661) puts each functional op at 5.4-6.0 µs of self CPU time and each out=
or in-place op at 3.1-3.6 µs. Per call the harness has read this variant 1.13-1.19x faster in every run
that timed it in rounds with the baseline (ch1/README.md quotes the run at the chapter's commit).

What it does not remove: under PyTorch's caching allocator neither step calls cudaMalloc (a freed block of
the same size comes back from the free list), so back to back, where the GPU hides the host, the two loops
run within 2% (31.2 vs 30.7 µs per step). The guide's "210 ms of aten::empty_strided" is the cost with the
cache off (PYTORCH_NO_CUDA_MEMORY_CACHING=1): a cudaMalloc (48.9 µs) and a cudaFree (42.4 µs) per fresh
tensor, 397 µs per step against 41.6 µs, 9.6x. That is where preallocation pays most.
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
