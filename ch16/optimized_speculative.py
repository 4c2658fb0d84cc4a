"""Speculative decoding: the target's first layers (an early-exit draft) propose k tokens, the target
checks all of them in one pass of k+1 tokens and keeps the agreeing prefix plus its own next token.

At batch 1 a target pass of k+1 tokens costs about one step (the weights are read once either way),
so each round emits E = (1 - α^(k+1)) / (1 - α) tokens for one target pass plus k draft steps. The
output is the target's greedy output: every emitted token is the target's argmax. Each fixed-shape
forward is a CUDA graph (on a GPU), captured once; one host sync per round reads how many were kept.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from ch16.model import KVCache
from ch16.speculative import SpeculativeDecoder


def prepare(w):
    s = w.inputs["settings"]
    cache = KVCache(w.inputs["k_cache"], w.inputs["v_cache"])
    draft_cache = KVCache(w.inputs["draft_k_cache"], w.inputs["draft_v_cache"])
    return SpeculativeDecoder(w.inputs["model"], cache, draft_cache, s["depth"], w.inputs["prompt"], s["n_new"], s["k"])


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
