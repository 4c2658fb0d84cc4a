"""The same step with cudaMallocAsync / cudaFreeAsync: stream-ordered allocation from a pool.

Allocation and free become operations in the stream, ordered with the
kernels that use the memory, and the pool keeps freed blocks (its release
threshold is raised once), so after the first step nothing reaches the
driver and nothing waits: the 16 kernels run back to back. PyTorch's own
caching allocator gives tensors the same property; this is what to use in
C++ or CUDA code outside it. Prepared once, as in the baseline: the output
buffer and the compiled kernels; the pool's release threshold is set on first use.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch11.baseline_stream_alloc import DEVICES, K, kernels  # noqa: F401


def prepare(w: Workload):
    ext, x = kernels(), w.inputs["x"]
    out = torch.empty_like(x)

    def step():
        out.copy_(x)
        return ext.step_malloc_async(x, out, K)
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
