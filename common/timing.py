"""Time prepared calls the way a user's loop sees them (README.md, "Timing", gives the method and its numbers).

GPU: after a warm-up under sustained load, samples bracketed by CUDA events on the current stream, with no sync
between them, in rounds of about 50 ms, until the median's 95% confidence interval is under 1% of it or the budget
is spent. CPU: the same with time.perf_counter. Calls compared with each other are timed in interleaved rounds
(`time_rounds`), so whatever drifts meanwhile falls on both alike. Given `feed`, every sample is one call on values
never seen before, written (then, for memory-bound pairs, L2 scrubbed) outside the events; without it (the
validation scripts), a sample under 1 ms is a batch of calls. Where the *median* round's wall time exceeds its
event span by over 5%, work escaped the caller's stream: the variant is re-timed with a device-wide sync around
every sample.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist

BUDGET_S = 2.0             # timing budget per variant (benchmark.py --budget), unless --quick
QUICK_BUDGET_S = 0.3       # ...with --quick
SAMPLE_TARGET_S = 1e-3      # a sample shorter than this is a batch of calls
WARMUP_MIN_S = 0.3          # sustained load before any sample is taken (clocks settle)
COMPUTE_WARMUP_S = 3.0      # compute-bound GPU work heats the chip: its clocks take seconds to settle
WARMUP_WINDOW_S = 0.025     # warm-up is judged on windows of back-to-back calls this long
WARMUP_AGREE = 0.01         # three windows in a row within 1% of each other
MAX_CALLS_PER_SAMPLE = 1000
MEDIAN_CI_TARGET = 0.01     # stop when the median's 95% CI is under 1% of it
MIN_SAMPLES = 10
MAX_SAMPLES = 20000
KEPT_STREAK = 16            # a round whose last answer is checked runs at least this many samples back to back
ROUND_S = 0.05              # a round is about this much work, and at least 5 samples (a kept round KEPT_STREAK)...
SLOW_ROUND_S = 1.0          # ...unless those would take longer than this: a call of seconds (serving a burst of
                            # requests) gets rounds of one sample, and its streak is a second of calls back to back
MIN_ROUNDS = 10             # with several entries: paired rounds before a speedup's interval is trusted
MAX_ROUNDS = 20000
RATIO_CI_TARGET = 0.02      # stop when every paired speedup's 95% interval is under 2% of it
TWO_MODE_RATIO = 1.5        # two levels of per-call time this far apart...
TWO_MODE_SEPARATION = 3.0   # ...and this clearly apart (Ashman's D) are two modes
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
    rounds: int = 0                 # rounds of samples (timed in turn with the pair's other entries)
    round_ms: list | None = None    # each round's median per-call time
    two_modes: dict | None = None   # two separate levels of per-call time (common.timing.two_modes)
    host_pace: dict | None = None   # whether the GPU waited on the host between samples (common.timing.host_pace)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def median_interval(sorted_x: list[float]) -> tuple[float, float]:
    """The distribution-free 95% interval of the median (order statistics), as (low, high)."""
    n = len(sorted_x)
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)
    hi = min(n - 1, math.ceil(n / 2 + half))
    return sorted_x[lo], sorted_x[hi]


def median_ci_rel(sorted_x: list[float]) -> float:
    """Width of the median's 95% interval (`median_interval`), relative to the median."""
    if len(sorted_x) < 3:
        return math.inf
    lo, hi = median_interval(sorted_x)
    med = statistics.median(sorted_x)
    return (hi - lo) / med if med > 0 else math.inf


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
    """Puts L2 in the state a memory-bound call meets in a loop of itself, before each of its samples: reads a
    buffer twice L2's size (evicting the last call's data, dirty lines written back here, outside the events), then
    writes as many bytes as the call returns (`output_bytes`, up to L2's size), as the previous output would sit in
    L2 unwritten. Why both halves (H100, profiles/h100/ch13-d19f8c2/probe.md): README.md, "Timing", step 3."""

    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        self.l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
        self.buf = torch.zeros(max(2 * self.l2, 64 * 2**20) // 4, dtype=torch.int32, device=device)
        self.out = torch.zeros((), dtype=torch.int32, device=device)
        self.dirty = 0

    def output_bytes(self, nbytes: int):
        """The bytes one call returns; L2 is left holding that many dirty bytes, up to its size."""
        self.dirty = min(int(nbytes), self.l2) // 4

    def __call__(self):
        torch.amax(self.buf, dim=0, out=self.out)
        if self.dirty:
            self.buf[:self.dirty].fill_(0)


@functools.lru_cache(maxsize=None)
def cache_bytes(device_type: str) -> int:
    """The largest cache in front of the memory a bound names: the GPU's L2, or the CPU's last level."""
    if device_type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)
                   or 64 << 20)
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        try:
            sizes.append(int(text.rstrip("KMG")) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1))
        except ValueError:
            pass
    return max(sizes, default=64 << 20)


def returned_bytes(out: Any) -> int:
    """Bytes of the tensors a call returned (a tensor, or a tuple or list of them; anything else counts 0)."""
    if isinstance(out, torch.Tensor):
        return out.numel() * out.element_size()
    return sum(returned_bytes(o) for o in out) if isinstance(out, (tuple, list)) else 0


def _sync(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _synced(fn: Callable[[], Any], device: torch.device, calls: int = 1) -> float:
    """Host seconds of `calls` back-to-back calls between two device syncs. Each output is dropped as its call
    returns, inside the interval, as a loop that does not keep it frees it."""
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    _sync(device)
    return time.perf_counter() - t0


def warm_up(fn: Callable[[], Any], device: torch.device, budget_s: float,
            agree: Callable[[float], float], min_s: float = WARMUP_MIN_S) -> tuple[float, int]:
    """Load the device back to back until the per-call time settles. Returns (estimate_s, calls made).

    Three synced calls take the one-time costs (the last two count towards `budget_s`, so calls of seconds stop
    there); then ~25 ms windows of back-to-back calls until three in a row agree within 1%, after at least `min_s`.
    Dense matrix work heats the chip over seconds (an 8192^3 bf16 GEMM on an H100 goes from ~1.40 ms cool to
    ~1.62 ms, its SM clock from 1980 to ~1350-1450 MHz), hence COMPUTE_WARMUP_S.
    """
    first = [_synced(fn, device)]
    start = time.perf_counter()
    for _ in range(2):
        first.append(_synced(fn, device))
        if agree(time.perf_counter() - start) > budget_s:   # (budget_s >= min_s: every caller's is)
            break
    est = agree(statistics.median(first[1:]))   # the counted calls: the first may hold one-time costs
    per_window = max(1, min(MAX_CALLS_PER_SAMPLE * 10, int(WARMUP_WINDOW_S / max(est, 1e-7))))
    windows: list[float] = []
    while True:
        elapsed = time.perf_counter() - start
        last = windows[-3:]
        settled = (len(windows) >= 3 and elapsed >= min_s
                   and max(last) - min(last) <= WARMUP_AGREE * statistics.median(last))
        if agree(0.0 if (settled or elapsed > budget_s) else 1.0) == 0.0:
            break
        windows.append(_synced(fn, device, per_window) / per_window)
    return agree(statistics.median(windows[-3:] or first[1:])), len(first) + per_window * len(windows)


def _calls_per_sample(est_s: float, fed: bool) -> int:
    if fed or est_s >= SAMPLE_TARGET_S:  # fed: one call per sample, so no call sees the values of another
        return 1
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(SAMPLE_TARGET_S / max(est_s, 1e-7))))


def _round_size(est_sample_s: float) -> int:
    # Sync (and check the stopping rule) about every 50 ms of work: at least 5 samples, fewer past SLOW_ROUND_S.
    est = max(est_sample_s, 1e-6)
    return max(1, min(5, int(SLOW_ROUND_S / est)), min(200, int(ROUND_S / est)))


def _streak(est_sample_s: float) -> int:
    """Samples back to back before a kept answer: KEPT_STREAK, or as many as fill SLOW_ROUND_S if fewer."""
    return max(1, min(KEPT_STREAK, math.ceil(SLOW_ROUND_S / max(est_sample_s, 1e-6))))


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


def _on_host(out: Any) -> bool:
    tensors = [out] if isinstance(out, torch.Tensor) else list(out) if isinstance(out, (tuple, list)) else []
    return any(isinstance(t, torch.Tensor) and not t.is_cuda for t in tensors)


def _clone(out: Any) -> Any:
    """A copy of a call's output (a tensor or a tuple of them), taken on the caller's stream (a host tensor:
    the caller's stream must have finished first)."""
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_clone(t) for t in out)
    return out


@dataclasses.dataclass
class Timed:
    """One callable's state through the timed rounds: its samples, its rounds, the answer it kept."""
    fn: Callable[[], Any]
    between: Between
    context: Callable[[], Any] = contextlib.nullcontext   # entered around each of its rounds (numerics flags)
    calls: int = 1
    rnd: int = 5
    streak: int = KEPT_STREAK   # a kept round runs at least this many samples (common.timing._streak)
    warmup_calls: int = 0
    per_call: list = dataclasses.field(default_factory=list)     # seconds, every sample
    round_s: list = dataclasses.field(default_factory=list)      # each round's median per-call time
    wall_ratios: list = dataclasses.field(default_factory=list)  # each round's host wall over its event span
    host_rounds: list = dataclasses.field(default_factory=list)  # each round's (host issue time / span, caught up)
    events: list = dataclasses.field(default_factory=list)       # CUDA events its rounds record, reused
    error: Exception | None = None


def _round_events(t: Timed, device, keep: bool) -> tuple[list[float], float | None, Any]:
    """One round of `t.rnd` samples timed with CUDA events, and its wall-over-span ratio (README.md, "Timing", step
    5); its host pace goes to `t.host_rounds`. With `keep`, the round runs at least `t.streak` samples, and its last
    call's output is copied after that sample's closing event, untimed."""
    torch.cuda.synchronize(device)
    n = max(t.rnd, t.streak) if keep else t.rnd
    # Events made once and reused, recorded on the stream fetched once: on an H200's host two new events recorded
    # cost 17.8 us a sample, two reused 15.0, two reused on a given stream 7.2 (profiles/h200/harness-b7052f2)
    while len(t.events) < 2 * n + 1:
        t.events.append(torch.cuda.Event(enable_timing=True))
    first, stream = t.events[-1], torch.cuda.current_stream()
    first.record(stream)
    # The host clock starts once the GPU has reached the round: while another process holds the GPU, the wait
    # for it to let go is neither span nor escaped work (this process's own work all ended at the sync above)
    first.synchronize()
    t0 = time.perf_counter()
    pending, out = [], None
    for i in range(n):
        t.between()
        s, e = t.events[2 * i], t.events[2 * i + 1]
        s.record(stream)
        for _ in range(t.calls):
            out = t.fn()
        e.record(stream)
        pending.append((s, e))
    issued = time.perf_counter() - t0
    caught_up = n > 1 and pending[-2][1].query()   # the GPU had run all but the last sample: it waited on the host
    on_host = keep and _on_host(out)
    if on_host:  # a caller reads a host output (a non_blocking copy back) once its stream has finished
        stream.synchronize()
    kept = _clone(out) if keep else None   # a GPU output: on the caller's stream
    torch.cuda.synchronize(device)
    wall = time.perf_counter() - t0
    span = first.elapsed_time(pending[-1][1]) * 1e-3
    t.host_rounds.append((issued / span if span > 0 else math.inf, caught_up))
    # A host copy made on the host lengthens this round's wall time (and work left on another stream may run
    # under it): such a round gives no wall-over-span ratio; the escape check reads the other rounds.
    ratio = None if on_host else (wall - ESCAPE_SLACK_S) / span if span > 0 else math.inf
    return [s.elapsed_time(e) * 1e-3 / t.calls for s, e in pending], ratio, kept


def _round_wall(t: Timed, device: torch.device, keep: bool) -> tuple[list[float], None, Any]:
    """One round timed on the host clock, with a device-wide sync around each sample on a GPU: nothing can
    escape it (the CPU's timer, and the re-timing of a variant whose work escaped the caller's stream). Returns
    what `_round_events` does, with no wall-over-span ratio."""
    times, out = [], None
    for _ in range(max(t.rnd, t.streak) if keep else t.rnd):
        t.between()
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(t.calls):
            out = t.fn()   # the previous output is freed here, inside the interval, as in a loop
        _sync(device)
        times.append((time.perf_counter() - t0) / t.calls)
    return times, None, (_clone(out) if keep else None)


def _add_round(t: Timed, times: list[float], ratio: float | None) -> None:
    if ratio is not None:
        t.wall_ratios.append(ratio)
    t.per_call.extend(times)
    t.round_s.append(statistics.median(times))


def paired_speedup(base_round_s: list[float], round_s: list[float]) -> tuple[float, tuple[float, float]] | None:
    """The speedup from rounds timed in turn: the median of the per-round ratios (the baseline's round median
    over the variant's) and that median's 95% interval."""
    ratios = sorted(b / v for b, v in zip(base_round_s, round_s) if b > 0 and v > 0)
    if len(ratios) < 3:
        return None
    return statistics.median(ratios), median_interval(ratios)


def round_level_ms(round_s: list[float]) -> list[float] | None:
    """[median, low, high] in ms: the median of these rounds' per-call medians and its 95% interval (None under
    three rounds). The baseline's level in one variant's rounds, set beside its level in the others' rounds."""
    if len(round_s) < 3:
        return None
    xs = sorted(round_s)
    return [1e3 * x for x in (statistics.median(xs), *median_interval(xs))]


def two_modes(per_call_s: list[float]) -> dict | None:
    """Two well separated levels in one variant's samples, or None. The samples' logarithms are split where the
    two groups' spread is smallest (Otsu's rule); two modes are said only where each group holds at least 10% of
    the samples, the upper level is at least 1.5x the lower, and the groups stand apart by more than three times
    their spread (Ashman's D > 3). A long tail of slow samples (a descheduled host) is one mode, not two."""
    xs = sorted(math.log(x) for x in per_call_s if x > 0)
    n = len(xs)
    if n < 20:
        return None
    prefix, sq = [0.0], [0.0]
    for x in xs:
        prefix.append(prefix[-1] + x)
        sq.append(sq[-1] + x * x)

    def var(i, j):  # population variance of xs[i:j]
        m = (prefix[j] - prefix[i]) / (j - i)
        return max(0.0, (sq[j] - sq[i]) / (j - i) - m * m)
    lo_k, hi_k = max(2, math.ceil(0.1 * n)), min(n - 2, math.floor(0.9 * n))
    if lo_k > hi_k:
        return None
    k = min(range(lo_k, hi_k + 1), key=lambda k: k * var(0, k) + (n - k) * var(k, n))
    low, high = statistics.median(xs[:k]), statistics.median(xs[k:])
    mean_l, mean_h = prefix[k] / k, (prefix[n] - prefix[k]) / (n - k)
    spread = math.sqrt(var(0, k) + var(k, n))
    d = math.sqrt(2) * (mean_h - mean_l) / spread if spread > 0 else math.inf
    if math.exp(high - low) < TWO_MODE_RATIO or d <= TWO_MODE_SEPARATION:
        return None
    return {"low_ms": math.exp(low) * 1e3, "high_ms": math.exp(high) * 1e3, "high_share": (n - k) / n}


def modes_of_its_own(variant: dict | None, baseline: dict | None) -> bool:
    """Does a variant have two levels (`two_modes`) that its baseline, timed in the same rounds, does not:
    the baseline has one level, or the variant's upper or lower level lies TWO_MODE_RATIO beyond the
    baseline's (a host that stalls everything gives both the same two levels)."""
    if not variant:
        return False
    if not baseline:
        return True
    return (variant["high_ms"] > TWO_MODE_RATIO * baseline["high_ms"]
            or variant["low_ms"] * TWO_MODE_RATIO < baseline["low_ms"])


def _settled(entries: list[Timed], elapsed: float, budget_s: float) -> bool:
    """Every entry's median known to 1%, and with several entries every paired speedup to 2%; or the
    budget spent (at least 3 rounds each, so every paired ratio has an interval)."""
    rounds = min(len(t.round_s) for t in entries)
    if rounds >= MAX_ROUNDS or any(len(t.per_call) >= MAX_SAMPLES for t in entries) or elapsed > budget_s:
        return rounds >= (3 if len(entries) > 1 else 1) and all(len(t.per_call) >= 3 for t in entries)
    if any(len(t.per_call) < MIN_SAMPLES or median_ci_rel(sorted(t.per_call)) > MEDIAN_CI_TARGET for t in entries):
        return False
    if len(entries) == 1:
        return True
    if rounds < MIN_ROUNDS or rounds % 2:  # whole ABBA cycles: each entry as often first as second in a round
        return False
    for t in entries[1:]:
        paired = paired_speedup(entries[0].round_s, t.round_s)
        if paired is None or (paired[1][1] - paired[1][0]) / paired[0] > RATIO_CI_TARGET:
            return False
    return True


def time_rounds(entries: list[Timed], device: torch.device, *, budget_s: float = BUDGET_S,
                agree: Callable[[float], float] = None, compute_bound: bool = False,
                check: Callable[[int, Timed, Any], None] | None = None,
                guard: Callable[[Callable[[], Any]], Any] | None = None) -> None:
    """Time every entry in interleaved rounds (ABBA: forwards on even rounds, backwards on odd ones) until each is
    known well enough; fills per_call, round_s, wall_ratios. `check(index, entry, kept)` is called after the check
    rounds (1st, 2nd, 4th, 8th, ...) with the round's last output; raising fails that entry. `guard(step)` runs
    each step (in several processes: every rank agrees on a failure); an entry whose step raises is dropped, its
    exception in `entry.error`.
    """
    agree, guard = agree or _alone, guard or (lambda step: step())
    device = torch.device(device)
    on_gpu = device.type == "cuda"
    timed_round = _round_events if on_gpu else _round_wall
    for i, t in enumerate(entries):   # the first entry's warm-up heats the chip for all
        min_s = COMPUTE_WARMUP_S if compute_bound and on_gpu and i == 0 else WARMUP_MIN_S
        warm_s = max(min_s, min(2.0, budget_s))
        try:
            with t.context():
                est, t.warmup_calls = guard(lambda: warm_up(t.fn, device, warm_s, agree, min_s))
                t.calls = _calls_per_sample(est, fed=t.between.feed is not None)
                guard(t.between)  # once before any round: the first feed or scrub can load a kernel
                _sync(device)
                fed_at = time.perf_counter()
                guard(t.between)  # a round is ~50 ms of work, feeds and scrubs included
                _sync(device)
                sample_s = est * t.calls + agree(time.perf_counter() - fed_at)
                t.rnd, t.streak = _round_size(sample_s), _streak(sample_s)
        except Exception as e:  # noqa: BLE001 - this entry fails alone
            t.error = e
    live = [t for t in entries if t.error is None]
    started, r = time.perf_counter(), 0
    while live:
        if agree(0.0 if _settled(live, time.perf_counter() - started, budget_s * len(entries)) else 1.0) == 0.0:
            break   # every process settled (`agree` takes the max over processes)
        keep = check is not None and (r & (r + 1)) == 0   # rounds 0, 1, 3, 7, 15, ...
        for t in (live if r % 2 == 0 else live[::-1]):
            try:
                with t.context():
                    times, ratio, kept = guard(lambda: timed_round(t, device, keep))
                    _add_round(t, times, ratio)
                    if keep:
                        guard(lambda: check(entries.index(t), t, kept))
            except Exception as e:  # noqa: BLE001 - this entry fails alone; the others go on
                t.error = e
        live = [t for t in live if t.error is None]
        r += 1


def _rounds_alone(t: Timed, device, budget_s: float, agree, events: bool) -> None:
    """One entry's rounds until its median is known (or the budget is spent): CUDA-event rounds with the
    wall-clock check, or host-clock rounds with a sync around each sample."""
    started = time.perf_counter()
    while not agree(0.0 if _settled([t], time.perf_counter() - started, budget_s) else 1.0) == 0.0:
        times, ratio, _ = (_round_events if events else _round_wall)(t, device, False)
        _add_round(t, times, ratio)


def wall_check(ratios: list[float]) -> dict:
    if not ratios:  # every round kept a host output (one slow call): no round to read
        return {"rounds": 0, "median_wall_over_event_span": None, "max_wall_over_event_span": None, "escaped": False}
    typical = statistics.median_low(ratios)  # of two rounds the lower: one slow round alone cannot fail a variant
    return {"rounds": len(ratios), "median_wall_over_event_span": typical,
            "max_wall_over_event_span": max(ratios), "escaped": typical > ESCAPE_RATIO}


def host_pace(t: Timed) -> dict | None:
    """Whether the GPU waited on the host between samples (README.md, "Timing"): in most rounds, all but the last
    sample done by the time the host had issued that one; also the median round's host issue time over its GPU
    span. In a multi-process pair, the reporting rank's own rounds. None for a sample of several calls (a loop of
    the call, paced by whichever of the two is slower) and for rounds of one sample (no earlier sample to have
    caught up)."""
    if t.calls > 1 or t.rnd < 2 or not t.host_rounds:
        return None
    ratios, caught_up = [r for r, _ in t.host_rounds], sum(c for _, c in t.host_rounds)
    return {"rounds": len(ratios), "caught_up_rounds": caught_up, "gpu_waited": 2 * caught_up > len(ratios),
            "median_host_over_span": statistics.median(ratios)}


def back_to_back_calls(call_s: float) -> int:
    """Three calls back to back, or two where a call takes over SLOW_ROUND_S."""
    return 2 if call_s > SLOW_ROUND_S else 3


def back_to_back(fn: Callable[[], Any], feed_b: Callable[[], Any], calls: int = 3) -> Any:
    """Seed B's values fed once, then `calls` calls back to back, as inside the timed loop: the caller
    verifies the last answer, so a variant cannot be right only when called from outside a timing loop
    (or only when called slowly)."""
    feed_b()
    for _ in range(calls):
        last = fn()
    return last


def gpu_state(device: torch.device) -> dict | None:
    """SM clock (MHz), power (W) and temperature (C) from NVML, or None where NVML is not installed: read right
    after timing, as sustained load lowers the clock (`warm_up`)."""
    try:
        import pynvml
        pynvml.nvmlInit()
        index = device.index if device.index is not None else torch.cuda.current_device()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        return {"sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                "temp_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)}
    except Exception:  # NVML not installed, or not usable here (container, MIG): no state, no failure
        return None


def _alone(x: float) -> float:
    return x


def max_over_ranks(x: float) -> float:
    """max() of a number over every rank of the default process group: `agree` for several processes, so that
    every rank takes the timer's decisions (and the number reported) together."""
    on = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([float(x)], dtype=torch.float64, device=on)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def finish(t: Timed, device: torch.device, *, budget_s: float = BUDGET_S, agree: Callable[[float], float] = _alone,
           flushed: bool = False, state: dict | None = None) -> Timing:
    """An entry's Timing once its rounds are done: on a GPU, the round check, and where work escaped the
    caller's stream, the entry timed again end to end (a device-wide sync around every sample)."""
    device = torch.device(device)
    if device.type != "cuda":
        timing = summarize(t.per_call, t.calls, "cpu_wall", False, t.warmup_calls)
    else:
        check = wall_check(t.wall_ratios)
        check["escaped"] = bool(agree(float(check["escaped"])))
        per_call = t.per_call
        if check["escaped"]:
            again = Timed(t.fn, t.between, calls=t.calls, rnd=1)
            _rounds_alone(again, device, budget_s, agree, events=False)
            per_call = again.per_call
        timer = "wall_sync" if check["escaped"] else "cuda_event"
        timing = summarize(per_call, t.calls, timer, flushed, t.warmup_calls)
        timing.wall_check, timing.gpu_state = check, state
        timing.host_pace = None if check["escaped"] else host_pace(t)   # of the event rounds, not the re-timing
    timing.fed_new_values = t.between.feed is not None
    timing.rounds = len(t.round_s)
    timing.round_ms = [x * 1e3 for x in t.round_s]
    timing.two_modes = two_modes(t.per_call)
    return timing


def time_together(calls: dict[str, Callable[[], Any]], device: torch.device, *, budget_s: float = BUDGET_S,
                  feed: Callable[[int], Any] | None = None, compute_bound: bool = False) -> dict[str, Timing]:
    """Each call's Timing, the calls timed in interleaved rounds (`time_rounds`) as a pair's variants are: for
    the chapter scripts that compare several ways of doing one thing. `feed(i)` writes new values into the
    inputs the calls share before every sample. Raises the first call's error, if one fails."""
    device = torch.device(device)
    entries = {name: Timed(fn, Between(feed, None)) for name, fn in calls.items()}
    time_rounds(list(entries.values()), device, budget_s=budget_s, compute_bound=compute_bound)
    for t in entries.values():
        if t.error is not None:
            raise t.error
    return {name: finish(t, device, budget_s=budget_s) for name, t in entries.items()}


def time_call(fn: Callable[[], Any], device: torch.device, *, flush_l2: bool | Callable[[], Any] = False,
              budget_s: float = BUDGET_S, agree: Callable[[float], float] = _alone,
              compute_bound: bool = False, feed: Callable[[int], Any] | None = None) -> Timing:
    """Median per-call time of `fn` on `device`. `feed(i)` writes the i-th new value set into the call's inputs
    before each sample. `flush_l2` is True (make a scrubber here) or a scrubber made by the caller (so its buffer
    is allocated outside a variant's memory measurement). `compute_bound` work on a GPU warms up for at least
    COMPUTE_WARMUP_S. `agree` reduces a number across processes (max); the default is a single process."""
    device = torch.device(device)
    flush = ((L2Scrubber(device) if flush_l2 is True else flush_l2) or None) if device.type == "cuda" else None
    if flush_l2 is True and flush is not None:   # made here: it leaves L2 as dirty as fn's output (L2Scrubber)
        flush.output_bytes(returned_bytes(fn()))
    t = Timed(fn, Between(feed, flush))
    time_rounds([t], device, budget_s=budget_s, agree=agree, compute_bound=compute_bound)
    if t.error is not None:
        raise t.error
    return finish(t, device, budget_s=budget_s, agree=agree, flushed=flush is not None,
                  state=gpu_state(device) if device.type == "cuda" else None)


def loop_ms(fn: Callable[[], Any], device: torch.device, calls: int = 1000, warmup: int = 20) -> float:
    """Milliseconds per call over `calls` back-to-back calls between two device syncs, on the host's clock. Not
    the harness's method (no events, no new values, no rounds): the rate a plain loop sees, for the scripts that
    show what a loop pays per call or check the harness against an independent timer."""
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    return _synced(fn, device, calls) * 1e3 / calls
