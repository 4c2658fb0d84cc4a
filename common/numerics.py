"""Torch's global numerics flags: one known state for every variant, set and checked by the harness.

A flag such as `torch.backends.cuda.matmul.allow_tf32` changes what every later matmul in the process computes; set
by a variant, it would leak into the next variant's timing (an fp32 baseline timed on TF32 tensor cores reads as
660% of the fp32 ceiling). The state (README.md, "Numerics flags") is PyTorch's default except that cuDNN's TF32 is
off too, autocast is off, and the CPU thread count is the one the process started with."""
from __future__ import annotations

import contextlib

import torch


def read_flags() -> dict:
    """Every flag that changes what a numerical op computes or how it is chosen."""
    m = torch.backends.cuda.matmul
    return {
        "matmul.allow_tf32": bool(m.allow_tf32),
        "cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "matmul.allow_bf16_reduced_precision_reduction": bool(m.allow_bf16_reduced_precision_reduction),
        "matmul.allow_fp16_reduced_precision_reduction": bool(m.allow_fp16_reduced_precision_reduction),
        "cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn.deterministic": bool(torch.backends.cudnn.deterministic),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "default_dtype": str(torch.get_default_dtype()),
        "autocast.cpu": bool(torch.is_autocast_enabled("cpu")),
        "autocast.cuda": bool(torch.is_autocast_enabled("cuda")),
        "num_threads": torch.get_num_threads(),
    }


THREADS = torch.get_num_threads()  # as the process started, before any pair file was imported


def wanted_flags(precision: str | None) -> dict:
    """The state a variant of this declared PRECISION runs in (None: the baseline's state)."""
    tf32 = precision == "tf32"
    return {"matmul.allow_tf32": tf32, "cudnn.allow_tf32": tf32,
            "float32_matmul_precision": "high" if tf32 else "highest",
            "matmul.allow_bf16_reduced_precision_reduction": True,   # PyTorch's defaults
            "matmul.allow_fp16_reduced_precision_reduction": True,
            "cudnn.benchmark": False, "cudnn.deterministic": False, "deterministic_algorithms": False,
            "default_dtype": "torch.float32", "autocast.cpu": False, "autocast.cuda": False, "num_threads": THREADS}


def apply_flags(flags: dict) -> None:
    m = torch.backends.cuda.matmul
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    m.allow_tf32 = flags["matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn.allow_tf32"]
    m.allow_bf16_reduced_precision_reduction = flags["matmul.allow_bf16_reduced_precision_reduction"]
    m.allow_fp16_reduced_precision_reduction = flags["matmul.allow_fp16_reduced_precision_reduction"]
    torch.backends.cudnn.benchmark = flags["cudnn.benchmark"]
    torch.backends.cudnn.deterministic = flags["cudnn.deterministic"]
    if torch.are_deterministic_algorithms_enabled() != flags["deterministic_algorithms"]:
        # Only when it changes: the call imports torch._inductor.config (so torch._dynamo), and that import made
        # while a process group exists keeps the group alive past destroy_process_group: its Gloo threads then
        # outlive the interpreter and one can abort the rank at exit ("terminate called without an active
        # exception"; seen in 1 of 6 Gloo test runs, traced to here).
        torch.use_deterministic_algorithms(flags["deterministic_algorithms"])
    torch.set_default_dtype(getattr(torch, flags["default_dtype"].split(".")[-1]))
    torch.set_autocast_enabled("cpu", flags["autocast.cpu"])
    torch.set_autocast_enabled("cuda", flags["autocast.cuda"])
    if torch.get_num_threads() != flags["num_threads"]:
        torch.set_num_threads(flags["num_threads"])


class FlagChanged(Exception):
    """A variant changed a global numerics flag; the message names it."""


def check_flags(expected: dict, when: str | None = None) -> None:
    """Raise FlagChanged, naming every flag that differs from `expected` ('name expected -> now')."""
    now = read_flags()
    changed = [f"{k} {expected[k]} -> {now[k]}" for k in expected if now[k] != expected[k]]
    if changed:
        raise FlagChanged((f"{when}: " if when else "") + f"changed torch's global numerics flags "
                          f"({'; '.join(changed)}); ask for lower precision with PRECISION = '...' instead")


@contextlib.contextmanager
def numerics(precision: str | None):
    """Run a block in the flags for `precision`; raise FlagChanged after it if any flag differs from what
    was set; restore the flags in every case, so nothing leaks into the next variant."""
    before, want = read_flags(), wanted_flags(precision)
    apply_flags(want)
    try:
        yield
        check_flags(want)
    finally:
        apply_flags(before)
