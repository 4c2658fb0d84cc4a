"""The pair contract: what a baseline or optimized file must define.

A pair is one `baseline_<name>.py` and one or more `optimized_<name>*.py` in a chapter folder. The
baseline owns the workload; every variant owns only the code it times.

baseline_<name>.py defines
    BOUND                    "launch" | "transfer" | "memory" | "compute" | "link"
    workload(seed, device, quick) -> Workload    seeded inputs plus the work one call does
    prepare(w) -> callable   the zero-argument call that is timed; it returns the output (a tensor
                             or a tuple of tensors)
optional, in the baseline
    DEVICES = ("cuda", "cpu")  where the pair can run (default: both)
    NPROC = 1                  processes to launch with torchrun (chapters 4, 16)
    COMPARE = "logits_margin"  outputs that are free-running greedy logits (n positions x vocabulary):
                               verified by the logits-and-margin rule (common.decode_check), not
                               element by element
    reference(seed, rank, world_size, quick) -> tensor(s)
                               for NPROC > 1: this rank's output, computed on the CPU in one process
                               from every rank's seeded inputs; the baseline is checked against it
                               before any variant is verified
    SWEEP = {"size": "columns per row", "dtype": ("float32", "bfloat16")}
                               what benchmark.py's --sizes and --dtypes may set (one run and one report
                               row per point): workload(seed, device, quick, size=None, dtype=None)
                               takes them as keywords, None meaning its own default; "size" says what
                               a size counts, "dtype" lists the dtypes it takes
    stages(w) -> (chunks, {name: call})
                               for a pipeline (copy in, compute, copy out): the chunk count and each
                               stage of one chunk (all its rank does per chunk; with several ranks the
                               slowest rank's), timed alone to place each variant between serial and
                               ideal overlap (common.overlap)

optimized_<name>*.py defines
    prepare(w) -> callable   same signature, same output, faster
optional, in a variant
    PRECISION = "tf32"|"bf16"|"fp16"|"fp8"
                             the variant computes in a lower precision on purpose: verification uses
                             that precision's tolerance, the output may come back in that dtype, and
                             the compute ceiling is that precision's. For "tf32" the harness turns
                             TF32 on for this variant (common.numerics); no pair file sets torch's
                             global flags itself.
    bytes_moved(w) -> float  the bytes one call of this variant must move, where it moves fewer than
                             the workload's by design (float8 weights where the baseline reads bf16):
                             its GB/s, its share of the bandwidth ceiling and the physics check use
                             them, and the report says so. Honoured only between the workload's bytes
                             scaled by PRECISION's width over the baseline's and the workload's bytes;
                             otherwise ignored, with a note
    DEVICES                  narrower than the baseline's (e.g. a CUDA graph)
    REQUIRES = ("torchao",)  optional packages this file needs; where one is missing the variant (or,
                             in a baseline, the pair) is skipped with the reason, and nothing else fails
    KIND = "pitfall"|"tradeoff"
                             slower on purpose: a pitfall kept to teach it, or time traded for memory.
                             Reported with its measured slowdown, never as a failure or a win; the
                             docstring says why.

At load (`check_contract`, so `--list` reports it in one line): the required names, the values of BOUND,
COMPARE, PRECISION and KIND, that the functions are callable, that a name the harness reads from one
side (BASELINE_NAMES, VARIANT_NAMES) is not defined on the other, where it would be ignored, and that no
upper-case name is a near miss of a contract constant (PRECISON, Compare), which would be ignored too.
What the harness checks of the callable prepare() returns: common.run's docstring.

Both files end with
    if __name__ == "__main__":
        from common import run_pair_file; run_pair_file(__file__)
so running either one prints the comparison through the harness."""
from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from typing import Any, Callable

BOUNDS = ("launch", "transfer", "memory", "compute", "link")
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
KINDS = ("optimized", "pitfall", "tradeoff")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "send_recv")
COMPARES = ("outputs", "logits_margin")   # COMPARE: element by element (the default), or common.decode_check
# Every name the harness reads from a pair file, by the side it reads it from (the docstring above says what
# each is); a name of one side defined on the other is ignored, so check_contract refuses it.
BASELINE_NAMES = ("BOUND", "workload", "prepare", "DEVICES", "NPROC", "COMPARE", "reference", "stages", "REQUIRES",
                  "SWEEP")
SWEEP_DTYPES = ("float32", "bfloat16", "float16")  # what --dtypes may name (torch.<name>)
VARIANT_NAMES = ("prepare", "PRECISION", "bytes_moved", "DEVICES", "REQUIRES", "KIND")
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Workload:
    """Seeded inputs for one call plus the work that call does.

    inputs       anything the prepared call needs; tensors are checked to be random (not constant)
                 before anything is timed
    once         names of inputs a real program prepares once (weights, a pinned staging buffer, data
                 kept in a chosen layout). Every other tensor input is per-call: the data a real loop
                 feeds each step, which the timed call must consume when it runs
    updated      names of inputs the call changes in place by design (an in-place collective's buffer,
                 a KV cache a decode step appends to); restored before every verification call
    flops        floating-point operations per call (0 if not meaningful)
    bytes_moved  the fewest bytes one call must move through the bound's resource: device memory for
                 "memory" (and "compute" and "launch"), the host link for "transfer" (each input read
                 once, each output written once), for "link" the bytes one rank sends to its peers. A
                 variant faster than bytes_moved over the measured bandwidth is SUSPECT (common.physics)
    duplex       for "transfer": bytes_moved crosses the host link both ways at once (two-way ceiling)
    collective   for "link": which collective, so that bus bandwidth follows nccl-tests' definition;
                 message_bytes is its per-rank size
    items        domain units per call (samples, tokens, launches), optional
    item_name    what an item is ("tokens", "samples"): the report's per-item rates name it
    launches     kernel launches the baseline issues per call, optional
    precision    the arithmetic's precision where the output dtype does not say it ("tf32")
    note         one line the report prints beside the pair (a caveat of the workload)
    derived      {name: f(inputs) -> tensor} for a per-call input that holds another input's values in
                 another layout (the same particles stored as structs and as fields): the harness feeds
                 the others new values, then writes f(inputs) into it, so every layout holds one value set"""

    inputs: dict[str, Any]
    once: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    flops: float = 0.0
    bytes_moved: float = 0.0
    items: float = 0.0
    item_name: str = "items"
    launches: int = 0
    precision: str = ""
    note: str = ""
    duplex: bool = False
    collective: str = ""
    message_bytes: float = 0.0
    derived: dict = dataclasses.field(default_factory=dict)

    def per_call(self) -> list[str]:
        """Names of the tensor inputs a real loop feeds anew each step (and the declared state)."""
        import torch  # the contract module imports no torch at the top: importing `common` must not
        return [k for k, v in self.inputs.items() if isinstance(v, torch.Tensor) and k not in self.once]


@dataclasses.dataclass
class Variant:
    name: str            # "baseline", or the optimized file's stem (optimized_<pair>_<suffix>)
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
    def kind(self) -> str:
        return getattr(self.module, "KIND", "optimized")

    def cannot_run(self, device_type: str) -> str | None:
        """Why this file cannot run here (a device it does not support, a package not installed), or None."""
        if device_type not in self.devices:
            return f"needs {' or '.join(self.devices).upper()}"
        missing = [m for m in getattr(self.module, "REQUIRES", ()) if importlib.util.find_spec(m) is None]
        return f"needs the package(s) {', '.join(missing)}, not installed here" if missing else None

    @property
    def summary(self) -> str:
        """The docstring's first sentence, on one line (--list, the report)."""
        first = " ".join((self.module.__doc__ or "").strip().split("\n\n")[0].split())
        return re.match(r"(.*?[.!?])(?:\s|$)|.*", first).group(1) or first


@dataclasses.dataclass
class Pair:
    chapter: int
    name: str
    baseline: Variant
    variants: list[Variant]
    point: dict = dataclasses.field(default_factory=dict)  # {"size": n, "dtype": name}: one point of a sweep

    @property
    def sweep(self) -> dict:
        """What --sizes and --dtypes may set in this pair's workload (the baseline's SWEEP), or {}."""
        return dict(getattr(self.baseline.module, "SWEEP", {}))

    @property
    def point_fields(self) -> dict:
        """What a result record says of its sweep point ({} outside a sweep): the point, and what a size counts."""
        return {"point": self.point, "size_counts": self.sweep.get("size")} if self.point else {}

    def at(self, point: dict) -> "Pair":
        """This pair at one sweep point, named for it: softmax@4096-bfloat16."""
        return dataclasses.replace(self, name=point_name(self.name.split("@")[0], point), point=dict(point))

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

    def cannot_run(self, device_type: str, gpus: int | None = None) -> str | None:
        """Why this pair cannot run here (a device, a package, too few GPUs), or None: the one rule benchmark.py
        applies before any process starts, and a direct caller of common.run.run_pair meets."""
        why = self.baseline.cannot_run(device_type)
        if why:
            return why + (f"; this run is on {device_type.upper()}" if device_type not in self.devices else "")
        if device_type == "cuda" and gpus is not None and self.nproc > gpus:
            return f"needs {self.nproc} GPUs; {gpus} visible"
        return None

    def workload(self, seed: int, device, quick: bool) -> Workload:
        return self.baseline.module.workload(seed=seed, device=device, quick=quick, **self.point)


def point_name(pair: str, point: dict) -> str:
    """A pair's name at one sweep point (softmax@4096-bfloat16); the name alone outside a sweep."""
    return pair + ("@" + "-".join(str(point[k]) for k in ("size", "dtype") if k in point) if point else "")


class ContractError(Exception):
    """A pair file breaks the contract above."""


def load_module(path: Path):
    """Import a chapter file as `chN.<stem>` so optimized files can import their baseline."""
    path = Path(path).resolve()
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    try:
        modname = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
    except ValueError:  # outside the repository (tests use temporary chapters)
        if str(path.parent.parent) not in sys.path:
            sys.path.insert(0, str(path.parent.parent))
        modname = f"{path.parent.name}.{path.stem}"
    return importlib.import_module(modname)


def _check_names(v: Variant, mine: tuple[str, ...], theirs: tuple[str, ...], side: str) -> None:
    """No name the harness reads only from the other side, no callable that is not one, no near miss."""
    defined = {k: o for k, o in vars(v.module).items()   # a function imported from elsewhere is not this file's
               if not (callable(o) and getattr(o, "__module__", v.module.__name__) != v.module.__name__)}
    for name in theirs:
        if name in defined and name not in mine:
            raise ContractError(f"{v.path.name} defines {name}, which the harness reads from the {side} only")
    for name in mine:
        if name in defined and name[0].islower() and not callable(defined[name]):
            raise ContractError(f"{v.path.name}: {name} must be a function")
    constants = [n for n in BASELINE_NAMES + VARIANT_NAMES if n.isupper()]
    for name in defined:
        if name in constants or name.startswith("_") or not name.replace("_", "").isalpha():
            continue
        near = difflib.get_close_matches(name.upper(), constants, n=1, cutoff=0.8)
        if near and (name.isupper() or name.upper() == near[0]):
            raise ContractError(f"{v.path.name} defines {name}, which the harness does not read: {near[0]}?")


def _one_of(where: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ContractError(f"{where}={value!r}, expected one of {allowed}")


def check_contract(pair: Pair) -> None:
    base, file = pair.baseline.module, pair.baseline.path.name
    for attr in ("BOUND", "workload", "prepare"):
        if not hasattr(base, attr):
            raise ContractError(f"{file} must define {attr}")
    _one_of(f"{file}: BOUND", base.BOUND, BOUNDS)
    _one_of(f"{file}: COMPARE", getattr(base, "COMPARE", "outputs"), COMPARES)
    _check_names(pair.baseline, BASELINE_NAMES, VARIANT_NAMES, "optimized files")
    _check_sweep(pair)
    if not pair.variants:
        raise ContractError(f"{pair.key}: no optimized_{pair.name}*.py beside the baseline")
    for v in pair.variants:
        if not hasattr(v.module, "prepare"):
            raise ContractError(f"{v.path.name} must define prepare(workload)")
        _check_names(v, VARIANT_NAMES, BASELINE_NAMES, "baseline")
        if v.precision is not None:
            _one_of(f"{v.path.name}: PRECISION", v.precision, PRECISIONS)
        _one_of(f"{v.path.name}: KIND", v.kind, KINDS)


def _check_sweep(pair: Pair) -> None:
    """SWEEP names only size and dtype, says what a size counts, lists known dtypes; workload takes them."""
    if not hasattr(pair.baseline.module, "SWEEP"):
        return
    name, sweep = pair.baseline.path.name, pair.baseline.module.SWEEP
    if not isinstance(sweep, dict) or not sweep or set(sweep) - {"size", "dtype"}:
        raise ContractError(f"{name}: SWEEP must be a dict with the keys size and/or dtype, not {sweep!r}")
    if "size" in sweep and not (isinstance(sweep["size"], str) and sweep["size"]):
        raise ContractError(f"{name}: SWEEP['size'] must say what a size counts (\"columns per row\")")
    dtypes = sweep.get("dtype", SWEEP_DTYPES)
    if not isinstance(dtypes, tuple) or not dtypes or set(dtypes) - set(SWEEP_DTYPES):
        raise ContractError(f"{name}: SWEEP['dtype'] must be a tuple of {SWEEP_DTYPES}, not {dtypes!r}")
    params = inspect.signature(pair.baseline.module.workload).parameters
    missing = next((k for k in sweep if k not in params), None)
    if missing:
        raise ContractError(f"{name}: SWEEP names {missing}, which workload() does not take as a keyword")


def check_workload(pair: Pair, w: Workload) -> None:
    """The workload's declarations name real inputs, and something is fed per call."""
    import torch  # as in Workload.per_call
    for field in ("once", "updated"):
        unknown = [k for k in getattr(w, field) if k not in w.inputs]
        if unknown:
            raise ContractError(f"{pair.key}: Workload.{field} names {unknown[0]!r}, which is not an input")
    if not w.per_call():
        raise ContractError(f"{pair.key}: every tensor input is in Workload.once; name at least one input a real "
                            f"loop feeds each call, so the harness can check the work happens when the call runs")
    if w.collective:
        _one_of(f"{pair.key}: Workload.collective", w.collective, COLLECTIVES)
    if not all(isinstance(w.inputs[k], torch.Tensor) for k in w.once + w.updated):
        raise ContractError(f"{pair.key}: Workload.once and .updated name tensor inputs only")


# ----------------------------------------------------------------------------- result records
# One shape for a pair's and a variant's result, built here and nowhere else: every path (ran, skipped,
# failed to load, crashed, timed out) fills in the same record, so the report never meets a missing key.
def pair_record(chapter: int, name: str, bound: str, **fields) -> dict:
    """A pair's result before anything ran: status "ok" until a step says otherwise."""
    return {"chapter": chapter, "name": name, "bound": bound, "status": "ok", "error": None, "errors": [],
            "baseline": None, "variants": [], **fields}


def variant_record(name: str, file: str | None, **fields) -> dict:
    """A variant's (or the baseline's) result before it ran: no time, no speedup, not verified."""
    return {"name": name, "file": file, "median_ms": None, "speedup": None, "verified": False,
            "pct_of_ceiling": None, "error": None, "suspect": None, **fields}

