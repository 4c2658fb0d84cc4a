"""The logits-and-margin rule: did a decoder (speculative, tensor-parallel, paged, graphed) keep the target's output?

Greedy decoding picks tokens by argmax: where the top two logits are closer than the arithmetic's rounding, two
correct implementations may pick different tokens, and from there their sequences differ, so comparing tokens (or
logits along two sequences) would fail a correct decoder. `check_decode` checks instead
1. the candidate's logits teacher-forced on the *reference's* tokens (chapter 16's scripts and tests compute them):
   at every position within the precision's tolerance (common.verify's two bounds, norm-wise and element-wise
   relative to the row's largest logit);
2. its free-running greedy tokens: wherever the reference's top-two margin exceeds twice the largest error an
   element may have (no allowed error can swap the two), the token is the reference's. The first position where
   the candidate departs must be a near-tie; after it the sequences differ and are not compared.
The harness sees only what a timed call returns, the logits along the candidate's own free-running sequence:
`compare_logits_margin` (a baseline's `COMPARE = "logits_margin"`) compares those up to and including the first
position where the greedy tokens differ (both computed on the same prefix there), which must be a near-tie."""
from __future__ import annotations

import dataclasses

import torch

from common.verify import TOLERANCE, Verdict, verify_outputs


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
    Leading dimensions (a batch) are flattened; each sequence is checked on its own."""
    tol, elem_tol = TOLERANCE[precision]
    ref, cand = _rows(ref_logits), _rows(tf_logits)
    if ref.shape != cand.shape:
        return DecodeVerdict(False, f"teacher-forced logits shape {tuple(tf_logits.shape)} != "
                                    f"{tuple(ref_logits.shape)}")
    if not torch.isfinite(cand).all():
        return DecodeVerdict(False, "NaN/Inf in the candidate's logits")
    scale = ref.abs().amax(-1).clamp_min(1e-30)                       # per position
    rel = (cand - ref).norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-30)
    mx = (cand - ref).abs().amax(-1) / scale
    worst_rel, worst_max = float(rel.max()), float(mx.max())
    bad = (rel > tol) | (mx > elem_tol)
    if bool(bad.any()):
        i = int(bad.nonzero()[0])
        return DecodeVerdict(False, f"teacher-forced logits at position {i}: relative error {float(rel[i]):.2e} "
                                    f"(max element {float(mx[i]):.2e}) over the {precision} tolerance "
                                    f"({tol:.2g}, element {elem_tol:.2g})",
                             worst_rel, worst_max)
    top2 = ref.topk(2, dim=-1).values
    margin = (top2[:, 0] - top2[:, 1]) / scale                        # relative to the row's max, like mx
    decided = margin > 2 * elem_tol                                   # no allowed error can swap top-1 and top-2
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
                return DecodeVerdict(False, f"sequence {s}: token {int(ot[s, j])} at position {j} where the "
                                            f"reference chose {int(rt[s, j])} by a margin of "
                                            f"{float(margin.view(-1, n)[s, j]):.2e} (over 2x the {precision} "
                                            f"element tolerance)",
                                     worst_rel, worst_max, agree / rt.numel(), near_ties, first)
    agreement = agree / rt.numel()
    return DecodeVerdict(True, f"logits within {precision} tolerance (rel {worst_rel:.2e}); token agreement "
                               f"{agreement:.1%}; {near_ties} near-ties"
                               + (f"; first divergence at a near-tie, position {first}" if first is not None else ""),
                         worst_rel, worst_max, agreement, near_ties, first)


def compare_logits_margin(ref: list[torch.Tensor], out: list[torch.Tensor], precision: str = "fp32",
                          allowed_dtypes: tuple = ()) -> Verdict:
    """common.verify.verify_outputs's signature, for outputs whose first tensor is free-running logits (..., n, V),
    checked by the rule above; any further outputs are compared as usual."""
    if len(ref) != len(out) or not ref:
        return Verdict(False, f"returned {len(out)} tensors, baseline returned {len(ref)}")
    r, o = ref[0], out[0]
    if tuple(r.shape) != tuple(o.shape):
        return Verdict(False, f"logits shape {tuple(o.shape)} != baseline {tuple(r.shape)}")
    if o.dtype != r.dtype and o.dtype not in allowed_dtypes:
        return Verdict(False, f"dtype {o.dtype} != baseline {r.dtype}")
    n, vocab = r.shape[-2], r.shape[-1]
    rl, ol = _rows(r).view(-1, n, vocab), _rows(o).view(-1, n, vocab)
    if not torch.isfinite(ol).all():
        return Verdict(False, "NaN/Inf in the logits")
    tol, elem_tol = TOLERANCE[precision]
    worst_rel = worst_max = 0.0
    agree = ties = 0
    for s in range(rl.shape[0]):
        rt, ot = rl[s].argmax(-1), ol[s].argmax(-1)
        diff = (rt != ot).nonzero()
        j = int(diff[0]) if len(diff) else n
        upto = min(j + 1, n)
        verdict = check_decode(rt[:upto], rl[s, :upto], ol[s, :upto], None, precision)
        if not verdict.ok:
            return Verdict(False, f"sequence {s}: {verdict.message}", verdict.logits_rel_err,
                           verdict.logits_max_err, tol)
        worst_rel, worst_max = max(worst_rel, verdict.logits_rel_err), max(worst_max, verdict.logits_max_err)
        agree += j
        if j < n:
            top2 = rl[s, j].topk(2).values
            margin = float(top2[0] - top2[1]) / max(float(rl[s, j].abs().max()), 1e-30)
            if margin > 2 * elem_tol:
                return Verdict(False, f"sequence {s}: token {int(ot[j])} at position {j} where the baseline chose "
                                      f"{int(rt[j])} by a margin of {margin:.2e} (over 2x the {precision} element "
                                      f"tolerance)", worst_rel, worst_max, tol)
            ties += 1
    rest = verify_outputs(ref[1:], out[1:], precision, allowed_dtypes)  # none left: ok
    if not rest.ok:
        return rest
    agreement = agree / (rl.shape[0] * n)
    return Verdict(True, f"logits within the {precision} tolerance up to each sequence's first divergence "
                         f"(rel {worst_rel:.2e}); token agreement {agreement:.1%}; {ties} divergence(s), each at a "
                         f"near-tie", worst_rel, worst_max, tol)
