"""Pad each request to a bucket of 256 tokens, so 8 lengths need 3 graphs (256, 512, 768), not 8.

Padding goes at the end of each sequence; attention is causal, so the real positions never see the
padding and their outputs are exactly those of the unpadded input (sliced back before returning). The
price is the padded FLOPs: a call's 3040 real tokens become 4096 computed (35% more), and a copy of
each input into a preallocated bucket buffer, every call. What it buys is a bounded number of graphs.

What it does not buy, at these 8 lengths, is memory. ch13/graph_memory.py on the H100
(profiles/h100/ch13-07ac287/graph_memory): torch.compile's CUDA graph trees record every length's graph
into one shared memory pool, so a graph per length ended at 72 MiB reserved above the model, bucketing at
114 MiB (its buffers are padded to 256, 512 and 768 tokens), eager's caching allocator at 60 MiB.
Bucketing pays where lengths are many (each graph also costs a recording and its static inputs) or
unbounded; with 8 it is faster than eager (3.08x in the chapter's run, profiles/h100/ch13-07ac287) but
slower than a graph per length by its own time (1.347 against 1.069 ms a call), for no memory saved.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch13.baseline_compile_shapes import batches
from ch13.optimized_compile_shapes import compiled

DEVICES = ("cuda",)
REQUIRES = ("triton",)
BUCKET = 256


def prepare(w):
    fn, xs = compiled(w.inputs["model"]), batches(w)
    buffers = {}
    for x in xs:  # one buffer per (batch, bucket) shape; its tail never reaches a real position (causal)
        t = -(-x.shape[1] // BUCKET) * BUCKET
        buffers.setdefault((x.shape[0], t), torch.zeros(x.shape[0], t, x.shape[2], dtype=x.dtype, device=x.device))

    def run(x):
        buf = buffers[(x.shape[0], -(-x.shape[1] // BUCKET) * BUCKET)]
        buf[:, :x.shape[1]].copy_(x)
        return fn(buf)[:, :x.shape[1]].clone()

    for _ in range(3):
        for x in xs:
            run(x)
    return lambda: tuple(run(x) for x in xs)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
