"""The pair contract: what a baseline or optimized file must define.

A pair is one `baseline_<name>.py` and one or more `optimized_<name>*.py` in a
chapter folder. The baseline owns the workload; every variant owns only the
code it times.

baseline_<name>.py defines
    BOUND                    "launch" | "transfer" | "memory" | "compute"
    workload(seed, device, quick) -> Workload
                             seeded inputs plus the work one call does
    prepare(w) -> callable   returns the zero-argument call that is timed;
                             the call returns the output (a tensor or a
                             tuple of tensors)
optional, in the baseline
    DEVICES = ("cuda", "cpu")  where the pair can run (default: both)
    NPROC = 1                  processes to launch with torchrun (chapters 4, 16)

optimized_<name>*.py defines
    prepare(w) -> callable   same signature, same output, faster
optional, in a variant
    PRECISION = "tf32"|"bf16"|"fp16"
                             the variant deliberately computes in a lower
                             precision: verification uses that precision's
                             tolerance, the output may come back in that dtype,
                             and the compute ceiling is that precision's.
    DEVICES                  narrower than the baseline's (e.g. a CUDA graph)

Both files end with
    if __name__ == "__main__":
        from common import run_pair_file; run_pair_file(__file__)
so running either one prints the comparison through the harness.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

BOUNDS = ("launch", "transfer", "memory", "compute")
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16")
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Workload:
    """Seeded inputs for one call plus the work that call does.

    flops        floating-point operations per call (0 if not meaningful)
    bytes_moved  the fewest bytes one call must move through the bound's
                 resource: device memory for "memory", the host link for
                 "transfer" (each input read once, each output written once)
    items        domain units per call (samples, tokens, launches), optional
    launches     kernel launches the baseline issues per call, optional
    inputs       anything the prepared call needs; tensors are checked to be
                 random (not constant) before anything is timed
    """

    inputs: dict[str, Any]
    flops: float = 0.0
    bytes_moved: float = 0.0
    items: float = 0.0
    item_name: str = "items"
    launches: int = 0
    precision: str = ""   # the arithmetic's precision when the output dtype does not say it (e.g. "tf32")
    note: str = ""


@dataclasses.dataclass
class Variant:
    name: str            # "baseline" or the part after optimized_<pair>_
    path: Path
    module: Any

    @property
    def prepare(self) -> Callable[[Workload], Callable[[], Any]]:
        return self.module.prepare

    @property
    def precision(self) -> str | None:
        return getattr(self.module, "PRECISION", None)

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(getattr(self.module, "DEVICES", ("cuda", "cpu")))

    @property
    def summary(self) -> str:
        doc = (self.module.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


@dataclasses.dataclass
class Pair:
    chapter: int
    name: str
    baseline: Variant
    variants: list[Variant]

    @property
    def key(self) -> str:
        return f"ch{self.chapter}/{self.name}"

    @property
    def bound(self) -> str:
        return self.baseline.module.BOUND

    @property
    def nproc(self) -> int:
        return int(getattr(self.baseline.module, "NPROC", 1))

    @property
    def devices(self) -> tuple[str, ...]:
        return self.baseline.devices

    def workload(self, seed: int, device, quick: bool) -> Workload:
        return self.baseline.module.workload(seed=seed, device=device, quick=quick)


class ContractError(Exception):
    """A pair file breaks the contract above."""


def load_module(path: Path):
    """Import a chapter file as `chN.<stem>` so optimized files can import their baseline."""
    path = Path(path).resolve()
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    try:
        rel = path.relative_to(REPO_ROOT).with_suffix("")
        modname = ".".join(rel.parts)
        return importlib.import_module(modname)
    except ValueError:  # outside the repository (tests use temporary chapters)
        if str(path.parent.parent) not in sys.path:
            sys.path.insert(0, str(path.parent.parent))
        modname = f"{path.parent.name}.{path.stem}"
        return importlib.import_module(modname)


def check_contract(pair: Pair) -> None:
    base = pair.baseline.module
    for attr in ("BOUND", "workload", "prepare"):
        if not hasattr(base, attr):
            raise ContractError(f"{pair.baseline.path.name} must define {attr}")
    if base.BOUND not in BOUNDS:
        raise ContractError(f"{pair.baseline.path.name}: BOUND={base.BOUND!r}, expected one of {BOUNDS}")
    if not pair.variants:
        raise ContractError(f"{pair.key}: no optimized_{pair.name}*.py beside the baseline")
    for v in pair.variants:
        if not hasattr(v.module, "prepare"):
            raise ContractError(f"{v.path.name} must define prepare(workload)")
        if v.precision is not None and v.precision not in PRECISIONS:
            raise ContractError(f"{v.path.name}: PRECISION={v.precision!r}, expected one of {PRECISIONS}")
