"""Sharded parameters (FSDP-style): all-gather each layer's weight when the forward reaches it.

Workload: 8 linear layers of 4096 x 4096 bf16 (32 MiB each), every weight split in 2 shards:
each rank keeps half of every layer (FSDP's flat shard) and its own batch of 1024 rows. Per
layer: all-gather the full weight into a buffer, then h = tanh(h @ W). The all-gather and the
matmul take turns: the link idles while the SMs compute and the SMs idle while the link copies.
Quick: 4 layers of 64, 16 rows.

Bound: link and compute in series. Napkin math per layer: all-gather sends 16 MiB per rank
(busbw = algbw x (n-1)/n) ≈ 45 µs at ~370 GB/s; 2 x 1024 x 4096² = 34 GFLOP ≈ 55 µs at
~600 TFLOP/s bf16. Serial ≈ 8 x 100 µs; overlapped ≈ 8 x 55 µs + one gather.

Prepared once: the shards and the gather buffer. Per call: the batch.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from common import Workload
from ch4.dist_common import all_gather_into, generator, link_bytes, rank, randn, world_size

BOUND = "link"
NPROC = 2
DTYPE = torch.bfloat16


def sizes(quick: bool):
    return (4, 64, 16) if quick else (8, 4096, 1024)  # layers, width, rows per rank


def full_weights(seed: int, quick: bool) -> torch.Tensor:
    """Every layer's full weight (layers, d*d), from the seed alone, on the CPU."""
    layers, d, _ = sizes(quick)
    return randn((layers, d * d), generator(seed, 0, stream=1), "cpu", DTYPE, scale=d ** -0.5)


def make_inputs(seed: int, rank_: int, world_size_: int, device, quick: bool) -> dict:
    layers, d, rows = sizes(quick)
    shards = full_weights(seed, quick).chunk(world_size_, dim=1)[rank_].contiguous().to(device)
    return {"shards": shards, "x": randn((rows, d), generator(seed, rank_), device, DTYPE)}


def workload(seed, device, quick=False):
    layers, d, rows = sizes(quick)
    n = world_size()
    inputs = make_inputs(seed, rank(), n, device, quick)
    layer_bytes = d * d * DTYPE.itemsize / n  # each rank's shard of one layer: its all-gather message
    return Workload(inputs=inputs, once=("shards",), flops=2.0 * rows * d * d * layers,
                    bytes_moved=layers * link_bytes("all_gather", layer_bytes, n), collective="all_gather",
                    message_bytes=layers * layer_bytes, items=layers, item_name="layers",
                    note=f"{layers} layers of {d}² bf16 sharded over {n} ranks, {rows} rows per rank")


def layer(h: torch.Tensor, weight_flat: torch.Tensor) -> torch.Tensor:
    d = h.shape[-1]
    return torch.tanh(h @ weight_flat.view(d, d))


def reference(seed, rank, world_size, quick=False):
    """This rank's batch through the full (unsharded) layers, rounded to bf16 after each layer as on the GPU."""
    h = make_inputs(seed, rank, world_size, "cpu", quick)["x"]
    for wf in full_weights(seed, quick):
        h = layer(h.float(), wf.float()).to(DTYPE)
    return h


def gather_buffers(w, count: int) -> list[torch.Tensor]:
    shards = w.inputs["shards"]
    return [shards.new_empty(shards.shape[1] * world_size()) for _ in range(count)]


def stages(w):
    """One layer's all-gather and one layer's compute, each alone (the harness places variants between
    serial and ideal overlap from these)."""
    shards, x = w.inputs["shards"], w.inputs["x"]
    (full,) = gather_buffers(w, 1)
    return shards.shape[0], {"all_gather": lambda: all_gather_into(full, shards[0]),
                             "compute": lambda: layer(x, full)}


def prepare(w):
    shards, x = w.inputs["shards"], w.inputs["x"]
    (full,) = gather_buffers(w, 1)

    def forward():
        h = x
        for i in range(shards.shape[0]):
            all_gather_into(full, shards[i])   # waits: the matmul needs it now
            h = layer(h, full)
        return h
    return forward


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
