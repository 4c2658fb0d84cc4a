"""Greedy decoding, alone and with a draft model proposing k tokens that the target verifies in one pass.

The draft is the target's own first `depth` layers and head (an early exit). To make its acceptance
rate a stated knob rather than luck, the target is built so that its deeper layers contribute
`scale` times their usual residual update (`model.scale_deep_layers`): at scale 0 the draft is the
target (every proposal accepted), and the larger the scale the more the two disagree.

One round of speculative decoding (Leviathan et al., 2023; greedy acceptance):

    draft:   feed c at p, get d1; feed d1 at p+1, get d2; ... dk            (k cheap steps)
    target:  feed [c, d1..dk] at p..p+k in ONE pass -> t0..tk               (one expensive pass)
    accept:  n = the number of leading i with d(i+1) == t(i); emit t0..tn   (n+1 tokens)

Every emitted token is the target's own argmax given the tokens before it, so the output is the
target's greedy output; only the number of target passes changes. With a per-proposal acceptance
rate α, a round emits E = (1 - α^(k+1)) / (1 - α) tokens, and costs k draft steps plus one target
pass of k+1 tokens (at batch 1 about one step: the weights are read once either way).

On a GPU each fixed-shape step (draft T=1, target T=1, verification T=k+1) is captured once as a
CUDA graph; the loop only writes token ids and positions into the graphs' input buffers. The one
host sync per round is reading n, which decides where the next round starts.
"""
from __future__ import annotations

import torch

from ch16.decode import MODEL_SEED, capture_graph, served_model, step_work
from ch16.model import CONFIGS, KVCache, Transformer, build_model, prefill, random_tokens, scale_deep_layers

_targets: dict = {}


def spec_setup(device, quick: bool) -> dict:
    """Sizes for the pair: (config, draft depth, deep-layer scale, prompt length, tokens to generate, k)."""
    gpu = torch.device(device).type == "cuda" and not quick
    if gpu:  # the ~1B target, a 2-layer draft (1/8 of the layers, plus the head)
        return dict(cfg="llama-1b", depth=2, scale=0.25, prompt=128, n_new=64, k=4)
    return dict(cfg="small", depth=1, scale=0.5, prompt=32 if not quick else 16, n_new=16 if not quick else 8, k=3)


def target_model(device, cfg: str, depth: int, scale: float) -> Transformer:
    device = torch.device(device)
    key = (cfg, str(device), depth, scale)
    if key not in _targets:
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        _targets[key] = scale_deep_layers(build_model(CONFIGS[cfg], MODEL_SEED, device, dtype), depth, scale)
    return _targets[key]


class Stepper:
    """A forward of fixed shape over static token/position buffers: a CUDA graph on a GPU, eager on a CPU."""

    def __init__(self, model: Transformer, cache: KVCache, tokens: torch.Tensor, pos: torch.Tensor,
                 depth: int | None = None, graph: bool = True):
        self.tokens, self.pos = tokens, pos

        def fn():
            return model(tokens, pos, cache, depth)
        self.fn = capture_graph(fn) if graph and tokens.is_cuda else torch.no_grad()(fn)

    def __call__(self) -> torch.Tensor:
        return self.fn()


class GreedyDecoder:
    """The target alone: n_new tokens, one step each, the chosen token fed back on the device."""

    def __init__(self, model: Transformer, cache: KVCache, prompt: torch.Tensor, n_new: int, graph: bool = True):
        B, L = prompt.shape
        self.prompt, self.n_new, self.L = prompt, n_new, L
        self.tok = torch.zeros(B, 1, dtype=torch.long, device=prompt.device)
        # capturing a graph runs the step a few times: point it past the prompt, never into the prefilled cache
        self.pos = torch.full((1,), cache.max_len - 1, dtype=torch.long, device=prompt.device)
        self.out = torch.empty(B, n_new, model.cfg.vocab_size, dtype=model.output.weight.dtype, device=prompt.device)
        self.step = Stepper(model, cache, self.tok, self.pos, graph=graph)

    @torch.no_grad()
    def __call__(self) -> torch.Tensor:
        # the prompt's last token is fed first: the cache holds the prompt's first L-1 tokens
        self.tok.copy_(self.prompt[:, -1:])
        self.pos.fill_(self.L - 1)
        for i in range(self.n_new):
            logits = self.step()[:, -1]
            self.out[:, i] = logits
            self.tok.copy_(logits.argmax(-1, keepdim=True))
            self.pos.add_(1)
        return self.out


class SpeculativeDecoder:
    """Draft proposes k, target verifies k+1 in one pass, accept the agreeing prefix plus one (batch 1).

    forced: reference tokens (1, n_new); when given, the target's choice at every position is the
    reference's token instead of its argmax, so the logits returned are this decoder's logits
    teacher-forced on the reference (common.decode_check.check_decode's first part).
    """

    def __init__(self, model: Transformer, cache: KVCache, draft_cache: KVCache, depth: int, prompt: torch.Tensor,
                 n_new: int, k: int, graph: bool = True):
        assert prompt.shape[0] == 1, "this loop accepts per sequence: batch 1"
        dev = prompt.device
        self.prompt, self.n_new, self.k, self.L = prompt, n_new, k, prompt.shape[1]
        self.block = torch.zeros(1, k + 1, dtype=torch.long, device=dev)     # [c, d1..dk]
        # graph capture runs each step a few times: at the end of the caches, never on the prefilled prompt
        assert cache.max_len >= self.L + n_new + k + 1, "the cache needs room for the last round's k+1 tokens"
        self.block_pos = torch.arange(cache.max_len - k - 1, cache.max_len, device=dev)
        self.d_tok = torch.zeros(1, 1, dtype=torch.long, device=dev)
        self.d_pos = torch.full((1,), draft_cache.max_len - 1, dtype=torch.long, device=dev)
        self.arange = torch.arange(k + 1, device=dev)
        self.out = torch.empty(1, n_new, model.cfg.vocab_size, dtype=model.output.weight.dtype, device=dev)
        self.draft = Stepper(model, draft_cache, self.d_tok, self.d_pos, depth, graph)
        self.verify = Stepper(model, cache, self.block, self.block_pos, None, graph)
        self.forced = None
        self.rounds = self.proposed = self.accepted = self.rejected = 0

    @torch.no_grad()
    def __call__(self) -> torch.Tensor:
        k, L = self.k, self.L
        self.rounds = self.proposed = self.accepted = self.rejected = 0
        self.block[:, :1].copy_(self.prompt[:, -1:])
        p, done = L - 1, 0                         # block[0] = c, the token at position p, not yet cached
        while done < self.n_new:
            for j in range(k):                     # the draft's k proposals, each fed back on the device
                self.d_tok.copy_(self.block[:, j:j + 1])
                self.d_pos.fill_(p + j)
                self.block[:, j + 1] = self.draft()[:, -1].argmax(-1)
            torch.add(self.arange, p, out=self.block_pos)
            logits = self.verify()[0]              # (k+1, vocab): the target at p..p+k
            if self.forced is None:
                choice = logits.argmax(-1)
            else:                                  # teacher-forced: the reference's tokens are the choices
                choice = self.forced[0, done:done + k + 1]
                choice = torch.cat([choice, choice.new_zeros(k + 1 - choice.numel())])
            agree = (self.block[0, 1:] == choice[:k]).long()
            n = int(agree.cumprod(0).sum())        # the one host sync per round
            m = min(n + 1, self.n_new - done)
            self.out[0, done:done + m] = logits[:m]
            self.rounds, self.proposed, self.accepted = self.rounds + 1, self.proposed + k, self.accepted + n
            self.rejected += n < k
            if n == k:                             # the draft never saw dk: cache it before the next round
                self.d_tok.copy_(self.block[:, k:k + 1])
                self.d_pos.fill_(p + k)
                self.draft()
            self.block[0, 0] = choice[n]
            p, done = p + n + 1, done + n + 1
        return self.out

    @property
    def acceptance(self) -> float:
        """Per-proposal acceptance rate α of the last call: each proposal is judged only if every earlier
        one in its round was accepted, so α = accepted / (accepted + rounds that ended in a rejection)."""
        return self.accepted / max(self.accepted + self.rejected, 1)


def spec_workload_inputs(seed: int, device, quick: bool, **override) -> tuple[dict, dict, Transformer]:
    """Inputs for the speculative pair: the prompt and both prefilled caches (the prompt's first L-1 tokens)."""
    s = {**spec_setup(device, quick), **override}
    model = target_model(device, s["cfg"], s["depth"], s["scale"])
    cfg = model.cfg
    prompt = random_tokens(cfg, (1, s["prompt"]), seed, device)
    max_len = s["prompt"] + s["n_new"] + s["k"] + 2
    dtype = model.output.weight.dtype
    cache = KVCache.empty(cfg, 1, max_len, device, dtype)
    draft_cache = KVCache.empty(cfg, 1, max_len, device, dtype, n_layers=s["depth"])
    with torch.no_grad():
        prefill(model, prompt[:, :-1], cache)
        prefill(model, prompt[:, :-1], draft_cache, s["depth"])
    inputs = {"model": model, "settings": s, "prompt": prompt, "k_cache": cache.k, "v_cache": cache.v,
              "draft_k_cache": draft_cache.k, "draft_v_cache": draft_cache.v}
    return inputs, s, model


def greedy_work(model: Transformer, s: dict) -> tuple[float, float]:
    """FLOPs and bytes of the target alone generating n_new tokens (its weights read once per token)."""
    flops, bytes_moved = step_work(model, 1, s["prompt"] + s["n_new"])
    return flops * s["n_new"], bytes_moved * s["n_new"]


__all__ = ["GreedyDecoder", "SpeculativeDecoder", "spec_setup", "spec_workload_inputs", "target_model",
           "served_model", "greedy_work"]
