"""Time one prepared call the way a user's loop sees it.

GPU: warm up under sustained load until the per-call time settles; then take samples, each bracketed
by CUDA events on the current stream, without syncing between samples (the queue stays full, as in a
training loop); repeat until the median's 95% confidence interval is under 1% of it or the time budget
is spent.

New input values before every sample. A real loop never calls a step twice on the same values, so
the harness does not either: given `feed`, every sample is one call, and before it `feed(i)` writes a
value set the variant has never seen into the per-call inputs (then, for memory-bound pairs, L2 is
scrubbed), both *outside* the sample's events. A variant that keeps results of earlier calls gains
nothing in the number reported, and the writing of the inputs costs it nothing either. Without `feed`
(the validation scripts), a sample shorter than 1 ms is a batch of calls on the same values.

Every round of samples (about 50 ms of work) starts with an event recorded before anything else of the
round and ends with a device-wide sync; its host wall time is compared with the span between that event
and the round's last one. Work that escapes the caller's stream (a side stream nobody joins) finishes
after the last event: the wall clock sees it and the events do not. The variant is marked, and re-timed
with a device-wide sync around every sample, when the *median* round's wall time exceeds its span by
more than 5% (a single slow round is the host, not the variant: the first round once paid for loading
the scrubber's kernel, outside the old span). The harness also reads each verified output on the
caller's stream before a device-wide sync: an output still being written by unjoined work fails
verification there (common.run).

CPU: the same loop with time.perf_counter.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Any, Callable

import torch

SAMPLE_TARGET_S = 1e-3      # a sample shorter than this is a batch of calls
WARMUP_MIN_S = 0.3          # sustained load before any sample is taken (clocks settle)
COMPUTE_WARMUP_S = 3.0      # compute-bound GPU work heats the chip: its clocks take seconds to settle
WARMUP_WINDOW_S = 0.025     # warm-up is judged on windows of back-to-back calls this long
WARMUP_AGREE = 0.01         # three windows in a row within 1% of each other
MAX_CALLS_PER_SAMPLE = 1000
MEDIAN_CI_TARGET = 0.01     # stop when the median's 95% CI is under 1% of it
MIN_SAMPLES = 10
MAX_SAMPLES = 20000
ESCAPE_RATIO = 1.05         # a round's wall time over its event span beyond which work escaped
ESCAPE_SLACK_S = 2e-4       # covers the first launch and the closing sync (tens of µs each)


@dataclasses.dataclass
class Timing:
    median_ms: float
    p10_ms: float
    p90_ms: float
    std_ms: float
    samples: int
    calls_per_sample: int
    timer: str                  # "cuda_event", "wall_sync" (after an escape) or "cpu_wall"
    l2_flush: bool
    median_ci_pct: float        # width of the median's 95% confidence interval, % of the median
    warmup_calls: int
    wall_check: dict | None = None
    gpu_state: dict | None = None   # SM clock, power and temperature read right after the samples
    fed_new_values: bool = False    # every sample one call on input values it had never seen

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def median_ci_rel(sorted_x: list[float]) -> float:
    """Width of the distribution-free 95% CI of the median (order statistics), relative to it."""
    n = len(sorted_x)
    if n < 3:
        return math.inf
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)
    hi = min(n - 1, math.ceil(n / 2 + half))
    med = statistics.median(sorted_x)
    return (sorted_x[hi] - sorted_x[lo]) / med if med > 0 else math.inf


def percentile(sorted_x: list[float], q: float) -> float:
    if len(sorted_x) == 1:
        return sorted_x[0]
    pos = q * (len(sorted_x) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_x) - 1)
    return sorted_x[lo] + (sorted_x[hi] - sorted_x[lo]) * (pos - lo)


def summarize(per_call_s: list[float], calls: int, timer: str, flush: bool, warmup: int) -> Timing:
    xs = sorted(per_call_s)
    ms = [x * 1e3 for x in xs]
    return Timing(
        median_ms=statistics.median(ms), p10_ms=percentile(ms, 0.10), p90_ms=percentile(ms, 0.90),
        std_ms=statistics.pstdev(ms) if len(ms) > 1 else 0.0, samples=len(ms), calls_per_sample=calls,
        timer=timer, l2_flush=flush, median_ci_pct=100 * median_ci_rel(xs), warmup_calls=warmup)


class L2Scrubber:
    """Writes a buffer twice the size of L2 so the next call starts with a cold cache."""

    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
        self.buf = torch.empty(max(2 * l2, 64 * 2**20) // 4, dtype=torch.int32, device=device)

    def __call__(self):
        self.buf.zero_()


def _sync(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _one_call_s(fn: Callable[[], Any], device: torch.device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


def warm_up(fn: Callable[[], Any], device: torch.device, budget_s: float,
            agree: Callable[[float], float], min_s: float = WARMUP_MIN_S) -> tuple[float, int]:
    """Load the device back to back until the per-call time settles. Returns (estimate_s, calls made).

    Three synced calls first take the one-time costs (kernel selection, allocation,
    compilation). Then windows of ~25 ms of back-to-back calls run until three in a
    row agree within 1%, after at least `min_s`: a GPU under sustained load lowers
    its clocks to stay within its power budget, and every number the harness
    reports is taken in that steady state. Memory- and launch-bound work settles
    within WARMUP_MIN_S; dense matrix work heats the chip and settles over seconds
    (an 8192^3 bf16 GEMM on an H100 goes from ~1.40 ms on a cool GPU to ~1.62 ms,
    its SM clock from 1980 to ~1350-1450 MHz), hence COMPUTE_WARMUP_S for it.
    """
    first = [_one_call_s(fn, device) for _ in range(3)]
    est = agree(statistics.median(first))
    per_window = max(1, min(MAX_CALLS_PER_SAMPLE * 10, int(WARMUP_WINDOW_S / max(est, 1e-7))))
    windows: list[float] = []
    start = time.perf_counter()
    while True:
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(per_window):
            fn()
        _sync(device)
        windows.append((time.perf_counter() - t0) / per_window)
        elapsed = time.perf_counter() - start
        last = windows[-3:]
        settled = (len(windows) >= 3 and elapsed >= min_s
                   and max(last) - min(last) <= WARMUP_AGREE * statistics.median(last))
        if agree(0.0 if (settled or elapsed > budget_s) else 1.0) == 0.0:
            break
    return agree(statistics.median(windows[-3:])), 3 + per_window * len(windows)


def _calls_per_sample(est_s: float, fed: bool) -> int:
    if fed or est_s >= SAMPLE_TARGET_S:  # fed: one call per sample, so no call sees the values of another
        return 1
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(SAMPLE_TARGET_S / max(est_s, 1e-7))))


def _enough(per_call: list[float], started: float, budget_s: float, agree) -> bool:
    if len(per_call) >= MAX_SAMPLES or time.perf_counter() - started > budget_s:
        done = len(per_call) >= 3
    else:
        done = len(per_call) >= MIN_SAMPLES and median_ci_rel(sorted(per_call)) <= MEDIAN_CI_TARGET
    # Under torchrun every rank must take the same number of samples (collectives inside the call).
    return agree(0.0 if done else 1.0) == 0.0


def _round_size(est_sample_s: float) -> int:
    # Sync (and check the stopping rule) about every 50 ms of work.
    return max(5, min(200, int(0.05 / max(est_sample_s, 1e-6))))


class Between:
    """What runs before each sample, outside its events: new input values, then the L2 scrub."""

    def __init__(self, feed: Callable[[int], Any] | None, flush: Callable[[], Any] | None):
        self.feed, self.flush, self.fed = feed, flush, 0

    def __call__(self):
        if self.feed:
            self.fed += 1
            self.feed(self.fed)
        if self.flush:
            self.flush()


def _sample_events(fn, device, calls, between: Between, budget_s, est_s, agree) -> tuple[list[float], dict]:
    """Per-call times from CUDA events, and the rounds' wall-clock check."""
    per_call: list[float] = []
    started = time.perf_counter()
    rnd = _round_size(est_s * calls)
    ratios: list[float] = []
    while not _enough(per_call, started, budget_s, agree):
        pending = []
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        # The round's span starts here, before the first feed and scrub: everything the round
        # launches on the caller's stream lies between this event and the last one.
        first = torch.cuda.Event(enable_timing=True)
        first.record()
        for _ in range(rnd):
            between()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(calls):
                fn()
            e.record()
            pending.append((s, e))
        torch.cuda.synchronize(device)
        wall = time.perf_counter() - t0
        span = first.elapsed_time(pending[-1][1]) * 1e-3
        ratios.append((wall - ESCAPE_SLACK_S) / span if span > 0 else math.inf)
        per_call.extend(s.elapsed_time(e) * 1e-3 / calls for s, e in pending)
    typical = statistics.median_low(ratios)  # of two rounds the lower: one slow round alone cannot fail a variant
    return per_call, {"rounds": len(ratios), "median_wall_over_event_span": typical,
                      "max_wall_over_event_span": max(ratios), "escaped": typical > ESCAPE_RATIO}


def _sample_wall(fn, device, calls, between: Between, budget_s, agree) -> list[float]:
    """Host clock around each sample (with a device-wide sync on a GPU): nothing can escape it."""
    per_call: list[float] = []
    started = time.perf_counter()
    while not _enough(per_call, started, budget_s, agree):
        between()
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync(device)
        per_call.append((time.perf_counter() - t0) / calls)
    return per_call


def back_to_back(fn: Callable[[], Any], feed_b: Callable[[], Any], calls: int = 3) -> Any:
    """Seed B's values fed once, then `calls` calls back to back, as inside the timed loop: the caller
    verifies the last answer, so a variant cannot be right only when called from outside a timing loop
    (or only when called slowly)."""
    feed_b()
    for _ in range(calls):
        last = fn()
    return last


def gpu_state(device: torch.device) -> dict | None:
    """SM clock (MHz), power (W) and temperature (C) from NVML, or None where NVML is not installed.

    Read right after timing, it shows the state the numbers were taken in: under sustained
    load an H100 runs below its 1980 MHz boost clock to stay within its power limit.
    """
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        index = device.index if device.index is not None else torch.cuda.current_device()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        return {"sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                "temp_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)}
    except Exception:  # NVML present but not usable here (container, MIG): no state, no failure
        return None


def _alone(x: float) -> float:
    return x


def time_call(fn: Callable[[], Any], device: torch.device, *, flush_l2: bool | Callable[[], Any] = False,
              budget_s: float = 2.0, agree: Callable[[float], float] = _alone,
              compute_bound: bool = False, feed: Callable[[int], Any] | None = None) -> Timing:
    """Median per-call time of `fn` on `device` (see the module docstring for the method).

    `feed(i)` writes the i-th new value set into the call's inputs before each sample (outside the
    timing). `flush_l2` is True (make a scrubber here) or a scrubber made by the caller (so its buffer
    is allocated outside a variant's memory measurement). `compute_bound` work on a GPU warms up for
    at least COMPUTE_WARMUP_S (see warm_up). `agree` reduces a number across processes (max); the
    default is a single process.
    """
    device = torch.device(device)
    min_warmup_s = COMPUTE_WARMUP_S if compute_bound and device.type == "cuda" else WARMUP_MIN_S
    est, warm = warm_up(fn, device, max(min_warmup_s, min(2.0, budget_s)), agree, min_warmup_s)
    calls = _calls_per_sample(est, fed=feed is not None)
    flush = (L2Scrubber(device) if flush_l2 is True else flush_l2) or None if device.type == "cuda" else None
    between = Between(feed, flush)
    between()  # once before any round: the first feed or scrub can load a kernel (lazy module loading)
    _sync(device)
    if device.type != "cuda":
        timing = summarize(_sample_wall(fn, device, calls, between, budget_s, agree), calls, "cpu_wall", False, warm)
    else:
        per_call, check = _sample_events(fn, device, calls, between, budget_s, est, agree)
        state = gpu_state(device)
        check["escaped"] = bool(agree(float(check["escaped"])))
        if check["escaped"]:
            per_call = _sample_wall(fn, device, calls, between, budget_s, agree)
        timing = summarize(per_call, calls, "wall_sync" if check["escaped"] else "cuda_event", flush is not None, warm)
        timing.wall_check, timing.gpu_state = check, state
    timing.fed_new_values = feed is not None
    return timing
