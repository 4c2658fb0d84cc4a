"""A decode step for a batch of requests of different lengths, KV cache allocated contiguously at max length.

Workload: the ~1B model (bf16) on a GPU, 32 requests whose context lengths are drawn log-normal
(median 1024, σ 0.6, clipped to 64-4000) from the seed, max length 4096; on a CPU the small model,
fp32 (bf16 with --quick on a GPU), 4 requests of 8-120 tokens, max length 128. One new token per
request, each at its own position; the call returns the logits (32, vocab). The requests' KV (prefilled from seeded
prompts) is prepared once; each variant lays it out its own way in prepare().
The GPU size (without --quick) is the chapter's result; the CPU and --quick sizes only check that
the pair runs and verifies, and their times are not results.

Both layouts' steps are captured as CUDA graphs on a GPU, so launches do not hide the KV reads.

Bound: memory. Napkin math (H100): the step reads 1.574 GB of weights + the KV of every request. This
baseline reserves 32 x 4096 x 32 KiB = 4 GiB of KV and, padded to the longest request in the batch,
reads up to 32 x ~3000 x 32 KiB ≈ 3 GB of it per step (masked); the tokens actually cached are
~32 x 1200 x 32 KiB ≈ 1.3 GB. Memory per request: 128 MiB here, ~35 MiB paged (the workload's note
gives how many requests fit in 16 GiB either way).

This is how the layout invites a first attention: one masked product over the batch's slabs, padded to
the longest request. Measured on the H100 at 155bfa6 (profiles/h100/ch16-155bfa6): 7.178 ms a step,
against 3.475 ms paged. scripts/paged_probe.py reads the same slabs with the paged variant's kernel, each
request only up to its own length: 3.420 ms against 9.250 (6a8f3c4, other lengths), so the gain is
reading only each request's keys; paging adds 3% at the same split and tile, for a quarter of the memory.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import math

import torch

from common import Workload
from ch16.decode import capture_graph, served_model, step_work
from ch16.model import KVCache, prefill, random_tokens
from ch16.paged import ContiguousKV, varlen_decode_step

BOUND = "memory"
PAGE = 16


def setup(device, quick: bool) -> dict:
    if torch.device(device).type == "cuda" and not quick:
        return dict(requests=32, median=1024, sigma=0.6, lo=64, hi=4000, max_len=4096)
    return dict(requests=4, median=40, sigma=0.6, lo=8, hi=120, max_len=128)


def draw_lengths(s: dict, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(s["requests"], generator=g, dtype=torch.float64) * s["sigma"] + math.log(s["median"])
    return [int(min(max(round(math.exp(v)), s["lo"]), s["hi"])) for v in x.tolist()]


def capacity(budget_bytes: float, lengths: list[int], max_len: int, kv_bytes_per_token: int) -> tuple[int, int]:
    """Requests of this length mix that fit in the budget: contiguous at max_len, paged by PAGE-token blocks."""
    paged_mean = sum(math.ceil((n + 1) / PAGE) * PAGE for n in lengths) / len(lengths)
    return int(budget_bytes // (max_len * kv_bytes_per_token)), int(budget_bytes // (paged_mean * kv_bytes_per_token))


def workload(seed: int, device, quick: bool = False) -> Workload:
    s = setup(device, quick)
    model = served_model(device, quick)
    cfg, dtype = model.cfg, model.output.weight.dtype
    lengths = draw_lengths(s, seed)
    ks, vs = [], []
    with torch.no_grad():
        for i, n in enumerate(lengths):
            cache = KVCache.empty(cfg, 1, n, device, dtype)
            prefill(model, random_tokens(cfg, (1, n), seed * 1000 + i, device), cache)
            ks.append(cache.k[:, 0])
            vs.append(cache.v[:, 0])
    token = random_tokens(cfg, (s["requests"], 1), seed + 1, device)
    kvb = cfg.kv_bytes_per_token(dtype)
    flops, _ = step_work(model, 1, 0)
    bytes_moved = model.weight_bytes() + sum(n + 1 for n in lengths) * kvb
    fit_c, fit_p = capacity(16 * 2**30, lengths, s["max_len"], kvb)
    return Workload(
        inputs={"model": model, "setup": s, "lengths_list": lengths, "token": token,
                "lengths": torch.tensor(lengths, device=device),
                "k_packed": torch.cat(ks, 2), "v_packed": torch.cat(vs, 2)},
        once=("lengths", "k_packed", "v_packed"),
        flops=flops * s["requests"], bytes_moved=bytes_moved, items=s["requests"], item_name="tokens",
        note=f"{s['requests']} requests, {min(lengths)}-{max(lengths)} tokens (mean {sum(lengths) / len(lengths):.0f}), "
             f"max_len {s['max_len']}: contiguous {s['max_len'] * kvb / 2**20:.1f} MiB/request, paged "
             f"{sum(math.ceil((n + 1) / PAGE) * PAGE for n in lengths) / len(lengths) * kvb / 2**20:.1f} MiB/request; "
             f"in 16 GiB of KV: {fit_c} vs {fit_p} requests")


def prepare(w: Workload):
    model, s, lengths = w.inputs["model"], w.inputs["setup"], w.inputs["lengths_list"]
    c = model.cfg
    kv = ContiguousKV(c.n_layers, s["requests"], c.n_kv_heads, s["max_len"], c.head_dim,
                      model.output.weight.dtype, w.inputs["token"].device)
    kv.load(w.inputs["k_packed"], w.inputs["v_packed"], lengths)
    read_len = max(lengths) + 1   # padded to the longest request of the batch, masked per request
    token, pos = w.inputs["token"], w.inputs["lengths"]

    def step():
        return varlen_decode_step(model, token, pos, kv.write, lambda i, q, p: kv.attend(i, q, p, read_len))
    return graphed(step, kv)


def graphed(step, kv):
    """On a GPU the step is one CUDA graph (so launches do not hide the KV reads), else eager."""
    cache = kv.k_pages if hasattr(kv, "k_pages") else kv.k
    fn = capture_graph(step) if cache.is_cuda else torch.no_grad()(step)
    fn.kv = kv
    return fn


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
