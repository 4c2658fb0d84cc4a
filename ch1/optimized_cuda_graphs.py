"""The same step captured once as a CUDA graph and replayed: one graph launch for the whole step.

Capture records every kernel with its arguments; `replay()` submits the
whole sequence in one call, so the per-kernel cost drops from a Python
dispatch plus a launch to the GPU's own back-to-back scheduling. (The report
counts the kernels each call runs and the launch calls it makes, with
torch.profiler.) A graph reads its input from the static tensor it was
captured with, so each call first copies the new batch into it, as a real
loop must: that copy is a device-to-device memcpy, not a kernel (the report
counts 66 kernels a call, as eager, and 1 launch call), inside the timed call.
Prepared once: the captured graph and its static input. Per call: x.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch1.baseline_cuda_graphs import step

DEVICES = ("cuda",)  # CUDA graphs exist only on the GPU


def prepare(w: Workload):
    x, ws, bs = w.inputs["x"], w.inputs["ws"], w.inputs["bs"]
    static_x = x.clone()  # the graph's input buffer
    # Warm up on a side stream (cuBLAS picks its kernels and workspace), then capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static_x, ws, bs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step(static_x, ws, bs)  # `out` is the graph's static output buffer

    def replay():
        static_x.copy_(x)  # this step's batch into the graph's input
        graph.replay()
        return out
    return replay


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
