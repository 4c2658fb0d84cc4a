"""Decoding without a KV cache: each new token recomputes the whole prefix.

Workload: the ~1B model (bf16) on a GPU, 4 requests 1024 tokens in, one decode step: the token fed
this step is appended to the prefix and the model runs over all 1025 positions to get the last
one's logits. On a CPU: the small model, fp32, 2 requests 256 (quick 64) tokens in; --quick on a GPU:
the small model in bf16.
The GPU size (without --quick) is the chapter's result; the CPU and --quick sizes only check that
the pair runs and verifies, and their times are not results.

Prepared once: the model. Per call: a request, as in decode_graph: its prefix, its token and its cache,
prefilled with the prefix in workload() (untimed). This baseline reads no cache and runs the model over the
prefix and the token, all 1025 positions; the cached variants run one step over the cache, as a server that
kept it would, and write the token's position (declared updated).

Bound: compute, at this size, though the pair is measured against the memory floor of the step it
should be. Napkin math (H100): 4 x 1025 tokens x 2 x 0.79 GFLOP ≈ 6.5 TFLOP per step ≈ 9 ms at
~700 TFLOP/s of bf16 matmul, growing linearly with the context (quadratically over a generation);
the cached step reads 1.574 GB of weights (the embedding: one row) + 4 x 1025 x 32 KiB of filled KV
≈ 1.708 GB ≈ 0.57 ms at 3008 GB/s.
Run `python ch16/kv_cache_sweep.py` for the growth with context.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch16.decode import decode_workload
from ch16.model import forward_no_cache

BOUND = "memory"  # the fewest bytes: the cached step's (weights + KV once); the baseline is far from it


def workload(seed: int, device, quick: bool = False):
    gpu = torch.device(device).type == "cuda"
    batch, context = (4, 1024) if gpu and not quick else (2, 64 if quick else 256)
    return decode_workload(seed, device, quick, batch, context)


def prepare(w):
    model, prefix, token = w.inputs["model"], w.inputs["prefix"], w.inputs["token"]

    @torch.no_grad()
    def step():
        tokens = torch.cat([prefix, token], dim=1)  # the loop keeps the tokens and appends the new one
        return forward_no_cache(model, tokens)
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
