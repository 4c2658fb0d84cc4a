"""A tensor-parallel decode step on 2 ranks, all-reduce through NCCL (Gloo on CPUs).

Each rank holds half the heads and half the MLP (column-parallel Q/K/V and gate/up, row-parallel O
and down) and its half of the KV cache; after attention and after the MLP of every layer the
partial outputs are summed with one all-reduce: 2 x 16 = 32 all-reduces of 4 KiB (batch 1, hidden
2048, bf16) per token. On a GPU the step (all-reduces included) is captured in a CUDA graph, so what
differs between the variants is the all-reduce itself, not launch overhead.

Workload: the ~1B model (bf16) on 2 GPUs, one request 1024 tokens in; on CPUs the
small model, fp32, context 64 (with --quick on GPUs, the same in bf16). Weights are drawn on the CPU
from the seed (the same on every rank and in the single-process reference), then each rank keeps its shard.
The GPU size (without --quick) is the chapter's result; the CPU and --quick sizes only check that
the pair runs and verifies, and their times are not results.

Prepared once: each rank's shard of the weights and, in prepare(), the step's CUDA graph. Per call: the token,
its position and this rank's half of the cache, prefilled in workload() (untimed); one step, its all-reduces
included, writes the token's position (declared updated).

Bound: memory per rank, plus the all-reduces' latency. Napkin math (H200): each rank reads 0.87 GB a
token (half the layers, the whole output head, half the KV), 0.205 ms at the measured 4255 GB/s; 32
all-reduces at NCCL's ~15-20 µs would be 0.5-0.6 ms, so the prediction was that latency sets the step.
Measured on 2 H200s (profiles/h200x2/ch16-6a47edb, tp_decode_breakdown.py): 2.542 ms a token, 8% of the
copy rate. The step without its all-reduces (892 kernels) takes 2.27 ms; its 32 all-reduces add 8.3 µs each
(10.5% of the step).
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import contextlib
import copy

import torch
import torch.distributed as dist

from common import Workload
from ch16.decode import MODEL_SEED, capture_graph, compile_like_eager
from ch16.model import CONFIGS, KVCache, build_model, cast_model, decode_step, prefill, random_tokens
from ch16.symmetric_memory_inference import ShardedModel, StaticKV, Transport, shard_model

BOUND = "memory"
NPROC = 2
_full: dict = {}


def sizes(device, quick: bool) -> tuple[str, int]:
    gpu = torch.device(device).type == "cuda" and not quick
    return ("llama-1b", 1024) if gpu else ("small", 64)


def full_model(cfg_name: str, dtype, device):
    """The whole model, drawn on the CPU in fp32 (so every rank and the reference draw the same weights), then
    cast to `dtype` and moved to `device`. Cached per process: workload() and reference() share it."""
    key = (cfg_name, dtype, str(device))
    if key not in _full:
        model = build_model(CONFIGS[cfg_name], MODEL_SEED, "cpu", torch.float32)
        _full[key] = cast_model(cast_model(model, dtype=dtype), device=device)
    return _full[key]


def request(cfg, seed: int, context: int):
    prefix = random_tokens(cfg, (1, context), seed, "cpu")
    token = random_tokens(cfg, (1, 1), seed + 1, "cpu")
    return prefix, token


def workload(seed: int, device, quick: bool = False) -> Workload:
    device = torch.device(device)
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    cfg_name, context = sizes(device, quick)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    full = full_model(cfg_name, dtype, device)
    cfg = full.cfg
    prefix, token = request(cfg, seed, context)
    cache = KVCache.empty(cfg, 1, context + 64, device, dtype)
    with torch.no_grad():  # prefill with the whole model, then keep this rank's KV heads
        prefill(full, prefix.to(device), cache)
    kh = cfg.n_kv_heads // world
    heads = slice(rank * kh, (rank + 1) * kh)
    shard = {k: v.to(device).contiguous() for k, v in shard_model(full, world, rank).items()}
    k_cache, v_cache = cache.k[:, :, heads].contiguous(), cache.v[:, :, heads].contiguous()
    del cache
    flops, bytes_moved = rank_work(full, shard, world, context + 64)
    return Workload(inputs={"cfg": cfg, "shard": shard, "token": token.to(device), "input_pos": torch.tensor([context], device=device),
                            "k_cache": k_cache, "v_cache": v_cache},
                    updated=("k_cache", "v_cache"), flops=flops, bytes_moved=bytes_moved, items=1,
                    item_name="tokens", note=f"{cfg.n_params() / 1e9:.2f}B params over {world} ranks, context {context}")


def rank_work(full, shard: dict, world: int, keys_read: int) -> tuple[float, float]:
    """(flops, bytes) of one rank's step: its shard's weights once (the embedding: one row; the output head is
    replicated, so every rank reads all of it), and its share of the KV heads and of attention's FLOPs."""
    cfg, esize = full.cfg, full.output.weight.element_size()
    weights = sum(t.numel() for name, t in shard.items() if name != "emb") + cfg.dim
    attention = 4.0 * cfg.n_layers * cfg.n_heads * cfg.head_dim * keys_read
    kv = keys_read * cfg.kv_bytes_per_token(full.output.weight.dtype)
    return 2.0 * weights + attention / world, weights * esize + kv / world


def one_process_step(seed: int, device, dtype, quick: bool = False, compute_dtype=None):
    """The same step in one process, the whole model on `device`: the logits (1, vocab). The weights are the
    pair's (`dtype`, drawn as workload() draws them); `compute_dtype` casts a copy of them up first (fp32: an
    accuracy reference for the bf16 step, what tp_decode_breakdown.py reports beside the check)."""
    cfg_name, context = sizes(device, quick)
    model = full_model(cfg_name, dtype, device)
    if compute_dtype not in (None, dtype):
        model = cast_model(copy.deepcopy(model), dtype=compute_dtype)
    prefix, token = request(model.cfg, seed, context)
    cache = KVCache.empty(model.cfg, 1, context + 64, device, compute_dtype or dtype)
    with torch.no_grad():
        prefill(model, prefix.to(device), cache)
        return decode_step(model, cache, token.to(device), torch.tensor([context], device=device))


def reference(seed: int, rank: int, world_size: int, quick: bool = False):
    """The logits of the same step in one process, in the pair's precision: the whole model on this rank's GPU
    in bf16 where the pair runs on GPUs (NCCL), in fp32 on the CPU where it runs on CPUs (Gloo, also on a
    machine with GPUs). Every rank returns the whole logits.

    Not the fp32 step: at the GPU size a bf16 decode step is itself about 1e-2 off the fp32 step of the same
    weights (the one-GPU eager step 1.06e-2 on the H100, ch16/optimized_decode_graph_compile.py), at the bf16
    tolerance, and the sharded step, checked against fp32, FAILED at 1.10e-2 (2 x H200, 21543d0).
    tp_decode_breakdown.py reports all three distances."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return one_process_step(seed, torch.device("cuda", torch.cuda.current_device()), torch.bfloat16, quick)
    return one_process_step(seed, torch.device("cpu"), torch.float32, quick)


def tp_step(w: Workload, allreduce: str, fused: bool = False):
    """The sharded step, graphed on a GPU; allreduce "dist" (NCCL/Gloo) or "symm" (one-shot, symmetric memory).

    "none" leaves out every all-reduce: each rank's partial sums stay unsummed, so its answer is wrong. It is
    the time of the step's own kernels, for tp_decode_breakdown.py, and never a variant. fused (GPUs): each
    layer's pieces compiled by torch.compile, rounding as eager does (ShardedModel), for the same script."""
    device = w.inputs["token"].device
    world = dist.get_world_size() if dist.is_initialized() else 1
    cfg = w.inputs["cfg"]
    transport = Transport(device, symmetric=allreduce == "symm", allreduce="dist" if allreduce == "none" else allreduce)
    group = dist.group.WORLD if world > 1 and allreduce != "none" else None
    model = ShardedModel(cfg, w.inputs["shard"], cfg.n_layers, world, group, transport, device, fused=fused)
    kv = StaticKV(w.inputs["k_cache"], w.inputs["v_cache"])
    token, pos = w.inputs["token"], w.inputs["input_pos"]

    def step():
        return model.forward(token, pos, kv)[:, -1]
    if device.type != "cuda":
        return step
    with compile_like_eager() if fused else contextlib.nullcontext():
        step()  # outside the capture: the symmetric all-reduce buffers are allocated (a collective); fused: compiled
    replay = capture_graph(step)
    replay.keepalive = transport
    return replay


def prepare(w: Workload):
    return tp_step(w, "dist")


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
