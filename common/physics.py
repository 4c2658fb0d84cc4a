"""The physics check: no verified result may beat the floor its own workload implies.

A call must move at least `bytes_moved` through the resource its bound names, so it cannot take
less than bytes_moved / (the measured bandwidth of that resource):
    memory, compute, launch   device memory   copy_gbps (a 1 GiB device copy, read + write)
    transfer                  the host link   h2d_gbps, or duplex_gbps when the workload moves
                                              data both ways at once (Workload.duplex)
    link                      GPU to GPU      p2p_gbps
A result more than 10% under that floor did not do the work it claims (it returned something
computed earlier, its work escaped the timer), or the ceilings are wrong (measured while the
machine was busy). Either way its speedup is not a result: the report marks it SUSPECT with the
reason.

Device memory's floor counts only the bytes that cannot hide in the largest cache (the GPU's L2, the
CPU's last level): a call can leave at most that much in cache (outputs not yet written back, inputs
the feed just wrote), so at least bytes_moved - cache must cross device memory, whatever the working
set. (It once applied only to working sets of 4x the cache, which let a reusing variant move 2x its
bytes "from cache" unnoticed.) The host link and GPU-to-GPU links have no cache in front of them, so
their floors count every byte.

A compute-bound baseline is also held to its FLOP floor (flops / the matmul rate of its precision): that floor
describes the baseline's algorithm. A variant may change the algorithm (fewer FLOPs, a cheaper
precision), so variants are held to the bytes floor only.
"""
from __future__ import annotations

import functools
from pathlib import Path

import torch

from common.pair import Workload

SLACK = 1.10  # a result may beat a floor by up to 10% (the ceilings' own noise, L2 hits) before it is suspect


CACHE_FACTOR = 4      # a working set this many times the largest cache cannot hide in it
SMALL_MESSAGE = 1 << 20  # a collective below 1 MiB per rank is held to NCCL's small-message latency, not bandwidth


@functools.lru_cache(maxsize=None)
def cache_bytes(device_type: str) -> int:
    """The largest cache in front of the memory a bound names: the GPU's L2, or the CPU's last level."""
    if device_type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)
                   or 64 << 20)
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        try:
            sizes.append(int(text.rstrip("KMG")) * mult)
        except ValueError:
            pass
    return max(sizes, default=64 << 20)


def ceiling_for(bound: str, precision: str, peaks: dict, duplex: bool = False) -> tuple[str, float] | None:
    """(name, value in the unit the bound is rated in) of the ceiling a bound is measured against."""
    if bound == "memory":
        return "copy_gbps", peaks["copy_gbps"]
    if bound == "transfer":
        for key in (("duplex_gbps",) if duplex else ()) + ("h2d_gbps", "copy_gbps"):
            if key in peaks:
                return key, peaks[key]
    if bound == "link":
        return ("p2p_gbps", peaks["p2p_gbps"]) if "p2p_gbps" in peaks else None
    if bound == "compute":  # no stand-in: an fp8 time held against the bf16 rate would read as 2x too good
        rate = peaks["matmul_tflops"].get(precision)
        return (f"matmul_tflops.{precision}", rate) if rate else None
    return None  # launch-bound work is compared with its roofline floor instead


def bandwidth_for(bound: str, w: Workload, peaks: dict) -> tuple[str, float] | None:
    """(ceiling name, GB/s) that `bytes_moved` crosses for this bound, or None where it was not measured."""
    if bound == "transfer":
        key = "duplex_gbps" if w.duplex else "h2d_gbps"
    elif bound == "link":
        key = "p2p_gbps"
    else:
        key = "copy_gbps"
    value = peaks.get(key)
    return (key, value) if value else None


def floors_ms(w: Workload, bound: str, peaks: dict, precision: str, algorithm_fixed: bool,
              cache: int = 0) -> list[tuple[str, float]]:
    """[(description, floor in ms)] that apply to one call; `cache` is the largest cache's size in bytes."""
    out = []
    bw = bandwidth_for(bound, w, peaks) if w.bytes_moved else None
    must = max(0, w.bytes_moved - cache) if bw and bw[0] == "copy_gbps" else w.bytes_moved
    if bw and must > 0:
        what = (f"{must / 1e6:.4g} MB ({w.bytes_moved / 1e6:.4g} MB less a {cache / 1e6:.4g} MB cache)"
                if must != w.bytes_moved else f"{must / 1e6:.4g} MB")
        out.append((f"{what} at {bw[1]:.4g} GB/s ({bw[0]})", must / (bw[1] * 1e9) * 1e3))
    rate = (peaks.get("matmul_tflops") or {}).get(precision)
    if algorithm_fixed and w.flops and rate and bound == "compute":
        out.append((f"{w.flops / 1e9:.4g} GFLOP at {rate:.4g} TFLOP/s ({precision} matmul)", w.flops / (rate * 1e12) * 1e3))
    return out


def suspect_reason(median_ms: float | None, w: Workload, bound: str, peaks: dict | None, precision: str,
                   is_baseline: bool, cache: int = 0, flop_floor: bool = True) -> str | None:
    """Why a verified time is physically implausible, or None when it is not.

    `flop_floor=False` (a CPU run) leaves out the baseline's FLOP floor: a CPU's clock moves with its
    load and temperature by more than the 10% slack, and a CPU figure is never a result here anyway.
    """
    if not median_ms or not peaks:
        return None
    for what, floor in floors_ms(w, bound, peaks, precision, algorithm_fixed=is_baseline and flop_floor,
                                 cache=cache):
        if median_ms * SLACK < floor:
            return (f"{median_ms:.4g} ms is {floor / median_ms:.2f}x faster than the floor its workload implies "
                    f"({what}: {floor:.4g} ms); the call did not do that work, or the ceilings are wrong "
                    f"(re-measure them with --peaks on an idle machine)")
    return None


BUS_FACTOR = {  # nccl-tests' bus bandwidth: busbw = algbw x factor(n), n ranks
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}


def achieved(w: Workload, median_ms: float, bound: str, precision: str, peaks: dict | None,
             cache: int = 0, world_size: int = 1) -> dict:
    out = _rates_and_share(w, median_ms, bound, precision, peaks, cache, world_size)
    return no_share_above_ceiling(out, peaks) if peaks else out


def _rates_and_share(w: Workload, median_ms: float, bound: str, precision: str, peaks: dict | None,
                     cache: int, world_size: int) -> dict:
    """Achieved rates and the share of the ceiling for the pair's bound.

    A share is printed only where its ceiling applies: memory-bound work whose working set fits in
    cache gets none (a rate served from cache says nothing about DRAM); a compute-bound variant faster
    than the matrix units could do its baseline's FLOPs changed the algorithm and is rated on its bytes;
    a share above 110% (the ceilings' noise) is not printed. `ceiling_note` says why where none is.
    """
    s = median_ms * 1e-3
    out = {"tflops": w.flops / s / 1e12 if w.flops else None,
           "gbps": w.bytes_moved / s / 1e9 if w.bytes_moved else None,
           "items_per_s": w.items / s if w.items else None,
           "arithmetic_intensity": w.flops / w.bytes_moved if w.flops and w.bytes_moved else None,
           "pct_of_ceiling": None, "ceiling": None, "ceiling_note": None}
    if w.collective and w.message_bytes:
        algbw = w.message_bytes / s / 1e9
        out.update(algbw_gbps=algbw, busbw_gbps=algbw * BUS_FACTOR[w.collective](world_size))
    if not peaks:
        return out
    ceiling = ceiling_for(bound, precision, peaks, duplex=w.duplex)
    if bound == "launch":  # how far from the roofline floor for this much work
        floors = [f for _, f in floors_ms(w, "compute", peaks, precision, algorithm_fixed=True)]
        if floors:
            out["ceiling"] = "roofline_floor_ms"
            out["pct_of_ceiling"] = 100 * max(floors) / median_ms
        return out
    if bound == "link" and w.message_bytes and w.message_bytes < SMALL_MESSAGE and (peaks.get("nccl") or {}).get(
            "allreduce_small_us"):
        # A small message is latency-bound: its share is NCCL's small all-reduce latency over its own time.
        out["ceiling"] = "nccl.allreduce_small_us"
        out["pct_of_ceiling"] = 100 * peaks["nccl"]["allreduce_small_us"] / (median_ms * 1e3)
        return out
    if ceiling is None:
        out["ceiling_note"] = (f"no {precision} matmul rate was measured on this device: no share printed"
                               if bound == "compute" else None)
        return out
    if bound == "memory" and w.bytes_moved < CACHE_FACTOR * cache:
        out["ceiling_note"] = "working set under 4x the cache: a rate served from cache says nothing of DRAM"
        return out
    name, value = ceiling
    rate = out["busbw_gbps"] if bound == "link" and "busbw_gbps" in out else (
        out["gbps"] if bound in ("memory", "transfer", "link") else out["tflops"])
    if rate is None:
        return out
    out["ceiling"], out["pct_of_ceiling"] = name, 100 * rate / value
    if bound == "compute" and out["pct_of_ceiling"] > 100 * SLACK:
        # Faster than the matrix units can do the baseline's FLOPs: this variant changed the algorithm
        # (fewer FLOPs: a diagonal as a broadcast, a structured product). Its FLOP share means nothing;
        # the bytes it must still move are the bound that applies.
        fp = out["pct_of_ceiling"]
        out["ceiling"] = out["pct_of_ceiling"] = None
        if w.bytes_moved >= CACHE_FACTOR * cache and peaks.get("copy_gbps"):
            out["ceiling"], out["pct_of_ceiling"] = "copy_gbps", 100 * out["gbps"] / peaks["copy_gbps"]
        out["ceiling_note"] = (f"the baseline's FLOPs at {fp:.0f}% of the {precision} matmul rate: this variant does "
                               f"less arithmetic than its baseline, so its share is of the bytes it moves"
                               + ("" if out["pct_of_ceiling"] is not None else " (too few to rate)"))
    return out


def no_share_above_ceiling(out: dict, peaks: dict) -> dict:
    """A share above 110% of its ceiling is not a share: it is dropped, and the note says what was measured."""
    if out.get("pct_of_ceiling") is not None and out["pct_of_ceiling"] > 100 * SLACK:
        cpu = peaks.get("device_type") == "cpu"
        out["ceiling_note"] = (f"measured {out['pct_of_ceiling']:.0f}% of {out['ceiling']}: above the ceiling, so "
                               f"no share is printed" + (" (a CPU's ceilings are measured at smaller sizes and its "
                                                        "clocks move with load)" if cpu else ""))
        out["pct_of_ceiling"] = None
    return out
