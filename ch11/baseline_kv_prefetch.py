"""Attention over a KV cache offloaded to host memory, one layer at a time on one stream.

Workload: 8 layers; each layer's K and V (32 heads x 4096 positions x 128,
bf16: 64 MiB per layer) live in pinned host memory, as in KV-cache offload.
For each layer the cache is copied to the GPU, then a chunk of 8192 queries
attends to it (scaled_dot_product_attention). On one stream the copy of
layer l+1 waits for the attention of layer l: time = 8 x (copy + attention).

Per call: the offloaded cache kv (it changes as decoding goes on, so it is
read from the host every call) and the queries q. Prepared once: the device
buffer and the output.

Bound: transfer. Napkin math: 67 MB at ~55 GB/s ≈ 1.2 ms per layer; attention
4 x 32 x 8192 x 4096 x 128 = 550 GFLOP, ~1 ms at a few hundred TFLOP/s.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.nn.functional as F

from common import Workload

BOUND = "transfer"
DEVICES = ("cuda",)
LAYERS, HEADS, KV_LEN, Q_LEN, DIM = 8, 32, 4096, 8192, 128


def workload(seed: int, device, quick: bool = False) -> Workload:
    layers = 4 if quick else LAYERS
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn(layers, 2, HEADS, KV_LEN, DIM, generator=g).to(torch.bfloat16).pin_memory()
    gd = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(layers, HEADS, Q_LEN, DIM, device=device, generator=gd).to(torch.bfloat16)
    return Workload(inputs={"kv": kv, "q": q}, flops=4.0 * layers * HEADS * Q_LEN * KV_LEN * DIM,
                    bytes_moved=2.0 * kv.numel(), items=layers, item_name="layers")


def attend(q: torch.Tensor, kv: torch.Tensor, out: torch.Tensor) -> None:
    # 4-D (batch, heads, sequence, dim) inputs: with 3-D ones SDPA falls back to its slow math path
    out.copy_(F.scaled_dot_product_attention(q[None], kv[0][None], kv[1][None])[0])


def stages(w: Workload):
    kv, q = w.inputs["kv"], w.inputs["q"]
    buf = torch.empty(kv.shape[1:], dtype=kv.dtype, device=q.device)
    out = torch.empty_like(q[0])
    return kv.shape[0], {"copy_kv": lambda: buf.copy_(kv[0], non_blocking=True),
                         "attention": lambda: attend(q[0], buf, out)}


def prepare(w: Workload):
    kv, q = w.inputs["kv"], w.inputs["q"]
    buf = torch.empty(kv.shape[1:], dtype=kv.dtype, device=q.device)
    out = torch.empty_like(q)

    def run():
        for layer in range(kv.shape[0]):
            buf.copy_(kv[layer], non_blocking=True)  # waits behind the previous layer's attention
            attend(q[layer], buf, out[layer])
        return out
    return run


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
