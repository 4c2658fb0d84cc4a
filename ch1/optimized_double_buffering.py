"""Double buffering: copy chunk i+1 on a copy stream while chunk i is computed.

Two device buffers alternate. The copy stream waits until the compute
stream has finished with a buffer (event `consumed`) before refilling it;
the compute stream waits until a buffer's copy has landed (event
`copied`). Copies and matmuls overlap, so time ≈ max(copies, computes)
plus one chunk to fill the pipeline. Prepared once: the two device buffers,
the copy stream and its events. Per call: the host chunks, as in the baseline.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch1.baseline_double_buffering import OUT_COLS, ROWS, compute

DEVICES = ("cuda",)


def prepare(w: Workload):
    host, weight = w.inputs["host"], w.inputs["w"]
    bufs = [torch.empty(host.shape[1:], device=weight.device) for _ in range(2)]
    out = torch.empty(host.shape[0], ROWS, OUT_COLS, device=weight.device)
    copy_stream = torch.cuda.Stream()
    copied = [torch.cuda.Event() for _ in range(2)]
    consumed = [torch.cuda.Event() for _ in range(2)]

    def run():
        main = torch.cuda.current_stream()
        copy_stream.wait_stream(main)  # inputs of this call are ready
        for i in range(host.shape[0]):
            b = i % 2
            with torch.cuda.stream(copy_stream):
                copy_stream.wait_event(consumed[b])  # the compute that last read this buffer is done
                bufs[b].copy_(host[i], non_blocking=True)
                copied[b].record(copy_stream)
            main.wait_event(copied[b])
            compute(bufs[b], weight, out[i])
            consumed[b].record(main)
        return out  # all compute was on the caller's stream, so the caller's events see it end
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
