"""A preallocated static KV cache: the step computes K and V for the new token only, writes them at
its position, and attends over the cache: one token's worth of matmul work instead of 1025."""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch

from ch16.model import KVCache, decode_step


def prepare(w):
    model, token, pos = w.inputs["model"], w.inputs["token"], w.inputs["input_pos"]
    cache = KVCache(w.inputs["k_cache"], w.inputs["v_cache"])

    @torch.no_grad()
    def step():
        return decode_step(model, cache, token, pos)
    return step


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
