"""Prefetch the next layer's all-gather (asynchronous, into a second buffer) while this layer computes.

This is FSDP's forward prefetch.

NCCL runs the all-gather on its own stream while the matmul runs on the caller's; the caller's
stream waits for a gather only when that layer is reached. Two buffers alternate: a gather
writes the buffer the previous layer read, which is safe because NCCL's stream first waits for
the work already queued on the caller's stream. Time ≈ one gather + layers x max(gather, compute).

A pitfall on 2 H200s: it gained nothing, 0.99x in three runs (ch4/README.md has the figures). Our
reading, not measured directly: NCCL's all-gather is a kernel that needs SMs, the matmul keeps them
busy, and the two take turns whatever the streams allow. A high-priority NCCL stream read 1.0738 against
1.0682 ms in the probe's first run and 1.0428 against 1.1441 ms timed as the pairs are, with the widest spread
of the probe's fsdp rows (scripts/ch4_overlap_probe.py, profiles/h200x2/ch4-80dc133/probe): not a clear gain.
optimized_fsdp_prefetch_copy_engine.py moves the bytes with a copy engine instead.

Prepared once: the two gather buffers. Per call: the batch, and every layer's all-gather.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch4.baseline_fsdp_prefetch import gather_buffers, layer
from ch4.dist_common import all_gather_into

KIND = "pitfall"


def prepare(w):
    shards, x = w.inputs["shards"], w.inputs["x"]
    bufs = gather_buffers(w, 2)
    layers = shards.shape[0]

    def forward():
        pending = all_gather_into(bufs[0], shards[0], async_op=True)
        h = x
        for i in range(layers):
            pending.wait()
            if i + 1 < layers:
                pending = all_gather_into(bufs[(i + 1) % 2], shards[i + 1], async_op=True)
            h = layer(h, bufs[i % 2])
        return h
    return forward


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
