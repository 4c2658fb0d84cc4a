"""torch.compile(mode="reduce-overhead") as is: one CUDA graph recorded per input length, 8 in all.

Inductor fuses the element-wise work and replays each length's graph with one launch. A CUDA graph is
recorded for one shape: eight lengths, eight graphs. They cost less memory than one would fear: the graph
trees record into one shared pool, which grows with the largest shape, not with the count;
ch13/graph_memory.py measured 72 MiB reserved above the model after all 8 on the H100, against 38 MiB after
the first and 60 MiB for eager's caching allocator (profiles/h100/ch13-07ac287/graph_memory). Measured in the
chapter's run there: 2.933x eager (1.069 against eager's 3.134 ms a call in the same rounds: the GPU no longer waits
on the host; eager's median over the whole run, 4.089 ms, holds its slower rounds beside the bucketed variant).
Outputs are cloned because a graph's next replay overwrites them. Recording happens in prepare(): prepare_s holds it.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_compile_shapes import batches

DEVICES = ("cuda",)
REQUIRES = ("triton",)


def compiled(model):
    @torch.no_grad()
    def forward(x):
        return model(x)
    return torch.compile(forward, mode="reduce-overhead")


def prepare(w):
    fn, xs = compiled(w.inputs["model"]), batches(w)
    for _ in range(3):  # compile, record each length's graph, replay
        for x in xs:
            fn(x)

    def call():
        return tuple(fn(x).clone() for x in xs)
    return call


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
