"""Data-parallel training step: forward, backward, then all-reduce the gradients in buckets.

Workload: an 8-layer MLP (2048 -> 2048 linear + tanh per layer, fp32; 33.6 M parameters,
134 MB of gradients) on 2 ranks, each with its own batch of 256 rows and targets; loss = sum of
squared errors / rows. One call: forward, backward, then the bucketed all-reduce of
optimized_grad_bucketing (one all-reduce per bucket of ≤ 25 MiB: here one layer each), after
the whole backward has finished. Quick: 4 layers of 64, 16 rows.

Bound: compute, with the communication in series behind it. Napkin math: 6 x 256 x 2048² x 8
= 52 GFLOP (forward 2, backward 4 per multiply-add) ≈ 1.2 ms at ~45 TFLOP/s fp32, then 134 MB
all-reduced at ~300 GB/s busbw ≈ 0.45 ms during which the SMs idle.

Prepared once: the weights (as a real program's model). Per call: the batch and its targets.
The output is every parameter's summed gradient, in parameter order.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.distributed as dist

from common import Workload
from ch4.dist_common import bucket_cap, bucket_views, generator, link_bytes, plan_buckets, rank, randn, world_size

BOUND = "compute"
NPROC = 2


def sizes(quick: bool):
    return (4, 64, 16) if quick else (8, 2048, 256)  # layers, width, rows per rank


def make_inputs(seed: int, rank_: int, device, quick: bool) -> dict:
    """The weights come from the seed alone (every rank holds the same model); the batch from (seed, rank)."""
    layers, d, rows = sizes(quick)
    gw, gx = generator(seed, 0, stream=1), generator(seed, rank_)
    inputs = {}
    for i in range(layers):
        inputs[f"layer{i}.weight"] = randn((d, d), gw, device, scale=d ** -0.5)
        inputs[f"layer{i}.bias"] = randn((d,), gw, device, scale=0.1)
    inputs["x"] = randn((rows, d), gx, device)
    inputs["y"] = randn((rows, d), gx, device, scale=0.5)
    return inputs


def param_names(inputs: dict) -> list[str]:
    return [k for k in inputs if k.startswith("layer")]


def workload(seed, device, quick=False):
    layers, d, rows = sizes(quick)
    inputs = make_inputs(seed, rank(), device, quick)
    params = param_names(inputs)
    grad_bytes = sum(inputs[k].numel() * inputs[k].element_size() for k in params)
    n = world_size()
    return Workload(inputs=inputs, once=tuple(params), flops=6.0 * rows * d * d * layers,
                    bytes_moved=link_bytes("all_reduce", grad_bytes, n), collective="all_reduce",
                    message_bytes=grad_bytes, items=rows * n, item_name="samples",
                    note=f"{layers} x {d}² MLP, {rows} rows per rank, {grad_bytes / 2**20:.0f} MiB of gradients, {n} ranks")


def leaf_params(w) -> list[torch.Tensor]:
    """The model's parameters: leaves that share the weights' storage (loading a checkpoint, once)."""
    return [w.inputs[k].detach().requires_grad_(True) for k in param_names(w.inputs)]


def loss_fn(params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    h = x
    for weight, bias in zip(params[0::2], params[1::2]):
        h = torch.tanh(torch.nn.functional.linear(h, weight, bias))
    return ((h - y) ** 2).sum() / x.shape[0]


def reference(seed, rank, world_size, quick=False):
    """Every rank ends with the sum over ranks of each parameter's gradient."""
    total = None
    for r in range(world_size):
        inputs = make_inputs(seed, r, "cpu", quick)
        params = [inputs[k].requires_grad_(True) for k in param_names(inputs)]
        grads = torch.autograd.grad(loss_fn(params, inputs["x"], inputs["y"]), params)
        total = list(grads) if total is None else [a + b for a, b in zip(total, grads)]
    return tuple(total)


def prepare(w):
    params = leaf_params(w)
    x, y = w.inputs["x"], w.inputs["y"]
    flats, views = bucket_views(params, plan_buckets(params, bucket_cap(params)))

    def step():
        for p in params:
            p.grad = None
        loss_fn(params, x, y).backward()
        torch._foreach_copy_(views, [p.grad for p in params])
        for flat in flats:  # only now, with the SMs idle
            dist.all_reduce(flat)
        return tuple(views)
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
