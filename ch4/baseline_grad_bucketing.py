"""All-reduce a transformer's 196 gradients one tensor at a time: 196 collectives per step.

Workload: the gradients of a 16-layer transformer (d=256, vocab 8192, context 1024; 15.0 M
parameters, 60 MB of fp32 gradients) on each of 2 ranks, each rank's from its own seed. One call
copies them into the reduced-gradient buffers and sums them across ranks, one all-reduce per
tensor, as a hand-written data-parallel loop does (`for p in params: all_reduce(p.grad)`). 98
of the 196 tensors (layer norms, some biases) hold 256 floats: 1 KiB each.

Bound: link, but it never gets there: each all-reduce pays a fixed ~20-30 µs (launch, NCCL's
protocol handshake, the kernel) whatever its size. Napkin math: 196 x ~25 µs ≈ 5 ms of fixed
cost against 60 MB / ~300 GB/s busbw ≈ 0.2 ms of data. Averaging (÷ world size) is left to the
learning rate.

Prepared once: the output buffers. Per call: the gradients (a new backward pass's).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.distributed as dist

from common import Workload
from ch4.dist_common import generator, link_bytes, rank, randn, world_size

BOUND = "link"
NPROC = 2


def param_shapes(quick: bool) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of the model, in registration order (DDP buckets them in reverse)."""
    layers, d = 16, (32 if quick else 256)
    vocab, ctx = (512, 64) if quick else (8192, 1024)
    shapes = {"tok_emb.weight": (vocab, d), "pos_emb.weight": (ctx, d)}
    for i in range(layers):
        p = f"layers.{i}."
        shapes.update({p + "ln1.weight": (d,), p + "ln1.bias": (d,),
                       p + "attn.qkv.weight": (3 * d, d), p + "attn.qkv.bias": (3 * d,),
                       p + "attn.proj.weight": (d, d), p + "attn.proj.bias": (d,),
                       p + "ln2.weight": (d,), p + "ln2.bias": (d,),
                       p + "mlp.fc1.weight": (4 * d, d), p + "mlp.fc1.bias": (4 * d,),
                       p + "mlp.fc2.weight": (d, 4 * d), p + "mlp.fc2.bias": (d,)})
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,)})
    return shapes


def make_inputs(seed: int, rank_: int, device, quick: bool) -> dict[str, torch.Tensor]:
    """One rank's gradients: a name -> tensor dict, as model.named_parameters() would give."""
    g = generator(seed, rank_)
    return {name: randn(shape, g, device, scale=1e-2) for name, shape in param_shapes(quick).items()}


def workload(seed, device, quick=False):
    grads = make_inputs(seed, rank(), device, quick)
    total = sum(t.numel() * t.element_size() for t in grads.values())
    n = world_size()
    return Workload(inputs=grads, bytes_moved=link_bytes("all_reduce", total, n), items=len(grads),
                         item_name="gradients", launches=len(grads), collective="all_reduce", message_bytes=total,
                         note=f"{len(grads)} gradients, {total / 2**20:.1f} MiB per rank, {n} ranks")


def reference(seed, rank, world_size, quick=False):
    """Every rank ends with the sum over ranks of each gradient."""
    per_rank = [make_inputs(seed, r, "cpu", quick) for r in range(world_size)]
    return tuple(sum(grads[name] for grads in per_rank) for name in per_rank[0])


def prepare(w):
    grads = list(w.inputs.values())
    outs = [torch.empty_like(t) for t in grads]

    def step():
        torch._foreach_copy_(outs, grads)  # the same one copy as the bucketed variant makes
        for t in outs:
            dist.all_reduce(t)
        return tuple(outs)
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
