"""Symmetric-memory hand-off: stage 0 writes into stage 1's buffer over NVLink and raises a signal.

Stage 1 waits for the signal on its own stream. No send/recv, no NCCL channels: a copy kernel and
two 4-byte flags per micro-batch.

Two slots on stage 1, with credit-based flow control through the signal pads:
  READY[s] (stage 0 -> 1): slot s holds a new micro-batch;
  FREE[s]  (stage 1 -> 0): stage 1 has consumed slot s; stage 0 may overwrite it.
put_signal / wait_signal are GPU-side (a one-warp kernel on the current stream), so the host
never blocks. Stage 0 computes on its main stream and puts from a second stream, so micro-batch
i+1's compute overlaps micro-batch i's transfer. Each call leaves both FREE signals raised,
as it found them.

Prepared once: the symmetric buffer, its rendezvous, the side stream, the initial credits.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.distributed as dist

from ch4.baseline_pipeline_handoff import row_loss, stage
from ch4.dist_common import rank, symm_empty

DEVICES = ("cuda",)
READY, FREE = 0, 2          # signal channels READY + slot and FREE + slot
TIMEOUT_MS = 60_000         # a lost signal traps on the GPU after a minute instead of hanging


def prepare(w):
    wt = w.inputs["w"]
    data = w.inputs["x" if rank() == 0 else "target"]
    micro = data.shape[0]
    slots, handle = symm_empty((2, *data.shape[1:]), data.dtype, data.device)
    # Start from clean signal pads (a pooled allocation may carry an earlier handle's flags).
    handle.get_signal_pad(handle.rank, dtype=torch.int32).zero_()
    torch.cuda.synchronize()
    dist.barrier()
    if rank() == 1:
        for s in range(2):
            handle.put_signal(0, FREE + s, TIMEOUT_MS)   # both slots start free
        torch.cuda.synchronize()
    dist.barrier()

    if rank() == 0:
        x = data
        acts = torch.empty_like(x)
        peer_slots = handle.get_buffer(1, slots.shape, slots.dtype)
        side = torch.cuda.Stream()

        def stage0():
            main = torch.cuda.current_stream()
            for i in range(micro):
                s = i % 2
                stage(x[i], wt, out=acts[i])
                side.wait_stream(main)
                with torch.cuda.stream(side):
                    handle.wait_signal(1, FREE + s, TIMEOUT_MS)
                    peer_slots[s].copy_(acts[i])                 # the put: rank 1's memory, over NVLink
                    handle.put_signal(1, READY + s, TIMEOUT_MS)
            main.wait_stream(side)
            return acts
        stage0.keepalive = (handle, side)
        return stage0

    target = data
    losses = torch.empty(target.shape[:2], device=target.device)

    def stage1():
        for i in range(micro):
            s = i % 2
            handle.wait_signal(0, READY + s, TIMEOUT_MS)
            losses[i] = row_loss(stage(slots[s], wt), target[i])
            handle.put_signal(0, FREE + s, TIMEOUT_MS)
        return losses
    stage1.keepalive = handle
    return stage1


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
