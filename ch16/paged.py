"""Two ways to hold the KV cache of a batch of requests of different lengths, and a decode step over either.

Contiguous (`ContiguousKV`): every request gets max_len slots, whether it uses 100 or 4000 of them;
the memory a server reserves is requests x max_len, so a fixed budget fits few requests.

Paged (`PagedKV`): K and V live in fixed-size blocks (pages) of `page` tokens drawn from one pool; a
request owns ceil(length / page) of them, listed in its row of the block table (vLLM's block
manager: a free list and a table, no more). Waste is at most one partly filled page per request.
Attention reads K and V through the table:

    attend_gather   copies the request's pages into a contiguous tensor first, every step, every layer:
                    the simple way, and an extra write and read of the whole KV (the pitfall variant)
    attend_triton   a Triton kernel (vLLM's paged attention, split over the keys): programs per (request,
                    KV head, split) walk the request's pages in place with an online softmax; nothing is copied

`varlen_decode_step` runs the model for one new token per request, each at its own position.
"""
from __future__ import annotations

import math

import torch

from ch16.model import Transformer, apply_rope

try:
    import triton
    import triton.language as tl
except ImportError:  # the Triton path is only taken where Triton exists
    triton = None


class ContiguousKV:
    """k, v (n_layers, B, Hkv, max_len, hd): one max-length slab per request."""

    def __init__(self, n_layers, batch, heads, max_len, hd, dtype, device):
        shape = (n_layers, batch, heads, max_len, hd)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)

    def load(self, layer_k, layer_v, lengths):
        """Fill from packed K/V (n_layers, Hkv, total, hd), requests one after another."""
        start = 0
        for b, n in enumerate(lengths):
            self.k[:, b, :, :n] = layer_k[:, :, start:start + n]
            self.v[:, b, :, :n] = layer_v[:, :, start:start + n]
            start += n

    def write(self, layer, pos, k, v):
        """k, v (B, Hkv, hd) at each request's position pos (B,)."""
        b = torch.arange(k.shape[0], device=k.device)
        self.k[layer][b, :, pos] = k
        self.v[layer][b, :, pos] = v

    def attend(self, layer, q, pos, read_len: int):
        return masked_attention(q, self.k[layer][:, :, :read_len], self.v[layer][:, :, :read_len], pos)

    @property
    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()


class PagedKV:
    """k_pages, v_pages (n_layers, n_blocks, Hkv, page, hd); table (B, max_blocks) int32 block ids."""

    def __init__(self, n_layers, heads, hd, page, lengths_needed, dtype, device, splits: int = 4, block_n: int = 128):
        # the kernel's split-KV programs per request and keys a step, for attend_triton (scripts/paged_probe.py)
        self.page, self.splits, self.block_n = page, splits, block_n
        blocks = [math.ceil(n / page) for n in lengths_needed]
        self.free = list(range(sum(blocks)))            # the pool holds exactly what the requests need
        n_blocks = len(self.free)
        shape = (n_layers, n_blocks, heads, page, hd)
        self.k_pages = torch.zeros(shape, dtype=dtype, device=device)
        self.v_pages = torch.zeros(shape, dtype=dtype, device=device)
        rows = [[self.free.pop(0) for _ in range(nb)] for nb in blocks]
        width = max(blocks)
        self.table = torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.int32, device=device)

    def load(self, layer_k, layer_v, lengths):
        start = 0
        for b, n in enumerate(lengths):
            pos = torch.arange(n, device=layer_k.device)
            blk = self.table[b].long()[pos // self.page]
            # blk and the slot are advanced indices around a slice: the token axis comes first
            self.k_pages[:, blk, :, pos % self.page] = layer_k[:, :, start:start + n].permute(2, 0, 1, 3)
            self.v_pages[:, blk, :, pos % self.page] = layer_v[:, :, start:start + n].permute(2, 0, 1, 3)
            start += n

    def write(self, layer, pos, k, v):
        b = torch.arange(k.shape[0], device=k.device)
        blk = self.table[b, pos // self.page].long()
        self.k_pages[layer][blk, :, pos % self.page] = k
        self.v_pages[layer][blk, :, pos % self.page] = v

    def attend_gather(self, layer, q, pos, read_len: int):
        nb = math.ceil(read_len / self.page)
        idx = self.table[:, :nb].long()
        B, H = idx.shape[0], self.k_pages.shape[2]
        k = self.k_pages[layer][idx].permute(0, 2, 1, 3, 4).reshape(B, H, nb * self.page, -1)   # a copy
        v = self.v_pages[layer][idx].permute(0, 2, 1, 3, 4).reshape(B, H, nb * self.page, -1)
        return masked_attention(q, k, v, pos)

    def attend_triton(self, layer, q, pos, read_len: int):
        return paged_attention(q, self.k_pages[layer], self.v_pages[layer], self.table, pos + 1, self.splits,
                               self.block_n)

    @property
    def nbytes(self) -> int:
        return 2 * self.k_pages.numel() * self.k_pages.element_size()


def masked_attention(q, k, v, pos):
    """q (B, Hq, hd); k, v (B, Hkv, S, hd); request b attends to positions <= pos[b]. -> (B, Hq, hd)."""
    B, Hq, hd = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    G = Hq // Hkv
    scores = (q.view(B, Hkv, G, hd) @ k.transpose(-1, -2)).float() * (1.0 / math.sqrt(hd))  # (B, Hkv, G, S)
    mask = torch.arange(S, device=q.device)[None, :] <= pos[:, None]                         # (B, S)
    scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(v.dtype)
    return (probs @ v).reshape(B, Hq, hd)


if triton is not None:
    @triton.jit
    def _paged_decode_kernel(q_ptr, k_ptr, v_ptr, table_ptr, len_ptr, o_ptr, ml_ptr, scale, max_blocks,
                             stride_b, stride_kb, stride_kh, stride_kp,
                             HQ: tl.constexpr, G: tl.constexpr, P: tl.constexpr, D: tl.constexpr,
                             SPLITS: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr, DP: tl.constexpr):
        """Program (request b, KV head h, split): the G query heads of h against the split's share of
        b's own keys, BLOCK_N keys (BLOCK_N / P pages) a step, each key's page looked up in b's table row.

        Each request's keys are cut into SPLITS spans of whole tiles, so a long request is read by SPLITS
        programs at once; a short one by fewer (a span is at least one tile; the other programs find an
        empty span and store nothing but an empty softmax). ROWS: G padded to tl.dot's smallest tile (16)
        with zero rows; DP: the head size padded the same way (the small CI model's is 8). Offsets are
        64-bit: a layer's cache may hold more than 2^31 elements. fp32 inputs multiply in TF32 on a GPU
        (tl.dot's default; the pairs run bf16)."""
        b = tl.program_id(0).to(tl.int64)
        h = tl.program_id(1).to(tl.int64)
        split = tl.program_id(2)
        length = tl.load(len_ptr + b)
        span = tl.cdiv(tl.cdiv(length, SPLITS), BLOCK_N) * BLOCK_N
        start = split * span
        end = tl.minimum(start + span, length)
        r = tl.arange(0, ROWS)
        d = tl.arange(0, DP)
        dm = d[None, :] < D
        q = tl.load(q_ptr + b * HQ * D + (h * G + r[:, None]) * D + d[None, :], mask=(r[:, None] < G) & dm, other=0.0)
        m = tl.full((ROWS,), float("-inf"), tl.float32)
        l = tl.zeros((ROWS,), tl.float32)
        acc = tl.zeros((ROWS, DP), tl.float32)
        for t0 in range(start, end, BLOCK_N):
            t = t0 + tl.arange(0, BLOCK_N)
            ok = t < end
            blk = tl.load(table_ptr + b * max_blocks + t // P, mask=ok, other=0).to(tl.int64)
            kv_off = b * stride_b + blk * stride_kb + h * stride_kh + (t % P) * stride_kp    # (BLOCK_N,), in place
            k = tl.load(k_ptr + kv_off[:, None] + d[None, :], mask=ok[:, None] & dm, other=0.0)   # (BLOCK_N, DP)
            v = tl.load(v_ptr + kv_off[:, None] + d[None, :], mask=ok[:, None] & dm, other=0.0)
            # fp32 even where torch.compile passes `scale` as an fp64 scalar: m, l, acc keep their type
            s = (tl.dot(q, tl.trans(k)) * scale).to(tl.float32)                              # (ROWS, BLOCK_N)
            s = tl.where(ok[None, :], s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            alpha = tl.exp(m - m_new)
            w = tl.exp(s - m_new[:, None])
            l = l * alpha + tl.sum(w, axis=1)
            acc = acc * alpha[:, None] + tl.dot(w.to(v.dtype), v)
            m = m_new
        o_row = (b * HQ + h * G + r) * SPLITS + split                           # (ROWS,): (query head, split)
        o = acc / tl.where(l > 0, l, 1.0)[:, None]                              # an empty split stores 0
        tl.store(o_ptr + o_row[:, None] * D + d[None, :], o, mask=(r[:, None] < G) & dm)
        tl.store(ml_ptr + o_row * 2, m, mask=r < G)
        tl.store(ml_ptr + o_row * 2 + 1, l, mask=r < G)


def paged_attention(q, k_pages, v_pages, table, lengths, splits: int = 8, block_n: int = 64):
    """q (B, Hq, hd); k/v_pages (n_blocks, Hkv, P, hd) with unit stride along hd; table (B, max_blocks) int32;
    lengths (B,) keys per request (positions 0..length-1), each at least 1. -> (B, Hq, hd) in q's dtype.

    The defaults (8 splits, 64-key tiles) suit a few requests; the paged_kv pair's 32 requests run PagedKV's
    4 and 128 (scripts/paged_probe.py). Split-KV (flash-decoding): each request's keys are cut into `splits`
    spans handled by separate programs, whose partial softmaxes are merged by their maxima and sums
    afterwards. Without it the longest request's one program per head walks all its pages alone while the
    others sit idle.
    """
    _, Hkv, P, _ = k_pages.shape
    return _launch(q, k_pages, v_pages, table, lengths, splits, block_n, Hkv, P,
                   (0, k_pages.stride(0), k_pages.stride(1), k_pages.stride(2)))


def attend_contiguous(q, k_layer, v_layer, lengths, page: int = 16, splits: int = 8, block_n: int = 64):
    """Split-KV attention over a contiguous static cache (B, Hkv, S, hd), reading only the first
    lengths[b] positions of each request: the cache seen in place as S/page blocks of page tokens
    (block j of request b starts at b*stride(0) + j*page*stride(2)), every request the same table row."""
    B, Hkv, S, hd = k_layer.shape
    assert S % page == 0 and k_layer.stride(3) == 1
    table = torch.arange(S // page, dtype=torch.int32, device=q.device).expand(B, S // page).contiguous()
    return _launch(q, k_layer, v_layer, table, lengths, splits, block_n, Hkv, page,
                   (k_layer.stride(0), page * k_layer.stride(2), k_layer.stride(1), k_layer.stride(2)))


def _launch(q, k, v, table, lengths, splits, block_n, Hkv, P, strides):
    if triton is None:
        raise RuntimeError("the paged attention kernel needs Triton")
    B, Hq, hd = q.shape
    q = q.contiguous()
    part = torch.empty(B, Hq, splits, hd, dtype=torch.float32, device=q.device)
    ml = torch.empty(B, Hq, splits, 2, dtype=torch.float32, device=q.device)
    G = Hq // Hkv
    _paged_decode_kernel[(B, Hkv, splits)](q, k, v, table, lengths, part, ml, 1.0 / math.sqrt(hd), table.shape[1],
                                           *strides, HQ=Hq, G=G, P=P, D=hd, SPLITS=splits, BLOCK_N=block_n,
                                           ROWS=max(16, triton.next_power_of_2(G)),
                                           DP=max(16, triton.next_power_of_2(hd)))
    if splits == 1:
        return part[:, :, 0].to(q.dtype)
    m, l = ml[..., 0], ml[..., 1]
    w = l * torch.exp(m - m.amax(-1, keepdim=True))                     # an empty split has l = 0: weight 0
    return ((w[..., None] * part).sum(2) / w.sum(-1, keepdim=True)).to(q.dtype)


def varlen_decode_step(model: Transformer, tokens, pos, write, attend):
    """One new token per request, each at its own position: tokens (B, 1), pos (B,) -> logits (B, vocab).

    write(layer, pos, k, v) stores the new K/V (B, Hkv, hd); attend(layer, q, pos) -> (B, Hq, hd).
    """
    B = tokens.shape[0]
    x = model.tok_embeddings(tokens)
    cos, sin = model.rope_cos[pos][:, None, None, :], model.rope_sin[pos][:, None, None, :]   # (B, 1, 1, hd)
    for i, layer in enumerate(model.layers):
        a = layer.attention
        q, k, v = a.qkv(layer.attention_norm(x))                     # (B, H, 1, hd)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        write(i, pos, k[:, :, 0], v[:, :, 0])
        o = attend(i, q[:, :, 0], pos)
        x = x + a.wo(o.reshape(B, 1, -1))
        x = x + layer.feed_forward(layer.ffn_norm(x))
    return model.output(model.norm(x))[:, -1]
