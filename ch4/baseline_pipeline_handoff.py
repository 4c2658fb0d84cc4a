"""Two pipeline stages on two ranks, a blocking send/recv per micro-batch: compute and transfer take turns.

Stage 0 sends each micro-batch's activation to stage 1 and waits for the transfer before it
computes the next one; stage 1 waits for each receive before it computes.

Workload: 8 micro-batches of 2048 x 4096 bf16 activations (16 MiB each). Rank 0 holds stage 0
(h = tanh(x @ W0), W0 4096 x 4096) and the input micro-batches; rank 1 holds stage 1
(y = tanh(h @ W1)) and the targets, and returns each row's squared error against its target.
Rank 0 returns its activations (a training pipeline keeps them for the backward pass). Quick:
4 micro-batches of 8 x 32.

Bound: link and compute in series on each rank. Napkin math per micro-batch: 2 x 2048 x 4096²
= 69 GFLOP ≈ 0.11 ms at ~600 TFLOP/s bf16 per stage; 16 MiB at the 387.6 GB/s P2P copy rate
measured on 2 H200s ≈ 0.04 ms (a blocking send/recv took 0.06-0.09 ms there). Serial per rank
≈ 8 x (0.11 + 0.04) ms plus the other stage's fill; overlapped ≈ 8 x 0.11 ms + one hand-off.

Prepared once: each stage's weights and the activation buffers. Per call: the input
micro-batches (rank 0) and the targets (rank 1).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.distributed as dist

from common import Workload
from ch4.dist_common import generator, link_bytes, rank, randn, world_size

BOUND = "link"
NPROC = 2
DTYPE = torch.bfloat16


def sizes(quick: bool):
    return (4, 8, 32) if quick else (8, 2048, 4096)  # micro-batches, rows, width


def make_inputs(seed: int, stage: int, device, quick: bool) -> dict:
    """Stage `stage`'s inputs: its weight, and the micro-batches (stage 0) or the targets (stage 1)."""
    micro, rows, d = sizes(quick)
    inputs = {"w": randn((d, d), generator(seed, stage, stream=1), device, DTYPE, scale=d ** -0.5)}
    name = "x" if stage == 0 else "target"
    inputs[name] = randn((micro, rows, d), generator(seed, stage, stream=2), device, DTYPE, scale=0.5)
    return inputs


def workload(seed, device, quick=False):
    if world_size() != 2:
        raise RuntimeError(f"pipeline_handoff has exactly two stages: run it on 2 ranks, not {world_size()}")
    micro, rows, d = sizes(quick)
    act_bytes = micro * rows * d * DTYPE.itemsize
    return Workload(inputs=make_inputs(seed, rank(), device, quick), once=("w",), flops=2.0 * micro * rows * d * d,
                    bytes_moved=link_bytes("send_recv", act_bytes, 2), collective="send_recv",
                    message_bytes=act_bytes, items=micro, item_name="micro-batches", precision="bf16",
                    note=f"{micro} micro-batches of {rows} x {d} bf16, 2 stages")


def stage(h: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    return torch.tanh(h @ w, out=out)


def row_loss(y: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (y.float() - target.float()).pow(2).mean(dim=-1)


def reference(seed, rank, world_size, quick=False):
    s0, s1 = make_inputs(seed, 0, "cpu", quick), make_inputs(seed, 1, "cpu", quick)
    acts = stage(s0["x"].float(), s0["w"].float()).to(DTYPE)
    if rank == 0:
        return acts
    return row_loss(stage(acts.float(), s1["w"].float()).to(DTYPE), s1["target"])


def stages(w):
    """One micro-batch's compute and one hand-off, each alone. The compute is all a rank does per micro-batch:
    on rank 1 the stage and its row loss. The loss's five element-wise and reduction kernels took 107 µs a
    micro-batch on 2 H200s (the mean over the trace's 16), longer than the 92 µs matmul
    (profiles/h200x2/ch4-80dc133/pipeline-a20afe4); timing the stage alone left them out, and the baseline
    then looked 54% slower than serial."""
    wt = w.inputs["w"]
    data = w.inputs["x" if rank() == 0 else "target"]
    buf = torch.empty_like(data[0])
    peer = 1 - rank()

    def compute():
        return stage(data[0], wt) if rank() == 0 else row_loss(stage(data[0], wt), data[0])

    def hand_off():
        if rank() == 0:
            dist.send(data[0], peer)
        else:
            dist.recv(buf, peer)
    return data.shape[0], {"compute": compute, "hand_off": hand_off}


def prepare(w):
    wt = w.inputs["w"]
    if rank() == 0:
        x = w.inputs["x"]
        acts = torch.empty_like(x)

        def stage0():
            for i in range(x.shape[0]):
                stage(x[i], wt, out=acts[i])
                dist.send(acts[i], 1)  # returns when the transfer is done: the next micro-batch waits
            return acts
        return stage0
    target = w.inputs["target"]
    buf = torch.empty_like(target[0])
    losses = torch.empty(target.shape[:2], device=target.device)

    def stage1():
        for i in range(target.shape[0]):
            dist.recv(buf, 0)
            losses[i] = row_loss(stage(buf, wt), target[i])
        return losses
    return stage1


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
