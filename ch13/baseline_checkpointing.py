"""A stack of 8 transformer blocks trained forward and backward, every activation kept for the backward.

Workload (GPU): 8 blocks of ch13/block.py (d=2048, 16 heads, MLP 8192), batch 4 x 2048 tokens, bf16.
On a CPU and --quick: 2 tiny blocks (d=64), fp32.

Prepared once: the blocks' weights. Per call: the input activations x.
The call returns dL/dx, every parameter's gradient and the loss (gradients are returned, not accumulated,
so every call gives the same answer to bf16's precision: see ch13/block.py's train_step).

Bound: compute. Napkin math: forward 8 x 0.89 TFLOP (ch13/block.py: BlockConfig.forward_flops) ≈ 7.1 TFLOP,
backward twice that: ≈ 21 TFLOP ≈ 33 ms at ~650 TFLOP/s; measured 41.7 ms, 514 TFLOP/s (67% of the bf16
ceiling: attention's backward, the element-wise work and the host take the rest;
profiles/h100/ch13-trainstep-1c29d51). Memory: the saved activations are ~34 bytes per
token per hidden unit per block in bf16 (Korthikanti et al. 2022, without the attention matrix that SDPA
never stores): 34 x 8192 tokens x 2048 x 8 blocks ≈ 4.6 GB on top of 0.8 GB of weights and 0.8 GB of their
gradients.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import dataclasses

import torch

from ch13.block import SIZES, build_blocks, random_input, step_dtype, train_step
from common import Workload

BOUND = "compute"


def config(device, quick: bool):
    on_gpu = torch.device(device).type == "cuda"
    return dataclasses.replace(SIZES["h100"] if on_gpu and not quick else SIZES["tiny"], layers=8 if on_gpu else 2)


def workload(seed: int, device, quick: bool = False) -> Workload:
    cfg, dtype = config(device, quick), step_dtype(device)
    model = build_blocks(cfg, device, dtype, seed=0)  # the same weights for every seed: seed varies the batch
    x = random_input(cfg, device, dtype, seed)
    return Workload(inputs={"x": x, "model": model}, flops=3 * cfg.forward_flops(),
                    # weights read forward and backward, their gradients written; x read, dL/dx written
                    bytes_moved=x.element_size() * (3 * cfg.layers * cfg.params_per_block() + 2 * x.numel()),
                    items=cfg.batch * cfg.seq, item_name="tokens")


def prepare(w: Workload):
    x, model = w.inputs["x"], w.inputs["model"]
    return lambda: train_step(model, x)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
