"""Serving across GPUs on symmetric memory: a paged KV cache peers can read, several models in one weight
pool, and speculative decoding with the draft and the target on different GPUs.

Symmetric memory (torch.distributed._symmetric_memory) gives every rank a buffer of the same size
that every other rank can address directly over NVLink: a peer's data is a load away, with no
collective to schedule. This file uses it for three things:

1. A distributed, paged KV cache (`PagedKV`). Each rank of the target's tensor-parallel group keeps
   K and V of its own KV heads, in fixed-size pages inside a symmetric buffer, with a block table per
   request (vLLM's block manager in a few lines: a free list and a table). Because the pages are
   symmetric, any rank can read a request's KV from all of them (`export_kv`): the step a KV
   migration or a disaggregated prefill/decode hand-off needs, here also how the tests check it.
2. Multi-model pooling (`WeightPool`). One symmetric allocation per rank holds this rank's shards of
   every model it serves (here the target and the draft), carved into typed views; one rendezvous
   instead of one per tensor, and every model's weights readable by peers.
3. Speculative decoding across ranks. The target runs tensor-parallel (column-parallel Q/K/V and
   gate/up, row-parallel O and down, one all-reduce after attention and one after the MLP per layer)
   on the first half of the ranks; the draft (the target's first layers, speculative.py) runs on the
   second half. The draft's proposals and the target's verdict (how many accepted, the next token)
   pass through symmetric mailboxes: the writer stores, a barrier, the readers load.

`InferenceServer8GPU(..., use_symmetric_kv=True)`: eight GPUs is the production shape (target TP4 on
GPUs 0-3, draft TP4 on 4-7), but the class runs on any world size (1: both models on one rank; 2:
one GPU each) and on CPUs over Gloo, where "symmetric" buffers are ordinary tensors and a peer read
is a broadcast. All-reduce: `torch.ops.symm_mem.one_shot_all_reduce` on GPUs with symmetric memory,
else `dist.all_reduce` (NCCL or Gloo). Never multimem ops; keep NVLink multicast off
(NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1).

    torchrun --nproc-per-node 8 ch16/symmetric_memory_inference.py --check      (GPUs, or --device cpu)
checks the served output against a single-process run of the same model (common/decode_check.py's rule).
"""
from __future__ import annotations

import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ch16.batching import percentile
from ch16.model import CONFIGS, Config, Transformer, apply_rope, attend, build_model, rope_tables, scale_deep_layers

MODEL_SEED = 0


# ---------------------------------------------------------------------------------- transport
class Transport:
    """Buffers every rank of the world can read: symmetric memory on GPUs, ordinary tensors over Gloo.

    alloc(name, ...)  a buffer of the same shape on every rank (collective: all ranks call it in order)
    read(name, src)   every rank gets rank src's buffer (collective); symmetric: barrier, load, barrier
    all_reduce(x, g)  sum over a tensor-parallel group g
    """

    def __init__(self, device: torch.device, symmetric: bool, allreduce: str = "auto"):
        self.device = device
        self.world = dist.get_world_size() if dist.is_initialized() else 1
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.symmetric = symmetric and device.type == "cuda" and self.world > 1
        if allreduce == "auto":
            allreduce = "symm" if self.symmetric else "dist"
        if allreduce == "symm" and not self.symmetric:
            raise ValueError("the one-shot all-reduce needs symmetric memory on GPUs")
        self.allreduce = allreduce
        self.buffers: dict[str, torch.Tensor] = {}
        self.handles: dict[str, object] = {}
        self._ar_bufs: dict = {}
        if self.symmetric:
            import torch.distributed._symmetric_memory as symm_mem
            self.symm_mem = symm_mem

    def alloc(self, name: str, shape, dtype, group=None) -> torch.Tensor:
        if self.symmetric:
            buf = self.symm_mem.empty(tuple(shape), dtype=dtype, device=self.device)
            buf.zero_()
            self.handles[name] = self.symm_mem.rendezvous(buf, (group or dist.group.WORLD).group_name)
        else:
            buf = torch.zeros(tuple(shape), dtype=dtype, device=self.device)
        self.buffers[name] = buf
        return buf

    def peer(self, name: str, rank: int) -> torch.Tensor:
        """Rank `rank`'s buffer `name`, addressed directly (symmetric memory only)."""
        buf = self.buffers[name]
        return self.handles[name].get_buffer(rank, tuple(buf.shape), buf.dtype)

    def read(self, name: str, src: int, index=None) -> torch.Tensor:
        """Rank src's buffer `name` (rows `index` of it, when given) on every rank."""
        buf = self.buffers[name]
        if self.world == 1:
            return buf if index is None else buf[index]
        if self.symmetric:
            h = self.handles[name]
            h.barrier(channel=0)                         # src's writes are visible
            out = self.peer(name, src)
            out = (out if index is None else out[index]).clone()
            h.barrier(channel=0)                         # nobody overwrites before everyone has read
            return out
        tmp = buf.clone()
        dist.broadcast(tmp, src)
        return tmp if index is None else tmp[index]

    def all_reduce(self, x: torch.Tensor, group) -> torch.Tensor:
        if group is None:  # a group of one
            return x
        if self.allreduce == "symm":
            key = (group.group_name, tuple(x.shape), x.dtype)
            if key not in self._ar_bufs:  # one symmetric buffer per shape (rendezvous is collective in the group)
                buf = self.symm_mem.empty(tuple(x.shape), dtype=x.dtype, device=self.device)
                self._ar_bufs[key] = (buf, self.symm_mem.rendezvous(buf, group.group_name))
            buf = self._ar_bufs[key][0]
            buf.copy_(x)
            return torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", group.group_name)
        dist.all_reduce(x, group=group)
        return x


# ---------------------------------------------------------------------------------- weights
def shard_model(model: Transformer, tp: int, index: int, depth: int | None = None) -> dict[str, torch.Tensor]:
    """This rank's shard of `model` for tensor parallelism `tp` (column-parallel Q/K/V and gate/up,
    row-parallel O and down; embeddings, norms and the head replicated)."""
    c = model.cfg
    hd = c.head_dim
    assert c.n_heads % tp == 0 and c.n_kv_heads % tp == 0 and c.hidden_dim % tp == 0, "heads and MLP must split evenly"
    qh, kh, hh = c.n_heads // tp, c.n_kv_heads // tp, c.hidden_dim // tp
    q, kv, h = slice(index * qh * hd, (index + 1) * qh * hd), slice(index * kh * hd, (index + 1) * kh * hd), \
        slice(index * hh, (index + 1) * hh)
    out = {"emb": model.tok_embeddings.weight, "norm": model.norm.weight, "output": model.output.weight}
    for i, layer in enumerate(model.layers[:depth]):
        a, f = layer.attention, layer.feed_forward
        out.update({f"{i}.attention_norm": layer.attention_norm.weight, f"{i}.ffn_norm": layer.ffn_norm.weight,
                    f"{i}.wq": a.wq.weight[q], f"{i}.wk": a.wk.weight[kv], f"{i}.wv": a.wv.weight[kv],
                    f"{i}.wo": a.wo.weight[:, q], f"{i}.w1": f.w1.weight[h], f"{i}.w3": f.w3.weight[h],
                    f"{i}.w2": f.w2.weight[:, h]})
    return out


class WeightPool:
    """One symmetric allocation per rank holding its shards of every model it serves, as typed views."""

    ALIGN = 256

    def __init__(self, transport: Transport, shards: dict[str, dict[str, torch.Tensor]]):
        nbytes = 0
        layout = {}
        for model_name, tensors in shards.items():
            for name, t in tensors.items():
                nbytes = -(-nbytes // self.ALIGN) * self.ALIGN
                layout[(model_name, name)] = (nbytes, t)
                nbytes += t.numel() * t.element_size()
        size = torch.tensor([nbytes], device=transport.device)
        if transport.world > 1:  # symmetric: the same size everywhere
            dist.all_reduce(size, op=dist.ReduceOp.MAX)
        self.nbytes = int(size)
        self.storage = transport.alloc("weight_pool", (max(self.nbytes, self.ALIGN),), torch.uint8)
        self.models: dict[str, dict[str, torch.Tensor]] = {m: {} for m in shards}
        for (model_name, name), (offset, t) in layout.items():
            view = self.storage[offset:offset + t.numel() * t.element_size()].view(t.dtype).view(t.shape)
            view.copy_(t)
            self.models[model_name][name] = view


# ---------------------------------------------------------------------------------- KV cache
class PagedKV:
    """K and V of this rank's KV heads in pages: pages (n_pages, n_layers, 2, heads, page_size, head_dim).

    A request owns a list of pages (its block table); position p lives in page table[p // page_size],
    slot p % page_size. The pages sit in the transport's shared buffer, so peers can read them.
    """

    def __init__(self, transport: Transport, name: str, n_pages: int, n_layers: int, heads: int, page_size: int,
                 head_dim: int, dtype):
        self.transport, self.name, self.page_size = transport, name, page_size
        self.pages = transport.alloc(name, (n_pages, n_layers, 2, heads, page_size, head_dim), dtype)
        self.free = list(range(n_pages))
        self.tables: dict[int, list[int]] = {}

    def reserve(self, req: int, length: int) -> None:
        need = math.ceil(length / self.page_size) - len(self.tables.get(req, []))
        if need > len(self.free):
            raise MemoryError(f"{self.name}: {need} pages needed, {len(self.free)} free")
        self.tables.setdefault(req, []).extend(self.free.pop(0) for _ in range(max(need, 0)))

    def release(self, req: int) -> None:
        self.free.extend(self.tables.pop(req, []))

    def table(self, req: int) -> torch.Tensor:
        return torch.tensor(self.tables[req], device=self.pages.device)

    def write(self, layer: int, req: int, pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v (1, heads, T, hd) at positions pos (T,)."""
        page = self.table(req)[pos // self.page_size]
        slot = pos % self.page_size
        self.pages[page, layer, 0, :, slot] = k[0].transpose(0, 1)   # (T, heads, hd)
        self.pages[page, layer, 1, :, slot] = v[0].transpose(0, 1)

    def read(self, layer: int, req: int, pages: torch.Tensor | None = None):
        """This request's K and V, (1, heads, n_pages x page_size, hd): gathered, for the reference attention."""
        pages = self.pages if pages is None else pages
        kv = pages[self.table(req), layer]                 # (n, 2, heads, page, hd)
        kv = kv.permute(1, 2, 0, 3, 4).flatten(2, 3)       # (2, heads, n x page, hd)
        return kv[0:1], kv[1:2]


class StaticKV:
    """A preallocated cache of this rank's KV heads, (n_layers, B, heads, max_len, hd): the tensor-parallel pair's."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor):
        self.k, self.v = k, v

    def write(self, layer: int, req, pos, k, v) -> None:
        self.k[layer].index_copy_(2, pos, k)
        self.v[layer].index_copy_(2, pos, v)

    def read(self, layer: int, req):
        return self.k[layer], self.v[layer]


# ---------------------------------------------------------------------------------- a sharded model
def rms(x, weight, eps: float):
    """As model.RMSNorm, so that the numerics match the single-process model."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def qkv(x, norm, wq, wk, wv, cos, sin, heads: int, kv_heads: int, hd: int, eps: float):
    """A layer's start: its norm, this rank's query, key and value heads, and the rotary embedding."""
    B, T, _ = x.shape
    h = rms(x, norm, eps)
    q = F.linear(h, wq).view(B, T, heads, hd).transpose(1, 2)
    k = F.linear(h, wk).view(B, T, kv_heads, hd).transpose(1, 2)
    v = F.linear(h, wv).view(B, T, kv_heads, hd).transpose(1, 2)
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


def attention_out(q, K, V, pos, wo):
    """Attention over the cache, then this rank's rows of the output projection: a partial sum."""
    B, _, T, _ = q.shape
    o = attend(q, K, V, pos, torch.arange(K.shape[2], device=q.device))
    return F.linear(o.transpose(1, 2).reshape(B, T, -1), wo)


def mlp(x, norm, w1, w3, w2, eps: float):
    """The norm and this rank's share of the SwiGLU MLP: a partial sum."""
    h = rms(x, norm, eps)
    return F.linear(F.silu(F.linear(h, w1)) * F.linear(h, w3), w2)


class ShardedModel:
    """A model's tensor-parallel shard on this rank: forward over a paged KV cache.

    A layer is three pieces between its two all-reduces (qkv, attention_out, mlp). fused=True compiles each
    piece with torch.compile (GPUs only; the llama-1b step without all-reduces then runs 332 kernels instead
    of 892 on 2 H200s), keeping the all-reduces and the cache writes outside the compiled code, so the step
    can still be captured in a CUDA graph by hand (tp_decode_breakdown.py's fused rows)."""

    def __init__(self, cfg: Config, weights: dict[str, torch.Tensor], n_layers: int, tp: int, group,
                 transport: Transport, device, fused: bool = False):
        self.cfg, self.w, self.n_layers, self.tp, self.group, self.t = cfg, weights, n_layers, tp, group, transport
        self.heads, self.kv_heads = cfg.n_heads // tp, cfg.n_kv_heads // tp
        cos, sin = rope_tables(cfg, device)
        self.cos, self.sin = cos, sin
        pieces = (qkv, attention_out, mlp)
        if fused:
            pieces = tuple(torch.compile(f, fullgraph=True, dynamic=False) for f in pieces)
        self.qkv, self.attention_out, self.mlp = pieces

    @torch.no_grad()
    def forward(self, tokens, pos, kv: PagedKV | StaticKV, req: int | None = None):
        """tokens (B, T) at positions pos (T,) -> logits (B, T, vocab), every rank of the group."""
        w, hd, eps = self.w, self.cfg.head_dim, self.cfg.norm_eps
        x = F.embedding(tokens, w["emb"])
        cos, sin = self.cos[pos], self.sin[pos]
        for i in range(self.n_layers):
            q, k, v = self.qkv(x, w[f"{i}.attention_norm"], w[f"{i}.wq"], w[f"{i}.wk"], w[f"{i}.wv"], cos, sin,
                               self.heads, self.kv_heads, hd, eps)
            kv.write(i, req, pos, k, v)
            K, V = kv.read(i, req)
            x = x + self.t.all_reduce(self.attention_out(q, K, V, pos, w[f"{i}.wo"]), self.group)
            x = x + self.t.all_reduce(self.mlp(x, w[f"{i}.ffn_norm"], w[f"{i}.w1"], w[f"{i}.w3"], w[f"{i}.w2"], eps),
                                      self.group)
        return F.linear(rms(x, w["norm"], eps), w["output"])


# ---------------------------------------------------------------------------------- the server
def build_target(cfg: Config, seed: int, depth: int, scale: float, device, dtype) -> Transformer:
    """The served target: seeded weights, layers past `depth` scaled (the draft's acceptance knob)."""
    return scale_deep_layers(build_model(cfg, seed, device, dtype), depth, scale)


class InferenceServer8GPU:
    """Target (tensor-parallel, first half of the ranks) + draft (second half), speculative decoding between them.

    Every rank calls every method in the same order (SPMD). generate() returns, on every rank, the
    generated tokens; on the target's ranks also the target's logits at every generated position.
    """

    def __init__(self, cfg: Config | str = "small", seed: int = MODEL_SEED, draft_depth: int = 1,
                 deep_scale: float = 0.5, k: int = 3, use_symmetric_kv: bool = True, allreduce: str = "auto",
                 page_size: int = 16, n_pages: int = 64, device=None):
        self.cfg = CONFIGS[cfg] if isinstance(cfg, str) else cfg
        self.world = dist.get_world_size() if dist.is_initialized() else 1
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
        self.device = torch.device(device)
        self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.k, self.depth, self.use_symmetric_kv = k, draft_depth, use_symmetric_kv
        self.transport = Transport(self.device, use_symmetric_kv, allreduce)
        # roles: one rank serves both; otherwise the target on the first half, the draft on the second
        half = max(1, self.world // 2)
        self.target_ranks = list(range(half))
        self.draft_ranks = list(range(half, self.world)) if self.world > 1 else [0]
        groups = {}
        for name, ranks in (("target", self.target_ranks), ("draft", self.draft_ranks)):
            # new_group is collective over the world even for ranks outside the group
            groups[name] = dist.new_group(ranks) if self.world > 1 and len(ranks) > 1 else None
        self.is_target, self.is_draft = self.rank in self.target_ranks, self.rank in self.draft_ranks

        self.seed, self.deep_scale = seed, deep_scale      # what a one-process reference needs to rebuild the target
        full = build_target(self.cfg, seed, draft_depth, deep_scale, self.device, self.dtype)
        shards = {}
        if self.is_target:
            shards["target"] = shard_model(full, len(self.target_ranks), self.target_ranks.index(self.rank))
        if self.is_draft:
            shards["draft"] = shard_model(full, len(self.draft_ranks), self.draft_ranks.index(self.rank), draft_depth)
        self.pool = WeightPool(self.transport, shards)
        del full, shards
        c, hd = self.cfg, self.cfg.head_dim
        self.models, self.kv = {}, {}
        for name, ranks, layers in (("target", self.target_ranks, c.n_layers), ("draft", self.draft_ranks, draft_depth)):
            # every rank allocates both caches: symmetric buffers are the same everywhere (a non-member's stays unused)
            self.kv[name] = PagedKV(self.transport, f"{name}_kv", n_pages, layers, c.n_kv_heads // len(ranks),
                                    page_size, hd, self.dtype)
            if name in self.pool.models:
                self.models[name] = ShardedModel(c, self.pool.models[name], layers, len(ranks), groups[name],
                                                 self.transport, self.device)
        self.mail_proposals = self.transport.alloc("proposals", (k + 1,), torch.long)
        self.mail_verdict = self.transport.alloc("verdict", (2,), torch.long)
        self.next_req = 0
        self.stats = {}

    def _forward(self, name: str, tokens, pos, req):
        return self.models[name].forward(tokens, pos, self.kv[name], req)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, n_new: int, forced: torch.Tensor | None = None, keep: bool = False):
        """prompt (1, L), the same on every rank. forced (1, n_new): teacher-force the target's choices.

        Returns {"tokens": (1, n_new), "logits": (1, n_new, vocab) on target ranks else None, "req": id}.
        keep: leave the request's pages allocated (export_kv reads them).
        """
        k, dev = self.k, self.device
        prompt = prompt.to(dev)
        L = prompt.shape[1]
        req, self.next_req = self.next_req, self.next_req + 1
        for name in ("target", "draft"):
            self.kv[name].reserve(req, L + n_new + k + 1)
        if self.is_target:
            self._forward("target", prompt[:, :-1], torch.arange(L - 1, device=dev), req)
        if self.is_draft:
            self._forward("draft", prompt[:, :-1], torch.arange(L - 1, device=dev), req)
        block = torch.zeros(k + 1, dtype=torch.long, device=dev)
        block[0] = prompt[0, -1]
        tokens = torch.zeros(1, n_new, dtype=torch.long, device=dev)
        logits_out = torch.zeros(1, n_new, self.cfg.vocab_size, dtype=self.dtype, device=dev) if self.is_target else None
        p, done, rounds, accepted, rejected = L - 1, 0, 0, 0, 0
        draft_leader, target_leader = self.draft_ranks[0], self.target_ranks[0]
        while done < n_new:
            if self.is_draft:  # k proposals, each fed back
                for j in range(k):
                    lg = self._forward("draft", block[j:j + 1][None], torch.tensor([p + j], device=dev), req)
                    block[j + 1] = lg[0, -1].argmax()
                self.mail_proposals.copy_(block)
            block = self.transport.read("proposals", draft_leader).clone()
            if self.is_target:  # verify all k+1 in one pass
                lg = self._forward("target", block[None], p + torch.arange(k + 1, device=dev), req)[0]
                if forced is None:
                    choice = lg.argmax(-1)
                else:
                    choice = forced[0, done:done + k + 1].to(dev)
                    choice = torch.cat([choice, choice.new_zeros(k + 1 - choice.numel())])
                n = (block[1:] == choice[:k]).long().cumprod(0).sum()
                self.mail_verdict[0] = n
                self.mail_verdict[1] = choice[n]
                m = min(int(n) + 1, n_new - done)
                logits_out[0, done:done + m] = lg[:m]
            verdict = self.transport.read("verdict", target_leader)
            n, nxt = int(verdict[0]), int(verdict[1])
            m = min(n + 1, n_new - done)
            tokens[0, done:done + m] = torch.cat([block[1:n + 1], verdict[1:2]])[:m]
            if self.is_draft and n == k:  # the draft never saw its last proposal: cache it
                self._forward("draft", block[k:k + 1][None], torch.tensor([p + k], device=dev), req)
            block[0] = nxt
            p, done, rounds = p + n + 1, done + n + 1, rounds + 1
            accepted, rejected = accepted + n, rejected + (n < k)
        self.stats = {"rounds": rounds, "acceptance": accepted / max(accepted + rejected, 1), "n_new": n_new}
        if not keep:
            self.release(req)
        return {"tokens": tokens, "logits": logits_out, "req": req}

    def release(self, req: int) -> None:
        for kv in self.kv.values():
            kv.release(req)

    def export_kv(self, req: int, length: int, name: str = "target"):
        """The request's K and V over all heads, (n_layers, 1, n_kv_heads, length, hd), read from every rank's
        pages (peer reads of the symmetric KV buffer; broadcasts over Gloo). Collective: every rank calls it."""
        kv, ranks = self.kv[name], (self.target_ranks if name == "target" else self.draft_ranks)
        parts = []
        for r in ranks:  # the block table is the same on every rank: allocation runs in lockstep
            pages = self.transport.read(kv.name, r, kv.table(req))           # (n, layers, 2, heads, page, hd)
            parts.append(pages.permute(1, 2, 3, 0, 4, 5).flatten(3, 4)[..., :length, :])  # (layers, 2, heads, len, hd)
        full = torch.cat(parts, dim=2)                                       # (layers, 2, all heads, len, hd)
        return full[:, 0].unsqueeze(1), full[:, 1].unsqueeze(1)

    def roles(self) -> list[str]:
        mine = "+".join(r for r, on in (("target", self.is_target), ("draft", self.is_draft)) if on)
        if self.world == 1:
            return [mine]
        out = [None] * self.world
        dist.all_gather_object(out, mine)
        return out


# ---------------------------------------------------------------------------------- check against one process
def reference_run(model: Transformer, prompt, n_new: int, device, dtype):
    """The same target in one process, on one device: greedy tokens and logits, its cache over prompt + tokens."""
    from ch16.model import KVCache, greedy_generate, prefill
    cfg = model.cfg
    prompt = prompt.to(device)
    tokens, logits = greedy_generate(model, prompt, n_new)
    cache = KVCache.empty(cfg, 1, prompt.shape[1] + n_new, device, dtype)
    prefill(model, torch.cat([prompt, tokens], 1), cache)
    return tokens, logits, cache


def check(server: InferenceServer8GPU, prompt_len: int = 16, n_new: int = 12, prompt_seed: int = 5,
          requests: int = 1) -> dict | None:
    """Serve `requests` requests one after another (each timed, after one untimed warm-up request) and
    compare each with a single-process greedy run of the same prompt; the report on rank 0 (None elsewhere).

    The first request's KV is also read back from every rank's pages and compared with the reference's
    cache. Per request: latency (generate(), prefill included, to its last token); over all: tokens/s
    and the latency's p50 and p99 (with few requests the p99 is the slowest one)."""
    from ch16.model import random_tokens
    from common.decode_check import check_decode
    from common.verify import verify_outputs
    prompts = [random_tokens(server.cfg, (1, prompt_len), prompt_seed + i, "cpu") for i in range(requests)]
    server.generate(random_tokens(server.cfg, (1, prompt_len), prompt_seed - 1, "cpu"), n_new)   # warm-up
    precision = "bf16" if server.dtype == torch.bfloat16 else "fp32"
    reference = build_target(server.cfg, server.seed, server.depth, server.deep_scale, server.device, server.dtype)
    latencies, served, verdicts, kv_verdict = [], [], [], None
    for i, prompt in enumerate(prompts):
        _sync(server.device)
        t0 = time.perf_counter()
        out = server.generate(prompt, n_new, keep=i == 0)
        _sync(server.device)
        latencies.append(time.perf_counter() - t0)
        served.append((out["tokens"].cpu(), dict(server.stats)))
        # every rank computes the reference (it needs the tokens to teacher-force); rank 0 compares
        ref_tokens, ref_logits, ref_cache = reference_run(reference, prompt, n_new, server.device, server.dtype)
        if i == 0:
            # The KV every rank holds for the request, read from the pages of every rank of the target group.
            # Positions written by verify passes past the accepted ones are stale: compare the accepted prefix
            # (the last emitted token is never fed, so L - 1 + n_new positions are final).
            length = prompt_len + n_new - 1
            k_all, v_all = server.export_kv(out["req"], length)
            server.release(out["req"])
            kv_verdict = verify_outputs([ref_cache.k[:, :, :, :length].cpu(), ref_cache.v[:, :, :, :length].cpu()],
                                        [k_all.cpu(), v_all.cpu()], precision)
        forced = server.generate(prompt, n_new, forced=ref_tokens)   # teacher-forced on the reference's tokens
        if server.rank == 0:
            verdicts.append((check_decode(ref_tokens, ref_logits, forced["logits"], out["tokens"], precision),
                             ref_tokens.cpu().tolist()))
    roles = server.roles()
    if server.rank != 0:
        return None
    first, stats = verdicts[0][0], served[0][1]
    per_request = [{"latency_s": t, "tokens": tok.tolist(), "reference_tokens": ref, "rounds": st["rounds"],
                    "acceptance": st["acceptance"], "decode": v.as_dict()}
                   for t, (tok, st), (v, ref) in zip(latencies, served, verdicts)]
    return {"world_size": server.world, "roles": roles, "device": str(server.device),
            "use_symmetric_kv": server.use_symmetric_kv, "symmetric": server.transport.symmetric,
            "allreduce": server.transport.allreduce, "config": next(n for n, c in CONFIGS.items() if c == server.cfg),
            "tokens": served[0][0].tolist(), "reference_tokens": verdicts[0][1], **stats,
            "wall_s": latencies[0], "decode": first.as_dict(), "kv": kv_verdict.as_dict(),
            "requests": requests, "prompt_len": prompt_len, "tokens_per_s": requests * n_new / sum(latencies),
            "p50_latency_s": percentile(latencies, 50), "p99_latency_s": percentile(latencies, 99),
            "identical_token_requests": sum(r["tokens"] == r["reference_tokens"] for r in per_request),
            "mean_acceptance": sum(r["acceptance"] for r in per_request) / len(per_request),
            "per_request": per_request,
            "ok": bool(all(v.ok for v, _ in verdicts) and kv_verdict.ok)}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="serve a request across ranks and check it against one process")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--config", default="small", choices=sorted(CONFIGS), help="the target model (default small)")
    ap.add_argument("--no-symmetric", action="store_true", help="KV pages and mailboxes in ordinary tensors")
    ap.add_argument("--allreduce", default="auto", choices=("auto", "symm", "dist"),
                    help="the tensor-parallel all-reduce: symm, a one-shot all-reduce on symmetric memory (GPUs, "
                         "2+ ranks); dist, torch.distributed's; auto (default): symm where it can run")
    ap.add_argument("--prompt", type=int, default=16, help="prompt tokens per request (default 16)")
    ap.add_argument("--new", type=int, default=12, help="tokens generated per request (default 12)")
    ap.add_argument("--k", type=int, default=3, help="tokens the draft proposes per round (default 3)")
    ap.add_argument("--depth", type=int, default=1, help="the draft's layers: the target's first DEPTH (default 1)")
    ap.add_argument("--scale", type=float, default=0.5,
                    help="the target's deep-layer scale: 0 makes the draft exact, larger disagrees more (default 0.5)")
    ap.add_argument("--requests", type=int, default=1, help="requests served one after another, each checked")
    ap.add_argument("--out", type=pathlib.Path, help="write rank 0's report here (JSON)")
    a = ap.parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        print("error: ch16/symmetric_memory_inference.py --device cuda needs a CUDA GPU; none is visible to PyTorch",
              file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    device = torch.device(a.device)
    if "WORLD_SIZE" in os.environ:
        if device.type == "cuda":
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    server = InferenceServer8GPU(a.config, draft_depth=a.depth, deep_scale=a.scale, k=a.k,
                                 use_symmetric_kv=not a.no_symmetric, allreduce=a.allreduce, device=device)
    report = check(server, a.prompt, a.new, requests=a.requests)
    ok = True
    if report is not None:
        ok = report["ok"]
        text = json.dumps(report, indent=1)
        if a.out:
            a.out.write_text(text)
        print(f"world {report['world_size']} ({', '.join(report['roles'])}), {report['device']}, symmetric "
              f"{report['symmetric']}, all-reduce {report['allreduce']}: α {report['acceptance']:.2f}, "
              f"{report['rounds']} rounds for {report['n_new']} tokens; decode: {report['decode']['message']}; "
              f"KV: {report['kv']['message']}; {'PASS' if ok else 'FAIL'}", flush=True)
        print(f"{report['requests']} requests of {report['prompt_len']} + {report['n_new']} tokens ({report['config']}): "
              f"{report['tokens_per_s']:.1f} tokens/s, latency p50 {report['p50_latency_s'] * 1e3:.1f} ms, "
              f"p99 {report['p99_latency_s'] * 1e3:.1f} ms, mean α {report['mean_acceptance']:.2f}; tokens identical to "
              f"one process in "
              f"{report['identical_token_requests']} of {report['requests']}", flush=True)
    if dist.is_initialized():
        flag = torch.tensor([0 if ok else 1], device=device)
        dist.all_reduce(flag)
        dist.destroy_process_group()
        ok = int(flag) == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
