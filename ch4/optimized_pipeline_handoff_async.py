"""Non-blocking hand-off: isend/irecv into two alternating receive buffers, overlapped with compute.

Stage 0 computes micro-batch i+1 while micro-batch i travels; stage 1 receives i+1 while it
computes i.

Stage 0 queues each send and moves on (each activation has its own buffer, kept for backward);
stage 1 posts the receive of the next micro-batch before computing the current one, into the
buffer the previous micro-batch used (its compute is already queued before the receive, and
NCCL's stream waits for it). The same schedule as the symmetric-memory variant, on NCCL or Gloo.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.distributed as dist

from ch4.baseline_pipeline_handoff import row_loss, stage
from ch4.dist_common import rank


def prepare(w):
    wt = w.inputs["w"]
    if rank() == 0:
        x = w.inputs["x"]
        acts = torch.empty_like(x)

        def stage0():
            sends = []
            for i in range(x.shape[0]):
                stage(x[i], wt, out=acts[i])
                sends.append(dist.isend(acts[i], 1))
            for s in sends:
                s.wait()
            return acts
        return stage0
    target = w.inputs["target"]
    bufs = [torch.empty_like(target[0]) for _ in range(2)]
    losses = torch.empty(target.shape[:2], device=target.device)
    micro = target.shape[0]

    def stage1():
        recv = dist.irecv(bufs[0], 0)
        for i in range(micro):
            recv.wait()
            if i + 1 < micro:
                recv = dist.irecv(bufs[(i + 1) % 2], 0)
            losses[i] = row_loss(stage(bufs[i % 2], wt), target[i])
        return losses
    return stage1


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
