"""Prefetch layer l+1's KV cache on a copy stream while layer l's attention runs.

Two device buffers alternate. Before refilling a buffer the copy stream waits
for the event recorded after the attention that last read it; the compute
stream waits for the event recorded after the buffer's copy. The copy
engine and the SMs now work at the same time: time ≈ 8 x max(copy, attention)
plus one copy to fill the pipeline. Prepared once: the two buffers, the copy
stream and its events. Per call: kv and q, as in the baseline.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch11.baseline_kv_prefetch import attend

DEVICES = ("cuda",)


def prepare(w: Workload):
    kv, q = w.inputs["kv"], w.inputs["q"]
    bufs = [torch.empty(kv.shape[1:], dtype=kv.dtype, device=q.device) for _ in range(2)]
    out = torch.empty_like(q)
    copy_stream = torch.cuda.Stream()
    copied = [torch.cuda.Event() for _ in range(2)]
    consumed = [torch.cuda.Event() for _ in range(2)]

    def prefetch(layer):
        b = layer % 2
        with torch.cuda.stream(copy_stream):
            copy_stream.wait_event(consumed[b])
            bufs[b].copy_(kv[layer], non_blocking=True)
            copied[b].record(copy_stream)

    def run():
        main = torch.cuda.current_stream()
        copy_stream.wait_stream(main)
        prefetch(0)
        for layer in range(kv.shape[0]):
            if layer + 1 < kv.shape[0]:
                prefetch(layer + 1)  # issued before this layer's attention, so it overlaps it
            b = layer % 2
            main.wait_event(copied[b])
            attend(q[layer], bufs[b], out[layer])
            consumed[b].record(main)
        return out
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
