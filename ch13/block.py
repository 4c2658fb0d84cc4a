"""A pre-norm transformer block (LayerNorm, causal attention, GELU MLP), the step chapter 13 profiles.

Shared by the walkthrough and the pairs that train or compile a block. Weights come from a seed, so
every variant (and every process) builds the same block. Sizes:
  "h100"  d=2048, 16 heads, MLP 8192, batch 4 x 2048 tokens, bf16: 50 M parameters per block
  "tiny"  d=64, 4 heads, MLP 256, batch 2 x 32 tokens, fp32: what a CPU and --quick run
"""
from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass(frozen=True)
class BlockConfig:
    dim: int
    heads: int
    mlp: int
    batch: int
    seq: int
    layers: int = 1

    def params_per_block(self) -> int:
        return 4 * self.dim * self.dim + 2 * self.dim * self.mlp + 4 * self.dim + self.mlp + 5 * self.dim

    def forward_flops(self) -> float:
        """Matmul FLOPs of one forward over batch x seq tokens (causal attention counts half)."""
        tokens = self.batch * self.seq
        linear = 2 * tokens * (4 * self.dim * self.dim + 2 * self.dim * self.mlp)
        attention = 2 * 2 * self.batch * self.seq * self.seq * self.dim / 2
        return self.layers * (linear + attention)


SIZES = {
    "h100": BlockConfig(dim=2048, heads=16, mlp=8192, batch=4, seq=2048),
    "tiny": BlockConfig(dim=64, heads=4, mlp=256, batch=2, seq=32),
}


class Block(nn.Module):
    def __init__(self, cfg: BlockConfig):
        super().__init__()
        self.cfg = cfg
        self.ln1, self.ln2 = nn.LayerNorm(cfg.dim), nn.LayerNorm(cfg.dim)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        self.up = nn.Linear(cfg.dim, cfg.mlp)
        self.down = nn.Linear(cfg.mlp, cfg.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.cfg.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


def build_blocks(cfg: BlockConfig, device, dtype, seed: int = 0) -> nn.Sequential:
    """cfg.layers blocks with seeded weights (the same for every variant and process)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(*[Block(cfg) for _ in range(cfg.layers)])
        for p in model.parameters():  # LayerNorm's ones and zeros too: no constant tensor anywhere
            if p.dim() == 1:
                p.data.normal_(1.0 if p.shape[0] == cfg.dim else 0.0, 0.02)
    return model.to(device=device, dtype=dtype)


def step_dtype(device) -> torch.dtype:
    """bf16 on a GPU; fp32 on a CPU, where bf16 matmuls are a slow fallback."""
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def random_input(cfg: BlockConfig, device, dtype, seed: int) -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(cfg.batch, cfg.seq, cfg.dim, device=device, generator=g).to(dtype)


def train_step(model: nn.Module, x: torch.Tensor, layer_fn=None):
    """Forward and backward: returns the input's gradient, every parameter's gradient (in model.parameters()
    order) and the loss.

    torch.autograd.grad instead of .backward(): gradients are returned, not accumulated into .grad,
    so calling the step again gives the same answer (what the harness checks), to the step's precision:
    on a GPU the step is bf16 and SDPA's flash backward accumulates dQ with atomics, so two calls differ
    in the last bits (1.1e-3 relative on the H100). Every parameter is asked for: autograd computes only the
    gradients asked for, and an earlier version of this step, which asked for the input's and the first QKV
    weight's alone, skipped every weight-gradient GEMM but that one (a backward of ~1x the forward's matmul
    FLOPs instead of 2x: the one-block step ran 5 aten::mm a step instead of 8 in
    profiles/h100/ch13-walkthrough-fffa184/block/top_ops.txt).
    The gradients come first: the harness judges the outputs at the first one's precision (bf16 on a GPU),
    and the loss, reduced in fp32, is judged with them.
    layer_fn(block, h) runs one block (activation checkpointing wraps it); default: block(h).
    """
    x = x.detach().requires_grad_(True)
    h = x
    for blk in model:
        h = layer_fn(blk, h) if layer_fn else blk(h)
    loss = h.float().square().mean()
    grads = torch.autograd.grad(loss, [x, *model.parameters()])
    return (*grads, loss.detach())
