"""Overlap pairs: the serial and ideal pipelined times from each stage timed alone.

A baseline that defines `stages(w)` returns the chunk count and each stage of one chunk (copy in,
compute, copy out). Timed alone, they give
    serial = chunks x sum(stages)
    ideal  = (chunks - 1) x max(stage) + sum(stages)
the longest stage sets the pace once the pipeline is full, plus one chunk to fill and drain it.
A variant's overlap is where its time lands between the two (0% serial, 100% ideal).
"""
from __future__ import annotations

import torch

from common.pair import Pair, Workload
from common.timing import time_call


def stage_times(pair: Pair, w: Workload, device: torch.device, agree) -> dict | None:
    stages = getattr(pair.baseline.module, "stages", None)
    if stages is None:
        return None
    chunks, fns = stages(w)
    ms = {name: time_call(fn, device, budget_s=0.5, agree=agree).median_ms for name, fn in fns.items()}
    total = sum(ms.values())
    return {"chunks": chunks, "stage_ms": ms, "serial_ms": chunks * total,
            "ideal_ms": (chunks - 1) * max(ms.values()) + total}


def overlap_pct(median_ms: float, st: dict) -> float | None:
    gap = st["serial_ms"] - st["ideal_ms"]
    return 100.0 * (st["serial_ms"] - median_ms) / gap if gap > 0 else None
