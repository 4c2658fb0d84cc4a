"""torch.compile, mode="max-autotune": the fusions of the default mode, plus the matmuls benchmarked against
Inductor's Triton templates (with fused epilogues) and the step replayed as a CUDA graph.

The output is cloned: the graph's output buffer is overwritten by the next replay (64 MiB, ~0.04 ms).
The autotuning runs in prepare() and takes minutes, not seconds: prepare_s says how many, beside what it
buys in steady state. GPU only.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_compile_block import forward

DEVICES = ("cuda",)
REQUIRES = ("triton",)


def prepare(w):
    x, model = w.inputs["x"], w.inputs["model"]
    fn = torch.compile(forward, mode="max-autotune")
    for _ in range(3):  # compile, then record the CUDA graph (recorded on the second call or later)
        fn(model, x)
    return lambda: fn(model, x).clone()


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
