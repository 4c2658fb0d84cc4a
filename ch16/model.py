"""A Llama-style decoder small enough to read: RMSNorm, rotary embeddings, grouped-query attention, SwiGLU.

Two sizes: `CONFIGS["llama-1b"]` is shaped like a real ~1B model (16 layers, hidden 2048, 32 query and
8 KV heads, SwiGLU width 5632, vocabulary 32k: 0.85B parameters, 1.70 GB in bf16), `CONFIGS["small"]` runs
the CPU paths in CI. Weights are drawn from a seed (`build_model`); nothing is downloaded. A local
Llama-format checkpoint (Hugging Face names, *.safetensors or *.pt/*.bin, with config.json) loads
with `load_checkpoint(folder)`.

One forward serves every path of the chapter:

    model(tokens, input_pos)            no cache: attention over the tokens given (the whole prefix)
    model(tokens, input_pos, cache)     static KV cache: write K,V at input_pos, attend over the cache
                                        with a mask (T=1: a decode step; T=L: prefill; T=k+1: the
                                        verification pass of speculative decoding)

The cache is preallocated at its maximum length, so a decode step has static shapes and can be
captured in a CUDA graph. Decode at batch 1 reads every weight once per token, but only one row of the
embedding table: `weight_bytes()`, 1.574 GB, is the floor a step cannot beat (≈ 0.523 ms at an H100's
measured copy bandwidth, 3008 GB/s).
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass(frozen=True)
class Config:
    vocab_size: int = 32000
    dim: int = 2048
    n_layers: int = 16
    n_heads: int = 32
    n_kv_heads: int = 8
    hidden_dim: int = 5632
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_seq_len: int = 4096

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def n_params(self, layers: int | None = None) -> int:
        hd, L = self.head_dim, self.n_layers if layers is None else layers
        attn = self.dim * hd * (2 * self.n_heads + 2 * self.n_kv_heads)
        mlp = 3 * self.dim * self.hidden_dim
        return L * (attn + mlp + 2 * self.dim) + 2 * self.vocab_size * self.dim + self.dim

    def kv_bytes_per_token(self, dtype=torch.bfloat16, layers: int | None = None) -> int:
        L = self.n_layers if layers is None else layers
        return 2 * L * self.n_kv_heads * self.head_dim * torch.finfo(dtype).bits // 8


CONFIGS = {
    "llama-1b": Config(),
    # CI size: every path in milliseconds on a CPU; 16 query / 8 KV heads split 1, 2, 4 or 8 ways.
    "small": Config(vocab_size=512, dim=128, n_layers=4, n_heads=16, n_kv_heads=8, hidden_dim=256,
                    max_seq_len=512),
}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope_tables(cfg: Config, device=None):
    """cos and sin of position x frequency, (max_seq_len, head_dim), fp32 (the Hugging Face layout)."""
    hd = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.outer(torch.arange(cfg.max_seq_len, dtype=torch.float64), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().float().to(device), emb.sin().float().to(device)


def apply_rope(x, cos, sin):
    """x (B, H, T, hd); cos/sin (T, hd). Rotates pairs (i, i + hd/2), in fp32."""
    xf = x.float()
    x1, x2 = xf.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return (xf * cos + rotated * sin).type_as(x)


def attend(q, k, v, q_pos, k_pos):
    """Grouped-query attention as two batched matmuls, reading each K and V once.

    q (B, Hq, T, hd); k, v (B, Hkv, S, hd); q_pos (T,), k_pos (S,) positions. A query attends to the
    keys at positions <= its own. The Hq/Hkv query heads sharing a KV head are stacked along the
    rows (B, Hkv, G*T, hd), so K and V are never expanded (repeat_interleave would copy the cache).
    """
    B, Hq, T, hd = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    G = Hq // Hkv
    scores = (q.reshape(B, Hkv, G * T, hd) @ k.transpose(-1, -2)).float() * (1.0 / math.sqrt(hd))
    mask = k_pos[None, :] <= q_pos[:, None]                              # (T, S)
    scores = scores.view(B, Hkv, G, T, S).masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(v.dtype).view(B, Hkv, G * T, S)
    return (probs @ v).view(B, Hq, T, hd)


class Attention(nn.Module):
    def __init__(self, cfg: Config, n_heads: int | None = None, n_kv_heads: int | None = None):
        super().__init__()
        # n_heads/n_kv_heads smaller than cfg's: one tensor-parallel shard of the heads
        self.n_heads = n_heads or cfg.n_heads
        self.n_kv_heads = n_kv_heads or cfg.n_kv_heads
        self.head_dim = cfg.head_dim
        hd = cfg.head_dim
        self.wq = nn.Linear(cfg.dim, self.n_heads * hd, bias=False)
        self.wk = nn.Linear(cfg.dim, self.n_kv_heads * hd, bias=False)
        self.wv = nn.Linear(cfg.dim, self.n_kv_heads * hd, bias=False)
        self.wo = nn.Linear(self.n_heads * hd, cfg.dim, bias=False)

    def qkv(self, x):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def forward(self, x, cos, sin, input_pos, kv=None):
        """kv: this layer's slot of a KVCache (`cache.layer(i)`): K and V written at input_pos, then read."""
        B, T, _ = x.shape
        q, k, v = self.qkv(x)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if kv is None:
            k_all, v_all, k_pos = k, v, input_pos
        else:
            k_all, v_all = kv.write(input_pos, k, v)
            k_pos = torch.arange(k_all.shape[2], device=x.device)
        o = attend(q, k_all, v_all, input_pos, k_pos)
        return self.wo(o.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))


class FeedForward(nn.Module):
    def __init__(self, cfg: Config, hidden_dim: int | None = None):
        super().__init__()
        h = hidden_dim or cfg.hidden_dim
        self.w1 = nn.Linear(cfg.dim, h, bias=False)   # gate
        self.w3 = nn.Linear(cfg.dim, h, bias=False)   # up
        self.w2 = nn.Linear(h, cfg.dim, bias=False)   # down

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: Config, n_heads=None, n_kv_heads=None, hidden_dim=None):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg, n_heads, n_kv_heads)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg, hidden_dim)

    def forward(self, x, cos, sin, input_pos, kv=None):
        x = x + self.attention(self.attention_norm(x), cos, sin, input_pos, kv)
        return x + self.feed_forward(self.ffn_norm(x))


class KVCache:
    """Preallocated K and V for every layer: k, v (n_layers, B, Hkv, max_len, hd)."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor):
        self.k, self.v = k, v

    @classmethod
    def empty(cls, cfg: Config, batch: int, max_len: int, device=None, dtype=torch.float32,
              n_layers: int | None = None, n_kv_heads: int | None = None):
        shape = (n_layers or cfg.n_layers, batch, n_kv_heads or cfg.n_kv_heads, max_len, cfg.head_dim)
        return cls(torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype))

    def layer(self, i: int) -> "LayerKV":
        return LayerKV(self, i)

    def write(self, i: int, input_pos, k, v):
        """Write k, v (B, Hkv, T, hd) at positions input_pos (T,) of layer i; return layer i's K and V.

        Eager (and in a hand-captured graph): index_copy_ on the layer's view, one kernel each for K and V.
        Under torch.compile: one index_put_ on the whole cache tensor, every index given (layer, batch,
        head, position). Inductor keeps a write to its input tensor in place, but lowered the write through
        the view as a copy of the whole cache at every layer (on the H100, 32 copies of 18 MB per llama-1b
        step: profiles/h100/ch16-decode-f75b693; the compiled step 1.952 ms at b86fd00, 1.33 ms at 01d9686).
        Eager, the index tensors cost 9 more kernels per layer (the hand-captured graph step 2.75 ms at
        01d9686, 2.507 ms at c8b4e68 with index_copy_: profiles/h100/ch16-01d9686, ch16-c8b4e68)."""
        if not torch.compiler.is_compiling():
            self.k[i].index_copy_(2, input_pos, k)
            self.v[i].index_copy_(2, input_pos, v)
            return self.k[i], self.v[i]
        B, H, T = k.shape[:3]
        layer = torch.full((1, 1, 1), i, dtype=torch.long, device=k.device)
        b = torch.arange(B, device=k.device).view(B, 1, 1)
        h = torch.arange(H, device=k.device).view(1, H, 1)
        pos = input_pos.view(1, 1, T)
        self.k.index_put_((layer, b, h, pos), k)
        self.v.index_put_((layer, b, h, pos), v)
        return self.k[i], self.v[i]

    @property
    def max_len(self) -> int:
        return self.k.shape[3]


class LayerKV:
    """Layer i of a KVCache, as one attention layer sees it: write this step's K and V, read the layer's."""

    def __init__(self, cache: KVCache, i: int):
        self.cache, self.i = cache, i

    def write(self, input_pos, k, v):
        return self.cache.write(self.i, input_pos, k, v)


class Transformer(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, tokens, input_pos, cache: KVCache | None = None, depth: int | None = None):
        """tokens (B, T) at positions input_pos (T,) -> logits (B, T, vocab).

        depth: run only the first `depth` layers (an early-exit draft model sharing the weights).
        """
        x = self.tok_embeddings(tokens)
        cos, sin = self.rope_cos[input_pos], self.rope_sin[input_pos]
        for i, layer in enumerate(self.layers[:depth]):
            x = layer(x, cos, sin, input_pos, cache.layer(i) if cache is not None else None)
        return self.output(self.norm(x))

    def weight_bytes(self, depth: int | None = None) -> int:
        """Bytes a decode step must read at batch 1: every weight once (the embedding: one row)."""
        layers = self.layers[:depth]
        n = sum(p.numel() for layer in layers for p in layer.parameters())
        n += self.norm.weight.numel() + self.output.weight.numel()
        return n * self.output.weight.element_size()


def build_model(cfg: Config | str, seed: int = 0, device=None, dtype=torch.float32) -> Transformer:
    """Weights drawn from `seed`: the same seed gives the same model on any device of one kind.

    Linear weights ~ N(0, 1/fan_in) so activations keep unit scale; the residual branches' output
    projections are scaled by 1/sqrt(2 n_layers) (GPT-2's rule) so the residual stream grows slowly;
    norms start at 1. Logits come out with a standard deviation near 1 over the vocabulary.
    """
    cfg = CONFIGS[cfg] if isinstance(cfg, str) else cfg
    device = torch.device(device or "cpu")
    with torch.device("meta"):
        model = Transformer(cfg)
    model = model.to_empty(device=device)
    g = torch.Generator(device=device).manual_seed(seed)
    resid = 1.0 / math.sqrt(2 * cfg.n_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name == "tok_embeddings.weight":
                p.normal_(0.0, 1.0, generator=g)
            else:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]), generator=g)
                if name.endswith(("attention.wo.weight", "feed_forward.w2.weight")):
                    p.mul_(resid)
        cos, sin = rope_tables(cfg, device)
        model.rope_cos.copy_(cos)
        model.rope_sin.copy_(sin)
    model = model.to(dtype)
    model.rope_cos.data, model.rope_sin.data = cos, sin  # rotary tables stay fp32
    return model.eval().requires_grad_(False)


def cast_model(model: Transformer, device=None, dtype=None) -> Transformer:
    """model.to(device, dtype) (in place, like nn.Module.to), with the rotary tables kept in fp32."""
    cos, sin = model.rope_cos.float(), model.rope_sin.float()
    model = model.to(device=device, dtype=dtype)
    model.rope_cos.data, model.rope_sin.data = cos.to(model.rope_cos.device), sin.to(model.rope_cos.device)
    return model


def scale_deep_layers(model: Transformer, first: int, scale: float) -> Transformer:
    """Multiply the residual contributions of layers[first:] by `scale` (in place).

    The target of the speculative-decoding pair is built this way: its first `first` layers plus the
    head are a draft whose logits differ from the target's by an amount `scale` sets, so the
    acceptance rate is a knob (scale 0: the draft is exact, acceptance 1).
    """
    with torch.no_grad():
        for layer in model.layers[first:]:
            layer.attention.wo.weight.mul_(scale)
            layer.feed_forward.w2.weight.mul_(scale)
    return model


# ---- decode helpers -------------------------------------------------------------------------

def prefill(model: Transformer, prompt, cache: KVCache, depth: int | None = None):
    """Fill the cache with the prompt (B, L); return the logits at the last position (B, vocab)."""
    pos = torch.arange(prompt.shape[1], device=prompt.device)
    return model(prompt, pos, cache, depth)[:, -1]


def decode_step(model: Transformer, cache: KVCache, token, input_pos, depth: int | None = None):
    """One token per sequence: token (B, 1) at input_pos (1,) -> logits (B, vocab)."""
    return model(token, input_pos, cache, depth)[:, -1]


def forward_no_cache(model: Transformer, tokens):
    """The whole prefix recomputed: tokens (B, L) -> logits at the last position (B, vocab)."""
    pos = torch.arange(tokens.shape[1], device=tokens.device)
    return model(tokens, pos)[:, -1]


@torch.no_grad()
def greedy_generate(model: Transformer, prompt, n_new: int, cache: KVCache | None = None):
    """Greedy decode with a static cache: (tokens (B, n_new), logits (B, n_new, vocab)).

    The logits returned at step i are the ones token i was chosen from.
    """
    B, L = prompt.shape
    cache = cache or KVCache.empty(model.cfg, B, L + n_new, prompt.device, model.output.weight.dtype)
    logits = [prefill(model, prompt, cache)]
    tokens = [logits[-1].argmax(-1, keepdim=True)]
    for i in range(1, n_new):
        logits.append(decode_step(model, cache, tokens[-1], torch.tensor([L + i - 1], device=prompt.device)))
        tokens.append(logits[-1].argmax(-1, keepdim=True))
    return torch.cat(tokens, 1), torch.stack(logits, 1)


@torch.no_grad()
def teacher_forced_logits(model: Transformer, prompt, tokens):
    """Logits the model gives at each generated position when fed `tokens` (B, n): (B, n, vocab)."""
    seq = torch.cat([prompt, tokens[:, :-1]], 1)
    pos = torch.arange(seq.shape[1], device=seq.device)
    return model(seq, pos)[:, prompt.shape[1] - 1:]


def random_tokens(cfg: Config, shape, seed: int, device) -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randint(0, cfg.vocab_size, shape, device=device, generator=g)


# ---- a local Llama-format checkpoint (optional) ----------------------------------------------

HF_NAMES = {  # Hugging Face Llama name -> ours, per layer
    "self_attn.q_proj": "attention.wq", "self_attn.k_proj": "attention.wk", "self_attn.v_proj": "attention.wv",
    "self_attn.o_proj": "attention.wo", "mlp.gate_proj": "feed_forward.w1", "mlp.up_proj": "feed_forward.w3",
    "mlp.down_proj": "feed_forward.w2", "input_layernorm": "attention_norm",
    "post_attention_layernorm": "ffn_norm",
}


def hf_to_ours(name: str) -> str | None:
    if name == "model.embed_tokens.weight":
        return "tok_embeddings.weight"
    if name == "model.norm.weight":
        return "norm.weight"
    if name == "lm_head.weight":
        return "output.weight"
    if name.startswith("model.layers."):
        _, _, i, rest = name.split(".", 3)
        for hf, ours in HF_NAMES.items():
            if rest.startswith(hf + "."):
                return f"layers.{i}.{ours}{rest[len(hf):]}"
    return None  # rotary inv_freq and other buffers


def config_from_hf(d: dict, max_seq_len: int = 4096) -> Config:
    if d.get("rope_scaling"):
        raise NotImplementedError(f"rope_scaling {d['rope_scaling']} is not implemented (Llama 3.1+ checkpoints)")
    return Config(vocab_size=d["vocab_size"], dim=d["hidden_size"], n_layers=d["num_hidden_layers"],
                  n_heads=d["num_attention_heads"], n_kv_heads=d.get("num_key_value_heads", d["num_attention_heads"]),
                  hidden_dim=d["intermediate_size"], norm_eps=d.get("rms_norm_eps", 1e-5),
                  rope_theta=d.get("rope_theta", 10000.0),
                  max_seq_len=min(max_seq_len, d.get("max_position_embeddings", max_seq_len)))


def load_checkpoint(folder, device=None, dtype=torch.bfloat16, max_seq_len: int = 4096) -> Transformer:
    """A Hugging Face Llama folder: config.json plus *.safetensors (needs `safetensors`) or *.pt/*.bin."""
    folder = Path(folder)
    cfg = config_from_hf(json.loads((folder / "config.json").read_text()), max_seq_len)
    state = {}
    files = sorted(folder.glob("*.safetensors"))
    if files:
        from safetensors.torch import load_file  # optional dependency, only for this path
        for f in files:
            state.update(load_file(str(f)))
    else:
        for f in sorted(folder.glob("*.pt")) + sorted(folder.glob("*.bin")):
            state.update(torch.load(f, map_location="cpu", weights_only=True))
    if not state:
        raise FileNotFoundError(f"no *.safetensors, *.pt or *.bin weights in {folder}")
    ours = {hf_to_ours(k): v for k, v in state.items() if hf_to_ours(k)}
    if "output.weight" not in ours:  # tied embeddings (Llama 3.2 1B)
        ours["output.weight"] = ours["tok_embeddings.weight"]
    model = Transformer(cfg)
    missing, unexpected = model.load_state_dict(ours, strict=False)
    missing = [m for m in missing if not m.startswith("rope_")]
    if missing or unexpected:
        raise KeyError(f"checkpoint does not match the model: missing {missing[:4]}, unexpected {unexpected[:4]}")
    model = model.to(device=device, dtype=dtype)
    cos, sin = rope_tables(cfg, device)
    model.rope_cos.data, model.rope_sin.data = cos, sin
    return model.eval().requires_grad_(False)


def save_hf_checkpoint(model: Transformer, folder) -> None:
    """Write `model` as a Hugging Face Llama folder (config.json + model.pt); the inverse of load_checkpoint."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    c = model.cfg
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "vocab_size": c.vocab_size, "hidden_size": c.dim,
        "num_hidden_layers": c.n_layers, "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads,
        "intermediate_size": c.hidden_dim, "rms_norm_eps": c.norm_eps, "rope_theta": c.rope_theta,
        "max_position_embeddings": c.max_seq_len}, indent=1))
    inverse = {}
    for hf in [f"model.layers.{i}.{n}.weight" for i in range(c.n_layers) for n in HF_NAMES] + \
              ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]:
        inverse[hf_to_ours(hf)] = hf
    sd = model.state_dict()
    torch.save({inverse[k]: v.cpu() for k, v in sd.items() if k in inverse}, folder / "model.pt")
