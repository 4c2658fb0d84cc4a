"""Each variant's own copy of the workload, and what the harness checks on it.

Every variant (the baseline too) gets a workload built afresh from the seed, so a variant that writes into its
inputs harms nobody else. `feed` overwrites its per-call inputs in place with the values of one of two untouched
references (the seed-A workload as built, seed B's per-call values) and restores the declared state
(Workload.updated); `modified` names every input a call changed that it had no right to change."""
from __future__ import annotations

import secrets

import torch
import torch.distributed as dist

from common.pair import ContractError, Pair
from common.verify import check_inputs_random, same_bits

SHIFT_STEP = 2**31 - 1  # a prime: i * SHIFT_STEP mod n differs for every i < n (n < 2**31)
SEEDS = (1234,)  # seed A; seed B is drawn at random when first needed, after the baseline's prepare()
TWICE_BYTES = 64 << 20  # seed B's per-call values up to this size are kept twice end to end (References.twice)


class InputTampered(Exception):
    """A variant replaced an input object or changed its class; the message names it."""


class References:
    """The untouched inputs every variant's copy is fed from and checked against."""

    def __init__(self, pair: Pair, device: torch.device, quick: bool):
        self.pair, self.device, self.quick = pair, device, quick
        self.a = pair.workload(seed=SEEDS[0], device=device, quick=quick)
        self.per_call = self.a.per_call()  # includes the declared state (it is not prepared once)
        self._fresh: dict | None = None  # seed B's per-call values, built when first fed
        self.twice: dict = {}  # ...and the smaller floating-point ones laid end to end twice, built with them
        self.seed_b: int | None = None

    @property
    def fresh(self) -> dict:
        """Seed B's per-call values (B's weights are dropped). B is drawn at random, after the baseline's
        prepare() has run, so that no prepare() can know it in advance and compute its answer there."""
        if self._fresh is None:
            seed = [SEEDS[0] + 1 + secrets.randbelow(2**30)]
            if dist.is_available() and dist.is_initialized():  # every rank feeds the same seed
                dist.broadcast_object_list(seed, src=0)
            self.seed_b = seed[0]
            b = self.pair.workload(seed=self.seed_b, device=self.device, quick=self.quick)
            self._fresh = {k: b.inputs[k] for k in self.per_call}
            complaint = check_inputs_random(self._fresh)
            if complaint:
                raise ValueError(f"{self.pair.key}: {complaint} (seed {self.seed_b})")
            # Any rotation of these values is then one window of `twice`, written in one copy: the timed loop's
            # feed costs the host one copy, not rotate_into's two (on an H200's host 16.9 us a sample, not 33.8:
            # profiles/h200/harness-b7052f2). Larger inputs' copies take the GPU longer than the host's issue.
            # The limit is per input: a pair with several keeps each one's twice. A non-contiguous input (its
            # copy too) takes rotate_into's path, so it is not kept twice.
            self.twice = {k: torch.cat((v.reshape(-1), v.reshape(-1))) for k, v in self._fresh.items()
                          if v.is_floating_point() and v.is_contiguous() and k not in self.a.derived
                          and k not in self.a.updated and 0 < v.numel() * v.element_size() <= TWICE_BYTES}
        return self._fresh

    def own_copy(self) -> "OwnInputs":
        return OwnInputs(self)


def rotate_into(dst: torch.Tensor, src: torch.Tensor, shift: int) -> None:
    """dst = src rotated by `shift` places over its flattened elements, in place without a temporary
    (two slice copies: the timed loop feeds up to a GiB this way)."""
    s, n = src.reshape(-1), src.numel()
    k = shift % n if n else 0
    if not dst.is_contiguous():  # transposed, channels_last, a slice: through a temporary, in its own layout
        dst.copy_(s.roll(k).view(src.shape))
        return
    d = dst.view(-1)
    d[k:].copy_(s[:n - k])
    d[:k].copy_(s[n - k:])


class OwnInputs:
    """One variant's workload, built from seed A, and the checks against the references."""

    def __init__(self, refs: References):
        self.refs = refs
        self.w = refs.pair.workload(seed=SEEDS[0], device=refs.device, quick=refs.quick)
        self.objects = {k: v for k, v in self.w.inputs.items() if isinstance(v, torch.Tensor)}
        differ = self.modified("a")
        if differ:
            raise ContractError(f"{refs.pair.key}: workload(seed) built twice gives different {differ[0]!r}; "
                                f"draw every input from the seed's generator")
        self.fed, self.shift = "a", None

    def swapped(self) -> str | None:
        """An input the variant replaced in the workload, or turned into another class (which could notice
        the harness writing new values): the harness then no longer feeds what the call reads."""
        return next((k for k, t in self.objects.items()
                     if self.w.inputs.get(k) is not t or type(t) is not type(self.refs.a.inputs[k])), None)

    def feed(self, which: str, shift: int | None = None) -> None:
        """Overwrite the per-call inputs (and the declared state) in place with seed `which`'s values. With
        `shift`, floating-point per-call inputs get those values rotated by `shift` places (a new value set for
        each shift below its size), integer inputs (token ids) are copied as they are, the declared state is left."""
        swapped = self.swapped()
        if swapped:
            raise InputTampered(f"replaced input {swapped!r} (or changed its class): the call must read the "
                                f"tensors the workload gave it")
        src = self.refs.a.inputs if which == "a" else self.refs.fresh
        # Through .data: the tensor's version counter does not move, so a cache keyed on it (or on the
        # data pointer) sees "unchanged" input and is caught returning its old answer.
        derived, updated = self.refs.a.derived, self.refs.a.updated
        with torch.no_grad():
            for k in self.refs.per_call:
                value, dst = src[k], self.w.inputs[k].data
                if shift is not None and (k in derived or k in updated):
                    continue  # derived: written below, from the values just fed; the state: left as it is
                twice = self.refs.twice.get(k) if which == "b" else None
                if (shift is not None and twice is not None and dst.is_contiguous()
                        and 2 * dst.numel() == twice.numel()):  # rotated by `shift`: the window from n - shift
                    n = value.numel()
                    dst.copy_(twice.as_strided(dst.shape, dst.stride(), n - shift % n))
                elif shift is not None and value.is_floating_point():
                    rotate_into(dst, value, shift)
                else:
                    dst.copy_(value)
            if shift is not None:
                for k, f in derived.items():
                    self.w.inputs[k].data.copy_(f({n: t.data if isinstance(t, torch.Tensor) else t
                                                   for n, t in self.w.inputs.items()}))
        self.fed, self.shift = (which, None) if not shift else ("rolled", shift)

    def new_every_sample(self, samples: int) -> bool:
        """Does feed_new give `samples` value sets never fed before? Not where the per-call inputs are integers
        only (token ids) or floating-point tensors of fewer elements than that (a rotation repeats)."""
        return any(v.is_floating_point() and v.numel() >= samples for k, v in self.refs.fresh.items()
                   if k not in self.refs.a.updated)

    def feed_new(self, i: int) -> None:
        """The timed loop's feed: the i-th value set never fed before (seed B's values rotated by i * SHIFT_STEP
        places), into the per-call inputs only (the declared state is left as the calls update it). Consecutive
        sets are not neighbouring rotations (1, 2, 3 places), which a cache keyed on a strided sample of the
        input would see as the same few keys again and again."""
        self.feed("b", shift=i * SHIFT_STEP)

    def expected(self, name: str, which: str) -> torch.Tensor:
        if which == "rolled" and name in self.refs.a.derived:  # computed from the other inputs' rotated values
            others = {k: self.expected(k, which) if isinstance(v, torch.Tensor) and k not in self.refs.a.derived else v
                      for k, v in self.refs.a.inputs.items()}
            return self.refs.a.derived[name](others)
        if which == "rolled":  # what feed_new wrote last: seed B's floating-point values rotated
            value = self.refs.fresh.get(name, self.refs.a.inputs[name])
            if name in self.refs.fresh and value.is_floating_point():
                value = value.reshape(-1).roll(self.shift % max(1, value.numel())).view_as(value)
            return value
        if which == "b" and name in self.refs.fresh:
            return self.refs.fresh[name]
        return self.refs.a.inputs[name]

    def modified(self, which: str | None = None) -> list[str]:
        """Inputs (other than the declared state) whose values differ from what was last fed."""
        which = which or self.fed
        swapped = self.swapped()
        if swapped:
            return [swapped]
        a = self.refs.a
        watched = [k for k, v in a.inputs.items() if isinstance(v, torch.Tensor) and k not in a.updated]
        return [k for k in watched if not isinstance(self.w.inputs.get(k), torch.Tensor)
                or not same_bits(self.w.inputs[k], self.expected(k, which))]
