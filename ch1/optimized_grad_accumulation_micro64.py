"""Gradient accumulation over 64 micro-batches: 1/64 of the activations held at once, for more time.

The baseline's gradient, computed as 64 forward/backward passes of 1024 tokens each, every
loss scaled by 1/64; each backward adds into the same .grad buffers and frees its slice's activations
before the next slice runs. Peak memory falls by the activations of 63/64 of the batch. Time rises:
each slice's products are 64 times smaller, each slice pays its own launches and the weights' casts under
autocast, and each backward reads and writes the fp32 gradients once more (63 x 134 MB of extra traffic).
ch1/grad_accumulation_sweep.py measures the total for k = 1 to 128; it does not take it apart.
A trade-off, not an optimization: it is what lets a batch that does not fit run at all.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch1.baseline_grad_accumulation import gradient_step
from common import Workload

KIND = "tradeoff"
MICRO_BATCHES = 64


def prepare(w: Workload):
    model, x, y = w.inputs["model"], w.inputs["x"], w.inputs["y"]
    return lambda: gradient_step(model, x, y, micro_batches=MICRO_BATCHES)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
