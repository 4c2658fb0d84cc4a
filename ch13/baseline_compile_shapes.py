"""Two transformer blocks' forward over a stream of requests of 8 different lengths, eager.

Workload (GPU): 2 blocks of ch13/block.py at d=1024 (16 heads, MLP 4096), bf16; one call serves 8 requests,
one sequence each (a prefill as requests arrive), of lengths 100, 180, ..., 660 tokens (causal attention).
On a CPU and --quick: the tiny block, lengths 5, 9, 13, 17.

Prepared once: the weights. Per call: the 8 inputs x0..x7.

Bound: launch. Each forward is ~25 kernels per block, and at 100-660 tokens each matmul is a few
microseconds. Napkin math: 2 x 12.6 M parameters x 2 FLOPs x 3040 tokens ≈ 0.15 TFLOP ≈ 0.24 ms at
~650 TFLOP/s (more at these small shapes, which do not fill the GPU), against 8 x 2 x 25 = 400 launches
of ~5 us of host time each ≈ 2 ms: the GPU waits on the host. (At 8 sequences per request the GPU's work
is 8x larger and about the host's: the chapter's run at d19f8c2 measured the graphs at 0.994x there,
profiles/h100/ch13-d19f8c2.) The variants replay CUDA graphs, one per length or one per bucket of lengths;
what they cost in memory is ch13/graph_memory.py's measurement.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import dataclasses

import torch

from ch13.block import SIZES, BlockConfig, build_blocks, step_dtype
from common import Workload

BOUND = "launch"
GPU_CFG = BlockConfig(dim=1024, heads=16, mlp=4096, batch=1, seq=0, layers=2)


def lengths(device, quick: bool):
    gpu = torch.device(device).type == "cuda" and not quick
    return list(range(100, 661, 80)) if gpu else [5, 9, 13, 17]


def workload(seed: int, device, quick: bool = False) -> Workload:
    gpu = torch.device(device).type == "cuda" and not quick
    cfg = GPU_CFG if gpu else dataclasses.replace(SIZES["tiny"], layers=2)
    dtype = step_dtype(device)
    model = build_blocks(cfg, device, dtype, seed=0).eval()
    g = torch.Generator(device=device).manual_seed(seed)
    xs = {f"x{i}": torch.randn(cfg.batch, t, cfg.dim, device=device, generator=g).to(dtype)
          for i, t in enumerate(lengths(device, quick))}
    tokens = sum(x.shape[0] * x.shape[1] for x in xs.values())
    flops = sum(dataclasses.replace(cfg, batch=x.shape[0], seq=x.shape[1]).forward_flops() for x in xs.values())
    return Workload(inputs={**xs, "model": model}, flops=flops, items=tokens, item_name="tokens",
                    bytes_moved=2 * x_bytes(xs) + len(xs) * cfg.layers * cfg.params_per_block() * 2,
                    launches=len(xs) * cfg.layers * 25)


def x_bytes(xs) -> int:
    return sum(x.numel() * x.element_size() for x in xs.values())


def batches(w):
    return [w.inputs[k] for k in sorted((k for k in w.inputs if k.startswith("x")), key=lambda k: int(k[1:]))]


def prepare(w: Workload):
    model, xs = w.inputs["model"], batches(w)

    @torch.no_grad()
    def call():
        return tuple(model(x) for x in xs)
    return call


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
