"""The physics check: no verified result may beat the floor its own workload implies (README.md, "SUSPECT").

A call moves at least `bytes_moved` through the resource its bound names (device memory: copy_gbps; the host link:
h2d_gbps, or duplex_gbps where data moves both ways at once; GPU to GPU: p2p_gbps), so it takes at least
bytes_moved / that bandwidth. A result more than 10% under that floor did not do the work it claims, or the ceilings
are wrong: the report marks it SUSPECT. Device memory's floor counts only the bytes that cannot hide in the largest
cache (a cut-off at 4x the cache once let a reusing variant move 2x its bytes "from cache" unnoticed). A
compute-bound baseline is also held to its FLOP floor; a variant may change the algorithm: bytes only.
"""
from __future__ import annotations

from common.pair import Workload

SLACK = 1.10  # a result may beat a floor by up to 10% (the ceilings' own noise, L2 hits) before it is suspect
CACHE_FACTOR = 4      # a working set this many times the largest cache cannot hide in it
SMALL_MESSAGE = 1 << 20  # a collective below 1 MiB per rank is held to NCCL's small-message latency, not bandwidth


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
    """(ceiling name, GB/s) that `bytes_moved` crosses for this bound; None where not measured (no stand-in)."""
    key = {"transfer": "duplex_gbps" if w.duplex else "h2d_gbps", "link": "p2p_gbps"}.get(bound, "copy_gbps")
    return (key, peaks[key]) if peaks.get(key) else None


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
        what = f"{w.flops / 1e9:.4g} GFLOP at {rate:.4g} TFLOP/s ({precision} matmul)"
        out.append((what, w.flops / (rate * 1e12) * 1e3))
    return out


def suspect_reason(median_ms: float | None, w: Workload, bound: str, peaks: dict | None, precision: str,
                   is_baseline: bool, cache: int = 0, flop_floor: bool = True) -> str | None:
    """Why a verified time is physically implausible, or None. `flop_floor=False` (a CPU run): no FLOP floor, as a
    CPU's clock moves with load and temperature by more than the 10% slack (and its figures are never results)."""
    if not median_ms or not peaks:
        return None
    for what, floor in floors_ms(w, bound, peaks, precision, algorithm_fixed=is_baseline and flop_floor, cache=cache):
        if median_ms * SLACK < floor:
            return (f"{median_ms:.4g} ms is {floor / median_ms:.2f}x faster than the floor its workload implies "
                    f"({what}: {floor:.4g} ms); the call did not do that work, or the ceilings are wrong "
                    f"(re-measure them with --peaks on an idle machine)")
    return None


# nccl-tests' bus bandwidth: busbw = algbw x factor(n), n ranks
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0, "send_recv": lambda n: 1.0}


def achieved(w: Workload, median_ms: float, bound: str, precision: str, peaks: dict | None,
             cache: int = 0, world_size: int = 1) -> dict:
    out = _rates_and_share(w, median_ms, bound, precision, peaks, cache, world_size)
    if peaks and out.get("pct_of_ceiling") is not None and out["pct_of_ceiling"] > 100 * SLACK:
        # A share above 110% of its ceiling is not a share: it is dropped, and the note says what was measured.
        cpu = peaks.get("device_type") == "cpu"
        out["ceiling_note"] = (f"measured {out['pct_of_ceiling']:.0f}% of {out['ceiling']}: above the ceiling, so "
                               f"no share is printed" + (" (a CPU's ceilings are measured at smaller sizes and its "
                                                        "clocks move with load)" if cpu else ""))
        out["pct_of_ceiling"] = None
    return out


def _rates_and_share(w: Workload, median_ms: float, bound: str, precision: str, peaks: dict | None,
                     cache: int, world_size: int) -> dict:
    """Achieved rates, and the share of the ceiling for the pair's bound where that ceiling applies (`ceiling_note`
    says why where none is: a working set that fits in cache, fewer FLOPs than the baseline, over 110%)."""
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
            out.update(ceiling="roofline_floor_ms", pct_of_ceiling=100 * max(floors) / median_ms)
        return out
    if (bound == "link" and w.message_bytes and w.message_bytes < SMALL_MESSAGE
            and (small_us := (peaks.get("nccl") or {}).get("allreduce_small_us"))):
        # A small message is latency-bound: its share is NCCL's small all-reduce latency over its own time.
        out.update(ceiling="nccl.allreduce_small_us", pct_of_ceiling=100 * small_us / (median_ms * 1e3))
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
        # Faster than the matrix units can do the baseline's FLOPs: this variant does fewer (a diagonal as a
        # broadcast, a structured product), so its FLOP share means nothing; the bytes it must still move apply.
        fp = out["pct_of_ceiling"]
        out["ceiling"] = out["pct_of_ceiling"] = None
        if w.bytes_moved >= CACHE_FACTOR * cache and peaks.get("copy_gbps"):
            out["ceiling"], out["pct_of_ceiling"] = "copy_gbps", 100 * out["gbps"] / peaks["copy_gbps"]
        out["ceiling_note"] = (f"the baseline's FLOPs at {fp:.0f}% of the {precision} matmul rate: this variant does "
                               f"less arithmetic than its baseline, so its share is of the bytes it moves"
                               + ("" if out["pct_of_ceiling"] is not None else " (too few to rate)"))
    return out
