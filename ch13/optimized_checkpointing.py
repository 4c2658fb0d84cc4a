"""Activation checkpointing: each block keeps only its input and recomputes its forward during the backward.

torch.utils.checkpoint (non-reentrant) around every block: the saved activations shrink from ~34 bytes per
token per hidden unit per block to the block inputs (2 bytes, bf16) plus one block's worth while it is being
recomputed, ≈ 4.6 GB -> 0.3 GB + 0.6 GB on the H100 size. The price is one more forward: 4 matmul passes
instead of 3, so at most ≈ 1.33x the time; measured 1.22x (50.8 against 41.7 ms) for 41% of the peak memory
(2178 against 5286 MB; profiles/h100/ch13-trainstep-1c29d51). A tradeoff, slower by design: the report gives
the slowdown beside the peak memory of both.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from torch.utils.checkpoint import checkpoint

from ch13.block import train_step

KIND = "tradeoff"


def prepare(w):
    x, model = w.inputs["x"], w.inputs["model"]
    return lambda: train_step(model, x, layer_fn=lambda blk, h: checkpoint(blk, h, use_reentrant=False))


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
