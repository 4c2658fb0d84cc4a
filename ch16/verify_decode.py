"""The logits-and-margin rule: did a decoder (speculative, tensor-parallel, paged, graphed) keep the target's output?

Greedy decoding turns logits into tokens with an argmax, and an argmax is not continuous: where the
top two logits are closer than the arithmetic's rounding, two correct implementations may pick
different tokens, and from there their sequences (and every later logit) differ. Comparing the
generated tokens, or the logits along two different sequences, would then fail a correct decoder.
So the check has two parts:

1. Logits, teacher-forced: the candidate's logits at every position, computed on the *reference's*
   tokens, match the reference's logits within the precision's tolerance (the harness's norm-wise
   rule, common.verify: fp32 1e-5, bf16 2e-2, any element 10x that relative to the row's largest).
2. Tokens: wherever the reference's top-two margin exceeds twice the largest error an element may
   have (so no allowed error can swap the two), the candidate's free-running greedy token is the
   reference's. The first position where the candidate departs from the reference sequence must be
   a near-tie; after it, the sequences are different and are not compared further.

It reports the token agreement (the share of positions where the free-running candidate's token is
the reference's), the number of near-ties, and where a failure happened. The harness owner may move
this into common/; chapter 16's tests and scripts call it from here.
"""
from __future__ import annotations

import dataclasses

import torch

TOLERANCE = {"fp64": 1e-10, "fp32": 1e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 2e-2}  # as common.verify
ELEMENT_FACTOR = 10.0


@dataclasses.dataclass
class DecodeVerdict:
    ok: bool
    message: str
    logits_rel_err: float = float("nan")      # worst per-position norm-wise error, teacher-forced
    logits_max_err: float = float("nan")      # worst element error relative to its row's max |logit|
    token_agreement: float = float("nan")     # share of positions with the reference's token
    near_ties: int = 0                        # positions where the margin is within the tolerance
    first_divergence: int | None = None       # first position whose token differs (None: identical)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.detach().to("cpu", torch.float64).reshape(-1, x.shape[-1])


def check_decode(ref_tokens, ref_logits, tf_logits, out_tokens=None, precision: str = "fp32") -> DecodeVerdict:
    """ref_tokens (..., n) and ref_logits (..., n, V): the reference's greedy run.
    tf_logits (..., n, V): the candidate's logits teacher-forced on ref_tokens.
    out_tokens (..., n): the candidate's own free-running greedy tokens (optional).
    Leading dimensions (a batch) are flattened; each sequence is checked on its own.
    """
    tol = TOLERANCE[precision]
    ref, cand = _rows(ref_logits), _rows(tf_logits)
    if ref.shape != cand.shape:
        return DecodeVerdict(False, f"teacher-forced logits shape {tuple(tf_logits.shape)} != {tuple(ref_logits.shape)}")
    if not torch.isfinite(cand).all():
        return DecodeVerdict(False, "NaN/Inf in the candidate's logits")
    scale = ref.abs().amax(-1).clamp_min(1e-30)                       # per position
    rel = (cand - ref).norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-30)
    mx = (cand - ref).abs().amax(-1) / scale
    worst_rel, worst_max = float(rel.max()), float(mx.max())
    bad = (rel > tol) | (mx > ELEMENT_FACTOR * tol)
    if bool(bad.any()):
        i = int(bad.nonzero()[0])
        return DecodeVerdict(False, f"teacher-forced logits at position {i}: relative error {float(rel[i]):.2e} "
                                    f"(max element {float(mx[i]):.2e}) over {precision} tolerance {tol:.0e}",
                             worst_rel, worst_max)
    top2 = ref.topk(2, dim=-1).values
    margin = (top2[:, 0] - top2[:, 1]) / scale                        # relative to the row's max, like mx
    decided = margin > 2 * ELEMENT_FACTOR * tol                       # no allowed error can swap top-1 and top-2
    near_ties = int((~decided).sum())
    if out_tokens is None:
        return DecodeVerdict(True, f"teacher-forced logits within {precision} tolerance (rel {worst_rel:.2e}); "
                                   f"{near_ties} near-ties", worst_rel, worst_max, near_ties=near_ties)
    n = ref_tokens.shape[-1]
    rt, ot = ref_tokens.reshape(-1, n).cpu(), out_tokens.reshape(-1, n).cpu()
    decided = decided.view(-1, n)
    agree, first = 0, None
    for s in range(rt.shape[0]):
        diff = (rt[s] != ot[s]).nonzero()
        j = int(diff[0]) if len(diff) else n
        agree += j  # positions after the first divergence are on a different sequence: not counted as agreeing
        if j < n:
            first = j if first is None else min(first, j)
            if bool(decided[s, j]):
                return DecodeVerdict(False, f"sequence {s}: token {int(ot[s, j])} at position {j} where the reference "
                                            f"chose {int(rt[s, j])} by a margin of {float(margin.view(-1, n)[s, j]):.2e} "
                                            f"(over 2x the {precision} element tolerance)",
                                     worst_rel, worst_max, agree / rt.numel(), near_ties, first)
    agreement = agree / rt.numel()
    return DecodeVerdict(True, f"logits within {precision} tolerance (rel {worst_rel:.2e}); token agreement "
                               f"{agreement:.1%}; {near_ties} near-ties"
                               + (f"; first divergence at a near-tie, position {first}" if first is not None else ""),
                         worst_rel, worst_max, agreement, near_ties, first)
