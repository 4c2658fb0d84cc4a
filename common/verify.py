"""Compare a variant's output with the baseline's before anything is timed.

The error measure is the norm-wise relative error ||out - ref|| / ||ref||,
computed in float64, plus the largest element error relative to max|ref|.
Tolerances follow the precision the arithmetic was done in: fp32 only
reorders sums, tf32 keeps 10 mantissa bits, bf16 7, fp16 10 (but less range).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

# Norm-wise relative error allowed per precision. An element may be off by
# ELEMENT_FACTOR times that (relative to the largest reference magnitude),
# which leaves room for cancellation but still catches a wrong index.
TOLERANCE = {"fp64": 1e-10, "fp32": 1e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 2e-2}
ELEMENT_FACTOR = 10.0
DTYPE_PRECISION = {torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
PRECISION_DTYPE = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
                   "fp16": torch.float16, "bf16": torch.bfloat16}
_ORDER = ["fp64", "fp32", "tf32", "fp16", "bf16"]  # tighter to looser


def looser(a: str, b: str) -> str:
    return max(a, b, key=_ORDER.index)


@dataclasses.dataclass
class Verdict:
    ok: bool
    message: str
    rel_err: float = float("nan")
    max_err: float = float("nan")
    tolerance: float = float("nan")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def as_tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return list(out)
    raise TypeError(f"a prepared call must return a tensor or a tuple of tensors, got {type(out).__name__}")


def snapshot(out: Any) -> list[torch.Tensor]:
    """Copy an output to the CPU so a later call (static buffers, graphs) cannot overwrite it.

    The device-wide sync first lets verification see everything the call started, on any
    stream; whether the call also *waited* for that work is the timer's wall-clock check.
    """
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return [t.detach().to("cpu", copy=True) for t in as_tensors(out)]


def verify_outputs(ref: list[torch.Tensor], out: list[torch.Tensor], precision: str = "fp32",
                   allowed_dtypes: tuple = ()) -> Verdict:
    """Is `out` the same result as `ref` to within `precision`'s tolerance?"""
    if len(ref) != len(out):
        return Verdict(False, f"returned {len(out)} tensors, baseline returned {len(ref)}")
    tol = TOLERANCE[precision]
    worst_rel, worst_max = 0.0, 0.0
    for i, (r, o) in enumerate(zip(ref, out)):
        where = f"output {i}: " if len(ref) > 1 else ""
        if tuple(o.shape) != tuple(r.shape):
            return Verdict(False, f"{where}shape {tuple(o.shape)} != baseline {tuple(r.shape)}")
        if o.dtype != r.dtype and o.dtype not in allowed_dtypes:
            return Verdict(False, f"{where}dtype {o.dtype} != baseline {r.dtype}")
        o64, r64 = o.to(torch.float64), r.to(torch.float64)
        if not torch.isfinite(o64).all():
            bad = int((~torch.isfinite(o64)).sum())
            return Verdict(False, f"{where}{bad} NaN/Inf values")
        ref_norm = float(torch.linalg.vector_norm(r64))
        err = o64 - r64
        rel = float(torch.linalg.vector_norm(err)) / max(ref_norm, 1e-30)
        mx = float(err.abs().max()) / max(float(r64.abs().max()), 1e-30) if r64.numel() else 0.0
        worst_rel, worst_max = max(worst_rel, rel), max(worst_max, mx)
        if rel > tol or mx > ELEMENT_FACTOR * tol:
            return Verdict(False, f"{where}relative error {rel:.2e} (max element {mx:.2e}) over {precision} "
                                  f"tolerance {tol:.0e}", rel, mx, tol)
    return Verdict(True, f"relative error {worst_rel:.2e} within {precision} tolerance {tol:.0e}",
                   worst_rel, worst_max, tol)


def responds_to_inputs(out_a: list[torch.Tensor], out_b: list[torch.Tensor]) -> bool:
    """False when two different seeds gave bit-identical outputs: the result ignores its inputs."""
    return any(a.shape != b.shape or not torch.equal(a, b) for a, b in zip(out_a, out_b))


def check_inputs_random(inputs: dict) -> str | None:
    """Return a complaint if a floating-point input is constant (zeros hide unwritten outputs)."""
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 1:
            flat = value.reshape(-1)
            sample = flat[:: max(1, flat.numel() // 65536)]  # strided sample: cheap on huge inputs
            if bool((sample == sample[0]).all()):
                return f"input {key!r} is constant ({float(sample[0])}); draw it from the seed"
    return None
