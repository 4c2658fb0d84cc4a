"""A decode step with fused projections and a choice of attention and matrix-vector kernels.

decode_graph's fused variant is built here (fused weights, sdpa_attention, ch16/gemv.py's GEMV). Until
135e97c the fused steps lost to plain torch.compile of the model's step (2.481 against 1.953 ms at
f68ba3f) for a reason the kernel profile found (ch16/decode_profile.py, profiles/h100/ch16-decode-f75b693):
the fused weights were not static, so the compiled graph copied all of them at every replay (34 copies,
0.67 ms). split_kv_attention stays out of the pair: at f75b693 its kernel took 230 µs a token against 44 µs
for the compiled masked attention over the 1088-slot cache.

    fused_forward    Q, K and V from one concatenated weight, gate and up from another: 4 matrix-vector
                     products per layer instead of 7 (built once by fuse_weights: an extra copy of the
                     layer weights; a real server would load them fused)
    sdpa_attention   F.scaled_dot_product_attention over the static cache with a mask, K and V shared by
                     each group of query heads (enable_gqa): one fused kernel where attend() makes several
    split_kv_attention   a Triton kernel (ch16/paged.py) that reads only the filled positions of the
                     cache, split across ~16 programs per KV head, and merges the partial softmaxes
                     (flash-decoding), instead of the masked matmul attention over all 1088 slots
    prepare_fused    the step as a decode_graph variant would time it: compiled with mode="reduce-overhead"
                     (Inductor rounding where eager does), or eager with compile=False (the tests, on a CPU)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ch16.decode import compiled_replay
from ch16.model import KVCache, Transformer, apply_rope, attend
from ch16.paged import attend_contiguous

PAGE = 16


def fuse_weights(model: Transformer) -> list[dict]:
    fused = []
    for layer in model.layers:
        a, f = layer.attention, layer.feed_forward
        fused.append({"wqkv": torch.cat([a.wq.weight, a.wk.weight, a.wv.weight]),
                      "w13": torch.cat([f.w1.weight, f.w3.weight]),
                      "wo": a.wo.weight, "w2": f.w2.weight,
                      "attention_norm": layer.attention_norm, "ffn_norm": layer.ffn_norm})
    return fused


def fused_forward(model: Transformer, fused: list[dict], tokens, input_pos, k_cache, v_cache, attention=None,
                  linear=F.linear):
    """The cached forward with fused projections: tokens (B, T) -> logits (B, T, vocab).

    attention(q, k_layer, v_layer, input_pos) -> (B, Hq, T, hd) replaces the masked matmul attention
    (split_kv_attention: a kernel that reads only the filled part of the cache); linear(x, weight) replaces
    F.linear for every projection and the LM head (ch16/gemv.py's Triton matrix-vector product)."""
    c = model.cfg
    B, T = tokens.shape
    hd, nq, nkv = c.head_dim, c.n_heads, c.n_kv_heads
    x = model.tok_embeddings(tokens)
    cos, sin = model.rope_cos[input_pos], model.rope_sin[input_pos]
    k_pos = torch.arange(k_cache.shape[3], device=tokens.device)
    cache = KVCache(k_cache, v_cache)
    for i, w in enumerate(fused):
        qkv = linear(w["attention_norm"](x), w["wqkv"])
        q, k, v = qkv.split([nq * hd, nkv * hd, nkv * hd], dim=-1)
        q = apply_rope(q.view(B, T, nq, hd).transpose(1, 2), cos, sin)
        k = apply_rope(k.view(B, T, nkv, hd).transpose(1, 2), cos, sin)
        k_layer, v_layer = cache.write(i, input_pos, k, v.view(B, T, nkv, hd).transpose(1, 2))
        o = attend(q, k_layer, v_layer, input_pos, k_pos) if attention is None else \
            attention(q, k_layer, v_layer, input_pos)
        x = x + linear(o.transpose(1, 2).reshape(B, T, nq * hd), w["wo"])
        gate, up = linear(w["ffn_norm"](x), w["w13"]).chunk(2, dim=-1)
        x = x + linear(F.silu(gate) * up, w["w2"])
    return linear(model.norm(x), model.output.weight)


def prepare_fused(w, compile: bool = True, attention=None, linear=F.linear, round_like_eager: bool = True,
                  inductor: dict | None = None):
    model = w.inputs["model"]
    token, pos, k, v = (w.inputs[n] for n in ("token", "input_pos", "k_cache", "v_cache"))
    fused = fuse_weights(model)

    def step(token, pos, k, v):
        return fused_forward(model, fused, token, pos, k, v, attention, linear)[:, -1]
    if not compile:
        return torch.no_grad()(lambda: step(token, pos, k, v))
    # The fused weights are static too: not being the model's parameters, they would otherwise be copied
    # into the graph's buffers at every replay (on the H100: 34 copies, 0.67 ms of a 2.46 ms step).
    weights = [t for layer in fused for t in layer.values() if isinstance(t, torch.Tensor)]
    return compiled_replay(step, (token, pos, k, v), static=[k, v, *weights], round_like_eager=round_like_eager,
                           inductor=inductor)


def split_kv_attention(q, k_layer, v_layer, input_pos):
    """q (B, Hq, 1, hd) at input_pos (1,) over the static cache (B, Hkv, S, hd) -> (B, Hq, 1, hd)."""
    B, Hkv, S = k_layer.shape[:3]
    splits = max(1, min(S // PAGE, 128 // (B * Hkv)))
    lengths = (input_pos + 1).expand(B)
    return attend_contiguous(q[:, :, 0], k_layer, v_layer, lengths, PAGE, splits)[:, :, None]


def sdpa_attention(q, k_layer, v_layer, input_pos):
    """q (B, Hq, T, hd) at positions input_pos (T,) over the static cache (B, Hkv, S, hd) -> (B, Hq, T, hd)."""
    S = k_layer.shape[2]
    mask = torch.arange(S, device=q.device)[None, :] <= input_pos[:, None]   # (T, S): keys at or before
    return F.scaled_dot_product_attention(q, k_layer, v_layer, attn_mask=mask[None, None], enable_gqa=True)
