"""Compare a variant's output with the baseline's.

Two measures, in float64: the norm-wise relative error ||out - ref|| / ||ref||, and the largest element error
relative to max|ref| (it catches a wrong tile or index that the norm of a large output averages away: a 128 x 128
tile 15% off in a 16384 x 4096 output moves the norm by only ~0.2%).

Tolerances (norm-wise, element-wise) are about 3x the largest error a correct variant committed under profiles/
shows in that precision, so a real error has little room to hide.
    bf16  H100, ch1 fused GELU and tensor cores, K up to 8192: at most 3.3e-3 and 4.1e-3 -> 1e-2 and 1.25e-2
    tf32  committed: 2.9e-4 and 3.0e-4 -> 1e-3 and 1e-3
    fp16  none committed yet; tf32's figures plus fp16's output rounding (2^-11 ~ 4.9e-4) -> 2e-3 and 2.5e-3
    fp8   none committed; torchao's float8 configs measured 3.7-5.3% norm-wise against bf16 on an H100 -> 0.15
          and 0.25 (e4m3 keeps 3 mantissa bits)
    fp32  committed variants only reorder sums and are bit-identical; 1e-5 and 1e-4 leave room for a reordered
          reduction over ~10^4 terms
    fp64  1e-10 and 1e-9"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch

TOLERANCE = {"fp64": (1e-10, 1e-9), "fp32": (1e-5, 1e-4), "tf32": (1e-3, 1e-3), "fp16": (2e-3, 2.5e-3),
             "bf16": (1e-2, 1.25e-2), "fp8": (0.15, 0.25)}
DTYPE_PRECISION = {torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
                   torch.float8_e4m3fn: "fp8", torch.float8_e5m2: "fp8"}
PRECISION_DTYPE = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
                   "fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}
_ORDER = ["fp64", "fp32", "tf32", "fp16", "bf16", "fp8"]  # tighter to looser


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
    """The call's outputs as plain tensors. A Tensor subclass is refused: it could defer the work until
    someone reads it, and the timed calls' outputs are never read."""
    tensors = [out] if isinstance(out, torch.Tensor) else list(out) if isinstance(out, (tuple, list)) else None
    if tensors is None or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise TypeError(f"a prepared call must return a tensor or a tuple of tensors, got {type(out).__name__}")
    odd = next((type(t).__name__ for t in tensors if type(t) is not torch.Tensor
                and not isinstance(t, torch.nn.Parameter)), None)
    if odd:
        raise TypeError(f"a prepared call must return plain tensors, got a {odd} (a subclass may defer its work)")
    return tensors


def snapshot(out: Any) -> list[torch.Tensor]:
    """Copy an output to the CPU after a device-wide sync: everything the call started, on any stream."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return [t.detach().to("cpu", copy=True) for t in as_tensors(out)]


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN equals NaN), for any layout."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.contiguous().reshape(-1), b.contiguous().reshape(-1)
    if a.is_floating_point() or a.is_complex():
        a, b = a.view(torch.uint8), b.view(torch.uint8)
    return torch.equal(a, b)


def snapshot_as_caller(out: Any, apart=contextlib.nullcontext) -> tuple[list[torch.Tensor], str | None]:
    """The output as the caller's stream sees it when the call returns, and a complaint if it differs later: work
    the call left on a stream the caller's stream never waits for may still be writing the output. `apart`: a
    context for the harness's own GPU copy (PeakMemory.apart keeps it out of the variant's peak memory)."""
    tensors = as_tensors(out)
    if not any(t.is_cuda for t in tensors) and not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return [t.detach().to("cpu", copy=True) for t in tensors], None
    torch.cuda.current_stream().synchronize()  # what the caller's stream has finished, no more
    seen = None
    if all(t.is_cuda for t in tensors):
        # Compared on the GPU: a copy on the caller's stream, then a device-wide sync, then the bits; one copy to
        # the host instead of two and no comparison there (a GB-sized output: ~0.5 s a call saved on an H100).
        try:
            with apart():
                seen = [t.detach().clone() for t in tensors]
                torch.cuda.synchronize()
                late = _late(seen, [t.detach() for t in tensors])
                seen = None
            return [t.detach().to("cpu", copy=True) for t in tensors], late
        except torch.cuda.OutOfMemoryError:  # no room to compare on the GPU: on the host, below
            if seen is not None:  # the caller's view was taken: keep it
                seen = [s.to("cpu") for s in seen]
    if seen is None:
        seen = [t.detach().to("cpu", copy=True) for t in tensors]
    settled = snapshot(out)
    return settled, _late(seen, settled)


def _late(seen: list[torch.Tensor], settled: list[torch.Tensor]) -> str | None:
    i = next((i for i, (a, b) in enumerate(zip(seen, settled)) if not same_bits(a, b)), None)
    return None if i is None else (f"output {i} was still being written after the caller's stream finished the "
                                   f"call: work left on a stream the caller never waits for")


CHUNK = 1 << 24  # elements compared at a time: float64 copies of a 2 GiB output would need 4x its size


def _error_stats(ref: torch.Tensor, out: torch.Tensor) -> tuple[int, float, float, float, float]:
    """(NaN/Inf count in out, ||ref||, ||out - ref||, max|out - ref|, max|ref|), in float64, in chunks of CHUNK
    elements, on the GPU where one is in use (a GB-sized output took ~4 s a comparison in float64 on the host,
    five a variant)."""
    device = next((t.device for t in (out, ref) if t.is_cuda), None)
    if device is None and torch.cuda.is_available() and torch.cuda.is_initialized():
        device = torch.device("cuda", torch.cuda.current_device())
    r_flat, o_flat = ref.reshape(-1), out.reshape(-1)
    bad, ref_sq, err_sq, err_max, ref_max = 0, 0.0, 0.0, 0.0, 0.0
    for i in range(0, r_flat.numel(), CHUNK):
        # to the device in the tensors' own dtype, then widened there: .to(device, float64) on a host tensor
        # widens on the host first and copies four times the bytes (3 s for a 400M-element bf16 output)
        r64 = r_flat[i:i + CHUNK].to(device or "cpu").to(torch.float64)
        o64 = o_flat[i:i + CHUNK].to(device or "cpu").to(torch.float64)
        finite = torch.isfinite(o64)
        if not bool(finite.all()):
            bad += int((~finite).sum())
            continue
        err = o64 - r64
        ref_sq += float(r64.square().sum())
        err_sq += float(err.square().sum())
        err_max = max(err_max, float(err.abs().max()))
        ref_max = max(ref_max, float(r64.abs().max()))
    return bad, ref_sq ** 0.5, err_sq ** 0.5, err_max, ref_max


def verify_outputs(ref: list[torch.Tensor], out: list[torch.Tensor], precision: str = "fp32",
                   allowed_dtypes: tuple = ()) -> Verdict:
    """Is `out` the same result as `ref` to within `precision`'s tolerance?"""
    if len(ref) != len(out):
        return Verdict(False, f"returned {len(out)} tensors, baseline returned {len(ref)}")
    tol, elem_tol = TOLERANCE[precision]
    worst_rel, worst_max = 0.0, 0.0
    for i, (r, o) in enumerate(zip(ref, out)):
        where = f"output {i}: " if len(ref) > 1 else ""
        if tuple(o.shape) != tuple(r.shape):
            return Verdict(False, f"{where}shape {tuple(o.shape)} != baseline {tuple(r.shape)}")
        if o.dtype != r.dtype and o.dtype not in allowed_dtypes:
            return Verdict(False, f"{where}dtype {o.dtype} != baseline {r.dtype}")
        bad, ref_norm, err_norm, err_max, ref_max = _error_stats(r, o)
        if bad:
            return Verdict(False, f"{where}{bad} NaN/Inf values")
        rel = err_norm / max(ref_norm, 1e-30)
        mx = err_max / max(ref_max, 1e-30) if r.numel() else 0.0
        worst_rel, worst_max = max(worst_rel, rel), max(worst_max, mx)
        if rel > tol or mx > elem_tol:
            return Verdict(False, f"{where}relative error {rel:.2e}, max element {mx:.2e} of max|ref|: over the "
                                  f"{precision} tolerance ({tol:.2g}, element {elem_tol:.2g})", rel, mx, tol)
    return Verdict(True, f"relative error {worst_rel:.2e}, max element {worst_max:.2e}: within the {precision} "
                         f"tolerance ({tol:.2g}, element {elem_tol:.2g})", worst_rel, worst_max, tol)


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
