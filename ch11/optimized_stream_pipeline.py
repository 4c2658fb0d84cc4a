"""The same 8 chunks spread over 4 streams, so copies in, compute and copies out overlap.

Chunk i goes to stream i % 4 and does its copy in, compute and copy out there.
H100 has separate copy engines for each direction, so while one stream's
chunk computes, another's is copied in and a third's copied out: time ≈ 8 x
the longest stage plus the first chunk's fill and the last one's drain.

Stream hygiene, in the order it happens:
- `s.wait_stream(main)`: the side stream starts only after the caller's
  earlier work (the inputs it produced) is done;
- tensors allocated on the caller's stream and used on a side stream get
  `record_stream(s)`, so the caching allocator does not hand their memory
  to someone else while `s` may still be using it;
- `main.wait_stream(s)` at the end: the caller's stream, and any CUDA
  event a timer records on it, sees the work finish.

Prepared once: the streams and the pinned output buffer. Per call: the input
chunks, as in the baseline.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch11.baseline_stream_pipeline import compute

DEVICES = ("cuda",)
STREAMS = 4


def prepare(w: Workload):
    host_in, w1, w2 = w.inputs["host_in"], w.inputs["w1"], w.inputs["w2"]
    host_out = torch.empty_like(host_in).pin_memory()
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]

    def run():
        main = torch.cuda.current_stream()
        for s in streams:
            s.wait_stream(main)
        for i in range(host_in.shape[0]):
            s = streams[i % STREAMS]
            d_in = torch.empty(host_in.shape[1:], device=w1.device)  # allocated on the caller's stream
            d_in.record_stream(s)  # ...and used on s: keep its memory until s is done with it
            with torch.cuda.stream(s):
                d_in.copy_(host_in[i], non_blocking=True)
                host_out[i].copy_(compute(d_in, w1, w2), non_blocking=True)
        for s in streams:
            main.wait_stream(s)
        return host_out
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
