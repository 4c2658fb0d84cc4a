"""The decode step as six Triton kernels per layer, chained by programmatic dependent launch (PDL).

decode_graph's PDL variant is built here. At batch 1 a decode step is a chain of short kernels, each waiting
for the one before: the compiled, fused step runs 211 a token, and its profile (ch16/decode_profile.py) shows its
65 matrix-vector products at 74% of the copy rate, because every kernel ramps up from an idle GPU and drains to
one, and a third of the step in the ~145 small kernels between them. Two ideas close that gap:
- Fewer kernels: per layer, (1) RMSNorm + the fused QKV product + rotary + the K/V cache write, (2) attention
  split over the cache (flash-decoding), (3) the merge of its partial softmaxes, (4) the output projection
  + the residual add, (5) RMSNorm + the fused gate/up product + SiLU(gate) * up, (6) the down projection +
  the residual add. Norms, rotary, cache writes and activations live in the products' prologues and
  epilogues (the embedding lookup in the first QKV kernel's), so the step is 16 x 6 + 1 kernels.
- PDL (Hopper): each kernel is launched with the programmatic-stream-serialization attribute and signals
  `griddepcontrol.launch_dependents` as it starts, so the next kernel's programs start on SMs that free
  up while this one drains. A product's weights do not depend on the kernel before it, so each program
  loads its whole weight tile *before* `griddepcontrol.wait` (which waits for the previous kernel to
  finish and its writes to be visible) and only then reads the activation: the weight stream of kernel
  n+1 overlaps the tail of kernel n. Since every kernel signals before it waits, kernel n+2's programs may
  start while kernel n still runs: the rule that keeps this correct is that nothing a kernel reads before
  its wait (weights, norm weights, rotary tables, the token and position, cache positions older than this
  step) is written by any kernel of the step.

Weights are rearranged once in prepare (an extra copy, as fused_step's are; a real server would store them
this way): Q and K rows interleaved per head so the rotary's pairs (i, i + hd/2) are adjacent rows, and
gate and up rows interleaved so one program holds both halves of SiLU(gate) * up. The step writes K, V and
the logits exactly where the model's step does. Intermediates are rounded to the activation dtype where
the eager step rounds (each product's output, the normed input, the rotary's output, the attention
scores and output; the probabilities are rounded before their product with V unnormalised, and normalised
in fp32 in the merge, where eager rounds them normalised), so bf16 results stay close to eager's.

On a CPU the kernels run under TRITON_INTERPRET=1 without PDL (tests/test_ch16.py); on a GPU the step is
captured once in a CUDA graph (ch16/decode.py: capture_graph), whose kernel nodes keep the PDL edges.
"""
from __future__ import annotations

import math
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702

import torch

from ch13.fp8_weight_only import quantize_rows

try:
    import triton
    import triton.language as tl
    from ch13.fp8_weight_only import row_scales, weight_tile
except ImportError:
    triton = None

SPLITS = 32      # attention programs per KV head (each reads up to BLOCK_S cached positions at a time)
BLOCK_S = 64
ROWS = 16        # query rows of one attention program's tile (the group's query heads, padded for tl.dot)
# (rows of W per program, warps) by product: the best of a probe on the H100 (scripts/pdl_probe.py at c0c3e3c,
# profiles/h100/pdl-probe.md:
# 0.709 ms a step against 0.719 with 4 rows and 4 warps everywhere, 8 warps for the down projection)
BLOCKS = {"qkv": (8, 4), "wo": (8, 8), "w13": (4, 4), "w2": (2, 4), "head": (4, 4)}

if triton is not None:
    @triton.jit
    def _start(PDL: tl.constexpr):
        if PDL:   # let the next kernel launch now, then wait for the previous kernel's writes
            tl.extra.cuda.gdc_launch_dependents()
            tl.extra.cuda.gdc_wait()

    @triton.jit
    def _normed(x_ptr, g, K, eps, BLOCK_K: tl.constexpr, NORM: tl.constexpr):
        """x (K,) as fp32, RMS-normalised and scaled by g when NORM, rounded where RMSNorm rounds."""
        cols = tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + cols, mask=cols < K, other=0.0)
        xf = x.to(tl.float32)
        if NORM:
            rstd = tl.rsqrt(tl.sum(xf * xf, axis=0) / K + eps)
            xf = ((xf * rstd).to(x.dtype) * g).to(tl.float32)
        return xf

    @triton.jit
    def _linear_kernel(x_ptr, g_ptr, w_ptr, scale_ptr, out_ptr, K, eps,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NORM: tl.constexpr, EPILOGUE: tl.constexpr,
                       FP8: tl.constexpr, PDL: tl.constexpr):
        """out = W @ norm(x) for BLOCK_N rows of W (N, K) per program. EPILOGUE 0: store; 1: add into out
        (the residual stream, in place); 2: rows are (gate, up) pairs, store SiLU(gate) * up.
        FP8: W is float8 (e4m3) with one fp32 scale per row (scale_ptr), applied to the row's sum (the format
        and its loads are ch13/fp8_weight_only.py's, shared with chapter 13's fp8_linear pair)."""
        row0 = tl.program_id(0) * BLOCK_N
        rows = row0 + tl.arange(0, BLOCK_N)
        cols = tl.arange(0, BLOCK_K)
        w = weight_tile(w_ptr, rows, cols, K)
        row_scale = row_scales(scale_ptr, rows, FP8)
        if NORM:
            g = tl.load(g_ptr + cols, mask=cols < K, other=0.0)
        else:
            g = 0.0
        _start(PDL)
        x = _normed(x_ptr, g, K, eps, BLOCK_K, NORM)
        y = (tl.sum(w.to(tl.float32) * x[None, :], axis=1) * row_scale).to(out_ptr.dtype.element_ty)
        if EPILOGUE == 0:
            tl.store(out_ptr + rows, y)
        elif EPILOGUE == 1:
            r = tl.load(out_ptr + rows)
            tl.store(out_ptr + rows, (r.to(tl.float32) + y.to(tl.float32)).to(r.dtype))
        else:
            gate, up = tl.split(tl.reshape(y, (BLOCK_N // 2, 2)))
            gf = gate.to(tl.float32)
            act = (gf / (1.0 + tl.exp(-gf))).to(y.dtype)
            h = (act.to(tl.float32) * up.to(tl.float32)).to(y.dtype)
            tl.store(out_ptr + row0 // 2 + tl.arange(0, BLOCK_N // 2), h)

    @triton.jit
    def _qkv_kernel(x_ptr, g_ptr, w_ptr, scale_ptr, cos_ptr, sin_ptr, pos_ptr, q_ptr, k_ptr, v_ptr, K, eps, MAXLEN,
                    emb_ptr, tok_ptr, NQ: tl.constexpr, NKV: tl.constexpr, HD: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EMBED: tl.constexpr, FP8: tl.constexpr,
                    PDL: tl.constexpr):
        """RMSNorm, then BLOCK_N rows of the fused QKV product (Q and K rows interleaved per head as
        (i, i + HD/2) pairs), rotary on Q and K, Q stored to q_ptr, K and V written into this layer's cache
        (k_ptr, v_ptr: (Hkv, MAXLEN, HD)) at the position pos_ptr holds. EMBED (the first layer): the input
        is the token's row of the embedding table, which program 0 also copies to x_ptr (the residual)."""
        row0 = tl.program_id(0) * BLOCK_N
        rows = row0 + tl.arange(0, BLOCK_N)
        cols = tl.arange(0, BLOCK_K)
        w = weight_tile(w_ptr, rows, cols, K)
        g = tl.load(g_ptr + cols, mask=cols < K, other=0.0)
        row_scale = row_scales(scale_ptr, rows, FP8)
        pos = tl.load(pos_ptr)                    # written before the graph runs, not by the last kernel
        head = row0 // HD                         # BLOCK_N divides HD: a program's rows are in one head
        pair = (row0 % HD) // 2 + tl.arange(0, BLOCK_N // 2)
        cos = tl.load(cos_ptr + pos * HD + pair)  # the tables repeat: cos[:, i] == cos[:, i + HD/2]
        sin = tl.load(sin_ptr + pos * HD + pair)
        if EMBED:               # the token and the table come from before the graph: no wait needed for them
            src = emb_ptr + tl.load(tok_ptr) * K
        else:
            src = x_ptr
        _start(PDL)
        x = _normed(src, g, K, eps, BLOCK_K, True)
        if EMBED:
            if tl.program_id(0) == 0:
                tl.store(x_ptr + cols, tl.load(src + cols, mask=cols < K), mask=cols < K)
        y = (tl.sum(w.to(tl.float32) * x[None, :], axis=1) * row_scale).to(q_ptr.dtype.element_ty)
        a, b = tl.split(tl.reshape(y, (BLOCK_N // 2, 2)))
        if row0 < NQ + NKV:     # Q or K: rotate the pair (a, b) = (x_i, x_{i+HD/2}), store at i and i+HD/2
            af, bf = a.to(tl.float32), b.to(tl.float32)
            a = (af * cos - bf * sin).to(y.dtype)
            b = (bf * cos + af * sin).to(y.dtype)
            ia, ib = pair, pair + HD // 2
        else:                   # V: rows in the model's order
            ia, ib = 2 * pair, 2 * pair + 1
        if row0 < NQ:
            tl.store(q_ptr + head * HD + ia, a)
            tl.store(q_ptr + head * HD + ib, b)
        elif row0 < NQ + NKV:
            base = k_ptr + ((head - NQ // HD) * MAXLEN + pos) * HD
            tl.store(base + ia, a)
            tl.store(base + ib, b)
        else:
            base = v_ptr + ((head - (NQ + NKV) // HD) * MAXLEN + pos) * HD
            tl.store(base + ia, a)
            tl.store(base + ib, b)

    @triton.jit
    def _attention_kernel(q_ptr, k_ptr, v_ptr, pos_ptr, acc_ptr, ml_ptr, MAXLEN, scale,
                          G: tl.constexpr, HD: tl.constexpr, SPLITS: tl.constexpr, BLOCK_S: tl.constexpr,
                          ROWS: tl.constexpr, HDP: tl.constexpr, PDL: tl.constexpr):
        """Program (kv head h, split s): the G query heads of h against cache positions of split s of
        [0, pos]; writes the unnormalised output (G, HD) and the running max and sum of each head. HDP: the
        head size padded to tl.dot's smallest (16) with masked, zero columns (the small CI model's is 8)."""
        h = tl.program_id(0)
        s = tl.program_id(1)
        pos = tl.load(pos_ptr)                    # written before the graph runs, not by the last kernel
        length = pos + 1
        span = tl.cdiv(tl.cdiv(length, SPLITS), BLOCK_S) * BLOCK_S
        start = s * span
        end = tl.minimum(start + span, length)
        r = tl.arange(0, ROWS)
        d = tl.arange(0, HDP)
        dm = d[None, :] < HD
        # The cached positions before pos are older than this step: load the first block of them before
        # the wait. Only position pos (this step's K and V) comes from the kernel before.
        keys = start + tl.arange(0, BLOCK_S)
        old = (keys < end) & (keys < pos)
        offs = (h * MAXLEN + keys[:, None]) * HD + d[None, :]
        k_old = tl.load(k_ptr + offs, mask=old[:, None] & dm, other=0.0)
        v_old = tl.load(v_ptr + offs, mask=old[:, None] & dm, other=0.0)
        _start(PDL)
        q = tl.load(q_ptr + (h * G + r[:, None]) * HD + d[None, :], mask=(r[:, None] < G) & dm, other=0.0)
        m = tl.full((ROWS,), float("-inf"), tl.float32)
        l = tl.zeros((ROWS,), tl.float32)
        acc = tl.zeros((ROWS, HDP), tl.float32)
        for k0 in range(start, end, BLOCK_S):   # (the cast below: a Python float can arrive as fp64)
            keys = k0 + tl.arange(0, BLOCK_S)
            ok = keys < end
            first = k0 == start
            lo = tl.where(first, pos, 0)             # what was not loaded before the wait: keys >= lo
            rest = ok & (keys >= lo)
            offs = (h * MAXLEN + keys[:, None]) * HD + d[None, :]
            k = tl.load(k_ptr + offs, mask=rest[:, None] & dm, other=0.0)
            v = tl.load(v_ptr + offs, mask=rest[:, None] & dm, other=0.0)
            if first:           # the two loads are disjoint: adding one to the other's zeros is exact
                k += k_old
                v += v_old
            sc = (tl.dot(q, tl.trans(k)).to(q.dtype).to(tl.float32) * scale).to(tl.float32)   # eager: bf16 scores
            sc = tl.where(ok[None, :], sc, float("-inf"))
            m_new = tl.maximum(m, tl.max(sc, axis=1))
            p = tl.exp(sc - m_new[:, None])
            alpha = tl.exp(m - m_new)
            l = l * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        out = (h * G + r) * SPLITS + s           # (query head, split)
        tl.store(acc_ptr + out[:, None] * HD + d[None, :], acc, mask=(r[:, None] < G) & dm)
        tl.store(ml_ptr + 2 * out, m, mask=r < G)
        tl.store(ml_ptr + 2 * out + 1, l, mask=r < G)

    @triton.jit
    def _merge_kernel(acc_ptr, ml_ptr, o_ptr, HD: tl.constexpr, SPLITS: tl.constexpr, PDL: tl.constexpr):
        """Program per query head: combine its SPLITS partial softmaxes into the attention output."""
        qh = tl.program_id(0)
        s = tl.arange(0, SPLITS)
        d = tl.arange(0, HD)
        _start(PDL)
        m = tl.load(ml_ptr + 2 * (qh * SPLITS + s))
        l = tl.load(ml_ptr + 2 * (qh * SPLITS + s) + 1)
        acc = tl.load(acc_ptr + (qh * SPLITS + s[:, None]) * HD + d[None, :])
        top = tl.max(m, axis=0)
        wgt = tl.where(m > float("-inf"), tl.exp(m - top), 0.0)   # empty splits weigh nothing
        o = tl.sum(acc * wgt[:, None], axis=0) / tl.sum(l * wgt, axis=0)
        tl.store(o_ptr + qh * HD + d, o.to(o_ptr.dtype.element_ty))


def _interleave(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Rows a0, b0, a1, b1, ...: (2N, K) from two (N, K)."""
    return torch.stack([a, b], dim=1).reshape(2 * a.shape[0], a.shape[1]).contiguous()


def _rotary_order(w: torch.Tensor, hd: int) -> torch.Tensor:
    """Q or K weight rows reordered per head so rows 2i, 2i+1 are the head's rows i and i + hd/2."""
    heads = w.view(-1, 2, hd // 2, w.shape[1])            # (H, halves, hd/2, K)
    return heads.transpose(1, 2).reshape(w.shape).contiguous()


class PDLStep:
    """The decode step at batch 1 for one model and one static cache: call(token, input_pos) -> logits.

    Everything a step launches reads and writes buffers allocated here once (so the launches can be
    captured in a CUDA graph and replayed); per call the step reads `token` and `input_pos` in place."""

    def __init__(self, model, k_cache, v_cache, token, input_pos, pdl: bool | None = None, blocks=None,
                 splits: int = SPLITS, fp8: bool = False):
        if triton is None:
            raise RuntimeError("the PDL step needs Triton")
        c = model.cfg
        assert token.shape == (1, 1), "a batch-1 step of one token"
        self.model, self.cfg, self.k, self.v, self.token, self.pos = model, c, k_cache, v_cache, token, input_pos
        dev, dt = token.device, model.output.weight.dtype
        self.pdl = (dev.type == "cuda" and torch.cuda.get_device_capability(dev)[0] >= 9) if pdl is None else pdl
        hd = c.head_dim
        self.layers = []
        for layer in model.layers:
            a, f = layer.attention, layer.feed_forward
            self.layers.append({
                "wqkv": torch.cat([_rotary_order(a.wq.weight, hd), _rotary_order(a.wk.weight, hd),
                                   a.wv.weight]).contiguous(),
                "w13": _interleave(f.w1.weight, f.w3.weight), "wo": a.wo.weight, "w2": f.w2.weight,
                "g_attn": layer.attention_norm.weight, "g_ffn": layer.ffn_norm.weight})
        self.head = {"w": model.output.weight}
        self.fp8 = fp8
        if fp8:   # every product's weight in float8 with a scale per row (made once; the bf16 ones stay unused)
            for d in self.layers + [self.head]:
                for name in [n for n in d if n.startswith("w")]:
                    d[name], d["s_" + name] = quantize_rows(d[name])
        self.cos, self.sin = model.rope_cos.contiguous(), model.rope_sin.contiguous()
        empty = lambda *shape, dtype=dt: torch.empty(shape, device=dev, dtype=dtype)  # noqa: E731
        self.x, self.q, self.o = empty(c.dim), empty(c.n_heads * hd), empty(c.n_heads * hd)
        self.h, self.logits = empty(c.hidden_dim), empty(1, c.vocab_size)
        self.splits = splits   # a power of two
        self.acc = empty(c.n_heads, splits, hd, dtype=torch.float32)
        self.ml = empty(c.n_heads, splits, 2, dtype=torch.float32)
        # rows per program (a power of two dividing the head size) and warps, by product
        self.blocks = blocks or dict(BLOCKS)
        shapes = {"qkv": c.n_heads * hd + 2 * c.n_kv_heads * hd, "wo": c.dim, "w13": 2 * c.hidden_dim,
                  "w2": c.dim, "head": c.vocab_size}
        for name, (rows, _) in self.blocks.items():   # the grids have N / rows programs, and no row mask
            assert rows % 2 == 0 and shapes[name] % rows == 0, (name, rows, shapes[name])
        assert hd % self.blocks["qkv"][0] == 0, "a QKV program's rows must lie in one head"
        assert hd & (hd - 1) == 0 and splits & (splits - 1) == 0, "head size and splits: powers of two"
        assert c.n_heads // c.n_kv_heads <= ROWS, f"one attention tile holds at most {ROWS} query heads"

    def _linear(self, x, g, d, name, out, epilogue, which, norm=True):
        n_rows, warps = self.blocks[which]
        w = d[name]
        N, K = w.shape
        _linear_kernel[(N // n_rows,)](x, g if norm else w, w, d.get("s_" + name, w), out, K, self.cfg.norm_eps,
                                       BLOCK_N=n_rows, BLOCK_K=triton.next_power_of_2(K), NORM=norm,
                                       EPILOGUE=epilogue, FP8=self.fp8, PDL=self.pdl, num_warps=warps,
                                       launch_pdl=self.pdl)

    def __call__(self):
        c, hd = self.cfg, self.cfg.head_dim
        nq, nkv = c.n_heads * hd, c.n_kv_heads * hd
        kw = dict(PDL=self.pdl, launch_pdl=self.pdl)
        for i, w in enumerate(self.layers):
            n_rows, warps = self.blocks["qkv"]
            _qkv_kernel[((nq + 2 * nkv) // n_rows,)](
                self.x, w["g_attn"], w["wqkv"], w.get("s_wqkv", w["wqkv"]), self.cos, self.sin, self.pos, self.q,
                self.k[i], self.v[i], c.dim,
                c.norm_eps, self.k.shape[3], self.model.tok_embeddings.weight, self.token, NQ=nq, NKV=nkv, HD=hd,
                BLOCK_N=n_rows, BLOCK_K=triton.next_power_of_2(c.dim), EMBED=i == 0, FP8=self.fp8, num_warps=warps,
                **kw)
            _attention_kernel[(c.n_kv_heads, self.splits)](
                self.q, self.k[i], self.v[i], self.pos, self.acc, self.ml, self.k.shape[3], 1.0 / math.sqrt(hd),
                G=c.n_heads // c.n_kv_heads, HD=hd, SPLITS=self.splits, BLOCK_S=BLOCK_S, ROWS=ROWS,
                HDP=max(16, hd), num_warps=4, **kw)
            _merge_kernel[(c.n_heads,)](self.acc, self.ml, self.o, HD=hd, SPLITS=self.splits, num_warps=1, **kw)
            self._linear(self.o, None, w, "wo", self.x, 1, "wo", norm=False)
            self._linear(self.x, w["g_ffn"], w, "w13", self.h, 2, "w13")
            self._linear(self.h, None, w, "w2", self.x, 1, "w2", norm=False)
        self._linear(self.x, self.model.norm.weight, self.head, "w", self.logits, 0, "head")
        return self.logits


def step_bytes(model, keys_read: int, fp8: bool = False) -> int:
    """Bytes one batch-1 step must read: every weight once, and K and V of `keys_read` cached positions.
    fp8: the products' weights (Q, K, V, output, gate, up, down, LM head) at 1 byte each plus an fp32
    scale per row, as PDLStep(fp8=True) reads them; norms and the cache stay in the model's dtype."""
    c = model.cfg
    kv = keys_read * c.kv_bytes_per_token(model.output.weight.dtype)
    if not fp8:
        return model.weight_bytes() + kv
    es = model.output.weight.element_size()
    mats = [m.weight for layer in model.layers for m in (layer.attention.wq, layer.attention.wk, layer.attention.wv,
            layer.attention.wo, layer.feed_forward.w1, layer.feed_forward.w3, layer.feed_forward.w2)]
    mats.append(model.output.weight)
    norms = [layer.attention_norm.weight for layer in model.layers] + [layer.ffn_norm.weight for layer in model.layers]
    norms.append(model.norm.weight)
    return sum(m.numel() + 4 * m.shape[0] for m in mats) + es * sum(n.numel() for n in norms) + kv


def prepare_pdl(w, graph: bool = True, pdl: bool | None = None, fp8: bool = False):
    """decode_graph's PDL variants: the step's launches captured in one CUDA graph (graph=False: launched
    one by one, as the CPU tests run them under the Triton interpreter); fp8: float8 weights."""
    from ch16.decode import capture_graph
    step = PDLStep(w.inputs["model"], w.inputs["k_cache"], w.inputs["v_cache"], w.inputs["token"],
                   w.inputs["input_pos"], pdl=pdl, fp8=fp8)
    return capture_graph(step) if graph else step   # the replay keeps the step (its weights, buffers) alive
