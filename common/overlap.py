"""Overlap pairs: the serial and ideal pipelined times from each stage timed alone.

A baseline that defines `stages(w)` returns the chunk count and each stage of one chunk (copy in, compute, copy
out). Timed alone, they give
    serial = chunks x sum(stages)
    ideal  = (chunks - 1) x max(stage) + sum(stages)
(the longest stage paces a full pipeline, plus one chunk to fill and drain it). A variant's overlap is where its
time lands between the two (0% serial, 100% ideal), never outside 0-100%: both bounds carry their stages' noise, so
a time up to NOISE_FRAC past a bound is clamped to it (with a note); further past, there is no share, only
overlap_note's reason: faster than the ideal means a stage is slower alone than in the pipeline (a cold cache, a
collective's own synchronisation, a CPU's clock); slower than serial means the variant adds work."""
from __future__ import annotations

import math

import torch

from common.pair import Pair, Workload
from common.timing import time_call


def stage_times(pair: Pair, w: Workload, device: torch.device, agree) -> dict | None:
    stages = getattr(pair.baseline.module, "stages", None)
    if stages is None:
        return None
    chunks, fns = stages(w)
    # the slowest rank's stage: in a pipeline each rank runs its own (pipeline_handoff's rank 1 adds its loss)
    ms = {name: agree(time_call(fn, device, budget_s=0.5, agree=agree).median_ms) for name, fn in fns.items()}
    total = sum(ms.values())
    return {"chunks": chunks, "stage_ms": ms, "serial_ms": chunks * total,
            "ideal_ms": (chunks - 1) * max(ms.values()) + total}


NOISE_FRAC = 0.05   # how far past a bound a time may land and still count as at the bound


def placement(median_ms: float, st: dict) -> tuple[float | None, str | None]:
    """(share in 0-100% or None, why it was clamped or is missing, or None when it lies inside)."""
    serial, ideal = st["serial_ms"], st["ideal_ms"]
    if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (median_ms, serial, ideal)):
        return None, "no finite time for the variant or its stages"
    if serial - ideal <= NOISE_FRAC * serial:
        return None, (f"serial ({serial:.3g} ms) and ideal ({ideal:.3g} ms) lie within {NOISE_FRAC:.0%} of each "
                      f"other: one chunk, or one stage dominates; no overlap to measure")
    pct = 100.0 * (serial - median_ms) / (serial - ideal)
    if median_ms < ideal * (1 - NOISE_FRAC):
        return None, (f"{1 - median_ms / ideal:.0%} faster than the stages' ideal overlap: the stages timed alone "
                      f"are slower than inside the pipeline")
    if median_ms > serial * (1 + NOISE_FRAC):
        return None, f"{median_ms / serial - 1:.0%} slower than running the stages one after another"
    if pct > 100.0:
        return 100.0, f"measured {pct:.0f}%, within {NOISE_FRAC:.0%} of the ideal time: shown as 100%"
    if pct < 0.0:
        return 0.0, f"measured {pct:.0f}%, within {NOISE_FRAC:.0%} of the serial time: shown as 0%"
    return pct, None


def overlap_pct(median_ms: float, st: dict) -> float | None:
    """Where median_ms lands between serial (0%) and ideal (100%); always in 0-100%, or None (see overlap_note)."""
    return placement(median_ms, st)[0]


def overlap_note(median_ms: float, st: dict) -> str | None:
    """Why overlap_pct is clamped or None for this time (None when the share is as measured)."""
    return placement(median_ms, st)[1]
