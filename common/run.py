"""Run one pair in this process: each variant verified, timed in turn with the baseline, verified again.

Called as `python -m common.run SPEC.json` (common.launch.RunSpec: what benchmark.py decided; through torchrun for
pairs with NPROC > 1), one process per pair, so a crash stays inside it.

`run_pair` prepares and verifies the baseline (its outputs become the references), then each variant in turn as a
`Trial`, on its own copy of the workload and in its numerics flags. The baseline stays prepared until the last
variant is done; its checks after timing run once, at the end. The steps of one variant (README.md, "How we
measure", says why each exists):
  a. its first call and a later call match the baseline's output;
  b. with its per-call inputs overwritten in place with seed B's values, the same callable returns B's answer;
  c. after every call: no input changed but the declared state, no numerics flag changed, the output is final;
  d. timed in rounds with the baseline (`time_with_baseline`, `in_loop_check`), verified again, and after calls
     back to back;
  e. the physics check (common.physics): faster than its workload's floor is SUSPECT, its speedup no result.
A failing variant fails alone; after each variant the result so far is written.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist

from common.cuda_ext import ExtensionUnavailable
from common.decode_check import compare_logits_margin
from common.discover import load_pair
from common.inputs import SEEDS, InputTampered, OwnInputs, References
from common.files import atomic_write_json
from common.launch import ROUNDS_OVER, TOOL_PROFILERS, RunSpec
from common.integrity import Snapshot
from common.numerics import FlagChanged, check_flags, numerics, wanted_flags
from common.overlap import placement, stage_times
from common.pair import COMPARES, Pair, Variant, check_workload, pair_record, variant_record
from common.physics import achieved, suspect_reason
from common.profiling.capture import count_launches, gpu_busy_ms, profile_calls
from common.results import speedup_interval
from common.timeline import draw_gantt
from common.timing import (BUDGET_S, Between, L2Scrubber, Timed, back_to_back, back_to_back_calls, cache_bytes, finish,
                           gpu_state, max_over_ranks, modes_of_its_own, paired_speedup, returned_bytes, round_level_ms,
                           time_rounds, two_modes)
from common.verify import (DTYPE_PRECISION, PRECISION_DTYPE, as_tensors, check_inputs_random, looser,
                           responds_to_inputs, snapshot_as_caller, verify_outputs)


# A speedup's interval is never narrower than this, by device: two copies of one code differ by up to a few tenths of
# a percent with a tight interval (separate buffers, separate allocations; the A/A pair, ch84). GPU: A/A copies on an
# H100 read 0.996-1.0035x, each with an interval of ±0.3-0.6% that once missed 1.0 by 0.2% (profiles/h100/aa/). CPU:
# on a loaded 2-core CI machine a copy read 1.0057x (1.0007-1.0107), and on the same kind of machine later one read
# 0.979x (0.960-0.9986) with the 2% floor: a CPU's copies differ by more (their buffers' placement in the caches), and
# its figures are not results.
RESOLUTION = {"cuda": 0.005, "cpu": 0.03}


def log(msg: str) -> None:
    if int(os.environ.get("RANK", "0")) == 0:
        print(msg, file=sys.stderr, flush=True)


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


# ----------------------------------------------------------------------------- one variant
class Failed(Exception):
    """A variant failed a check; the message says which and why."""


class PeakMemory:
    """The most GPU memory a variant held above what was allocated when it started, leaving out what the
    harness itself builds meanwhile (`exclude`)."""

    def __init__(self, device: torch.device):
        self.on = device.type == "cuda"
        self.device, self.peak, self.excluded = device, 0, 0
        if self.on:
            torch.cuda.synchronize(device)
            self.base = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)

    def exclude(self, build):
        if not self.on:
            return build()
        with self.apart():
            held = torch.cuda.memory_allocated(self.device)
            out = build()
            self.excluded += torch.cuda.memory_allocated(self.device) - held
        return out

    @contextlib.contextmanager
    def apart(self):
        """What the harness allocates and frees again inside the block is not the variant's memory."""
        if self.on:
            self.peak = max(self.peak, torch.cuda.max_memory_allocated(self.device) - self.excluded)
        try:
            yield
        finally:
            if self.on:
                torch.cuda.reset_peak_memory_stats(self.device)

    def mb(self) -> float:
        peak = max(self.peak, torch.cuda.max_memory_allocated(self.device) - self.excluded)
        return (peak - self.base) / 2**20


class Context:
    """What every variant of one pair shares: the device, the reference inputs and outputs, the ceilings."""

    def __init__(self, pair: Pair, device: torch.device, quick: bool, budget_s: float, peaks: dict | None,
                 profile: str | None, outdir: Path | None, untouched: Snapshot | None = None):
        self.pair, self.device, self.quick, self.budget_s = pair, device, quick, budget_s
        self.peaks, self.profile, self.outdir = peaks, profile, outdir
        self.agree = max_over_ranks if _distributed() else (lambda x: x)  # every rank takes the same decisions
        self.refs = References(pair, device, quick)
        self.scrubber = L2Scrubber(device) if pair.bound == "memory" and device.type == "cuda" else None
        self.cache = cache_bytes(device.type)
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.ref_a: list[torch.Tensor] | None = None      # the baseline's output on seed A
        self.ref_b: list[torch.Tensor] | None = None      # ...after its per-call inputs took seed B's values
        self.base_precision = self.refs.a.precision or "fp32"
        self.stages: dict | None = None
        self.compare = COMPARATORS[getattr(pair.baseline.module, "COMPARE", "outputs")]
        self.untouched = untouched or Snapshot()
        self.memory: PeakMemory | None = None


def allowed_dtypes(v: Variant) -> tuple:
    """The output dtype a variant may differ in from its baseline: the one its PRECISION declares."""
    return (PRECISION_DTYPE[v.precision],) if v.precision else ()


def variant_precision(ctx: Context, v: Variant) -> str:
    return looser(ctx.base_precision, v.precision) if v.precision else ctx.base_precision


def flags_precision(ctx: Context, v: Variant) -> str | None:
    """The numerics flags a variant runs in: TF32 on only where the variant (or the baseline's workload) asks."""
    return "tf32" if v.precision == "tf32" or (v.precision is None and ctx.refs.a.precision == "tf32") else None


def call(fn, own: OwnInputs, which: str, what: str, flags: dict, apart=contextlib.nullcontext) -> list[torch.Tensor]:
    """One verification call on seed `which`'s inputs, with every check that follows a call."""
    own.feed(which)
    out, late = snapshot_as_caller(fn(), apart)
    if late:
        raise Failed(f"{what}: {late}")
    check_flags(flags, what)
    modified = own.modified(which)
    if modified:
        raise Failed(f"{what}: modified input {modified[0]!r}, which the workload does not declare as state "
                     f"the call updates (Workload.updated)")
    return out


COMPARATORS = {"outputs": verify_outputs, "logits_margin": compare_logits_margin}
assert set(COMPARATORS) == set(COMPARES), "common.pair.COMPARES names what run.py can compare"


def check_outputs(ctx: Context, ref, out, precision: str, allowed, what: str):
    verdict = ctx.compare(ref, out, precision, allowed)
    if not verdict.ok:
        raise Failed(f"{what}: {verdict.message}")
    return verdict


def intact(ctx: Context, when: str) -> None:
    """Fail (and undo it) if the variant patched the harness, the clock or torch."""
    changed = ctx.untouched.changed()
    if changed:
        ctx.untouched.restore()
        raise Failed(f"{when}: changed {changed[0]}" + (f" and {len(changed) - 1} more" if len(changed) > 1 else "")
                     + ": a variant may not patch the harness, the clock or torch (restored)")


def checked(step):
    """Run one step on every rank and agree on its outcome. Whatever one rank raises (a failed check, a crash,
    running out of memory), every rank stops: the one that raised re-raises its own exception, the others a Failed
    naming it. A rank that went on alone would pair its collectives with another variant's on the other ranks."""
    try:
        value, err, raised = step(), None, None
    except Exception as e:  # noqa: BLE001 - shared with every rank, then raised again
        value, err, raised = None, (str(e) if isinstance(e, (Failed, FlagChanged, InputTampered))
                                    else f"{type(e).__name__}: {e}"), e
    if _distributed():  # the first rank's complaint, seen by every rank
        errs: list = [None] * dist.get_world_size()
        dist.all_gather_object(errs, err)
        err = next((f"rank {r}: {e}" if len(errs) > 1 else e for r, e in enumerate(errs) if e), None)
    if err:
        if raised is not None and not _distributed():
            raise raised
        raise Failed(err) if raised is None or isinstance(raised, (Failed, FlagChanged, InputTampered)) else raised
    return value


def verify_calls(ctx: Context, v: Variant, fn, own: OwnInputs, flags: dict, precision: str) -> dict:
    """Steps a-c for a variant (the baseline sets the references instead of comparing with them)."""
    is_base = v.name == "baseline"
    allowed = allowed_dtypes(v)
    started = time.perf_counter()
    first = checked(lambda: call(fn, own, "a", "first call", flags, ctx.memory.apart))
    first_call_s = time.perf_counter() - started  # a lazily compiled variant compiles here
    if is_base:
        ctx.ref_a = first
        if ctx.scrubber is not None:   # L2 left as dirty as a loop of this call leaves it (L2Scrubber)
            ctx.scrubber.output_bytes(returned_bytes(first))
        ctx.base_precision = ctx.refs.a.precision or DTYPE_PRECISION.get(first[0].dtype, "fp32")
        precision = ctx.base_precision
    verdicts = [checked(lambda: check_outputs(ctx, ctx.ref_a, first, precision, allowed, "first call"))]
    verdicts.append(checked(lambda: check_outputs(ctx, ctx.ref_a,
                                                  call(fn, own, "a", "a later call", flags, ctx.memory.apart),
                                                  precision, allowed, "a later call")))
    ctx.memory.exclude(lambda: ctx.refs.fresh)  # built once, after the baseline's prepare(): not the variant's memory
    fresh = checked(lambda: call(fn, own, "b", "new per-call inputs", flags, ctx.memory.apart))
    if is_base:
        def responds():
            if not responds_to_inputs(first, fresh):
                raise Failed("its output is identical when its per-call inputs take another seed's values: "
                             "it ignores its inputs")
        checked(responds)
        ctx.ref_b = fresh
    else:
        def follows():
            verdict = ctx.compare(ctx.ref_b, fresh, precision, allowed)
            if not verdict.ok:
                stale = ctx.compare(ctx.ref_a, fresh, precision, allowed).ok
                raise Failed("returns a result computed before the call: after its per-call inputs were "
                             "overwritten in place with new values it returned the old answer" if stale else
                             f"with new per-call inputs: {verdict.message}")
            return verdict
        verdicts.append(checked(follows))
    own.feed("a")
    out = max(verdicts, key=lambda d: -1 if math.isnan(d.rel_err) else d.rel_err).as_dict()
    out["max_err"] = max(d.max_err for d in verdicts)
    out["checks"] = ["first call", "a later call", "new per-call inputs"]
    out["first_call_s"] = first_call_s
    return out


class Trial:
    """One variant's way through the pair: each step a method, in the order the steps run. Its state (the prepared
    callable, its own copy of the workload) is kept from prepare() until its last step."""

    def __init__(self, ctx: Context, v: Variant):
        self.ctx, self.v, self.is_base = ctx, v, v.name == "baseline"
        self.entry = variant_record(v.name, v.path.name, summary=v.summary, kind="baseline" if self.is_base else v.kind)
        self.flags = wanted_flags(flags_precision(ctx, v))
        self.stage, self.fn, self.own, self.t = "prepare", None, None, None
        self.precision = variant_precision(ctx, v)
        self.alive = True
        self.timed: Timed | None = None   # the baseline's, kept across the variants it is timed beside

    def cannot_run(self) -> bool:
        why = self.v.cannot_run(self.ctx.device.type)
        if why:
            self.entry["skipped"] = why
            self.alive = False
        return why is not None

    def run(self, *steps) -> bool:
        """Run `steps` (methods of this trial) in the variant's numerics flags; a failure, a crash or running
        out of memory fails this variant alone and drops its state. Returns whether it is still alive."""
        if not self.alive:
            return False
        try:
            if self.own is None:
                self.ctx.memory = PeakMemory(self.ctx.device)
                self.own = checked(self.ctx.refs.own_copy)
            with numerics(flags_precision(self.ctx, self.v)):
                for step in steps:
                    self.stage = step.__name__.replace("_", " ")
                    started = time.perf_counter()
                    try:
                        step()
                    finally:  # where a pair's wall time goes, step by step (benchmark.py prints the sums)
                        spent = self.entry.setdefault("steps_s", {})
                        spent[self.stage] = round(spent.get(self.stage, 0.0) + time.perf_counter() - started, 3)
        except ExtensionUnavailable as e:  # a kernel this GPU cannot run (TMA before sm_90): not a failure
            self.entry.update(skipped=str(e), verified=False)
            log(f"  {self.v.name}: skipped: {e}")
            self.close()
        except Exception as e:  # a failed check, a crash or running out of memory fails this variant alone
            self.failed(e)
            self.close()
        return self.alive

    def close(self):
        """Drop the variant's state (before the next variant is built, or once its last step ran)."""
        self.fn = self.own = None
        self.alive = False
        self.ctx.untouched.restore()
        gc.collect()
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)
            torch.cuda.empty_cache()

    def prepare(self):
        log(f"  {self.v.name}: verifying")
        started = time.perf_counter()
        self.fn = checked(lambda: self.v.prepare(self.own.w))
        self.entry["prepare_s"] = time.perf_counter() - started  # compiling, capturing, autotuning: not steady state
        checked(lambda: check_flags(self.flags, "prepare()"))
        checked(lambda: intact(self.ctx, "prepare()"))

    def verify(self):
        """Steps a-c; the baseline's outputs become the references."""
        ctx = self.ctx
        precision = variant_precision(ctx, self.v)  # read again below: the baseline's verification fixes base_precision
        self.entry["verification"] = verify_calls(ctx, self.v, self.fn, self.own, self.flags, precision)
        checked(lambda: intact(ctx, "while verified"))
        if self.is_base:
            checked(lambda: check_reference(ctx))
            ctx.stages = stage_times(ctx.pair, self.own.w, ctx.device, ctx.agree)
        self.precision = variant_precision(ctx, self.v)
        if ctx.device.type == "cuda":  # its own memory: its prepare() and three calls, before others are built
            self.entry["peak_memory_mb"] = ctx.memory.mb()

    def verify_after_timing(self):
        checked(lambda: after_timing(self.ctx, self.v, self.fn, self.own, self.flags, self.precision, self.t))

    def back_to_back(self):
        """Three calls back to back on seed B's values (two, for a call of over a second), nothing between
        them, the last answer checked. The timed rounds feed new values between calls, so a variant wrong
        only when called with no gap passes them (tests/fixtures/ch80's o_gap); a real loop calls it so."""
        calls = back_to_back_calls(self.ctx.agree(self.t.median_ms / 1e3))   # every rank makes as many calls
        in_loop = checked(lambda: back_to_back(self.fn, lambda: self.own.feed("b"), calls))
        checked(lambda: in_loop_answer(self.ctx, self.v, in_loop, self.own, self.flags, self.precision))
        self.own.feed("a")
        checked(lambda: intact(self.ctx, "after timing"))

    def profile(self):
        self.entry.update(profile_variant(self.fn, self.v, self.ctx))
        pace, ctx = self.entry.get("host_pace"), self.ctx
        if pace and pace["gpu_waited"] and ctx.pair.bound in ("memory", "compute") and ctx.world_size == 1 \
                and ctx.profile not in TOOL_PROFILERS:
            # The GPU's own time per call, fed and scrubbed as in the rounds. One process only: the ranks of a pair
            # with collectives may disagree on whether their GPU waited, and one calling alone would hang. Not
            # under nsys or ncu, which hold the profiling interface. Three calls of over 10 ms, whose many kernels
            # make the profiler slow (grad_accumulation's micro64: 21 s for five calls of 134 ms on an H200).
            calls = 3 if self.t.median_ms > 10 else 5
            pace["gpu_busy_ms"] = gpu_busy_ms(self.fn, timed_entry(ctx, self).between, calls)

    def rate_so_far(self):
        """The baseline's figures from its rounds so far, written before the next variant runs."""
        self.rate(say=False)

    def own_work(self, w):
        """The workload with this variant's own `bytes_moved(w)` where it declares them, within the bounds the
        contract gives (common.pair): fewer declared bytes lower the physics floor, so the precision must earn them."""
        own = None if self.is_base else getattr(self.v.module, "bytes_moved", None)
        if not own:
            return w
        declared = float(own(w))
        width = lambda p: torch.finfo(PRECISION_DTYPE.get(p, torch.float32)).bits  # noqa: E731 (tf32: 32)
        ratio = min(1.0, width(self.precision) / width(self.ctx.base_precision))
        if not ratio * w.bytes_moved <= declared <= w.bytes_moved:
            self.entry["bytes_note"] = (f"bytes_moved ignored: {declared / 1e6:.4g} MB is outside "
                                        f"{ratio * w.bytes_moved / 1e6:.4g}-{w.bytes_moved / 1e6:.4g} MB (the "
                                        f"workload's bytes at {self.precision} against {self.ctx.base_precision}, "
                                        f"up to the workload's)")
            print(f"  {self.v.name}: {self.entry['bytes_note']}")
            return w
        return dataclasses.replace(w, bytes_moved=declared)

    def rate(self, say: bool = True):
        """Step e: rates, the share of the ceiling that applies, and the physics check."""
        ctx, t, entry = self.ctx, self.t, self.entry
        bound = ctx.pair.bound
        work = self.own_work(ctx.refs.a)
        entry.update(verified=True, **achieved(work, t.median_ms, bound, self.precision, ctx.peaks,
                                              ctx.cache, ctx.world_size))
        note = entry.get("bytes_note")
        if work is not ctx.refs.a:
            entry["bytes_moved"] = work.bytes_moved
            note = (f"rated on the {work.bytes_moved / 1e6:.4g} MB this variant moves by design (its bytes_moved), "
                    f"not the workload's {ctx.refs.a.bytes_moved / 1e6:.4g} MB")
        if note:
            entry["ceiling_note"] = "; ".join(filter(None, [entry.get("ceiling_note"), note]))
        entry["suspect"] = suspect_reason(t.median_ms, work, bound, ctx.peaks, self.precision, self.is_base,
                                          ctx.cache, flop_floor=ctx.device.type == "cuda")
        if ctx.stages:
            entry["overlap_pct_of_ideal"], entry["overlap_note"] = placement(t.median_ms, ctx.stages)
        if say:
            suspect = f"  SUSPECT: {entry['suspect']}" if entry["suspect"] else ""
            log(f"  {self.v.name:40s} {t.median_ms:10.4f} ms  (p10 {t.p10_ms:.4f}, p90 {t.p90_ms:.4f}, "
                f"n={t.samples}x{t.calls_per_sample}, {t.timer}){suspect}")

    def failed(self, e: Exception):
        if isinstance(e, (Failed, InputTampered, FlagChanged)):
            error = said = str(e)
        elif isinstance(e, torch.cuda.OutOfMemoryError):
            error, said = f"out of memory: {str(e).splitlines()[0]}", "out of memory"
        else:
            error = said = f"{type(e).__name__}: {e}"
        self.entry.update(error=error, failed_at=self.stage, verified=False)
        log(f"  {self.v.name}: FAILED ({self.stage}): {said}")


def after_timing(ctx: Context, v: Variant, fn, own: OwnInputs, flags: dict, precision: str, t) -> None:
    """Step d's second half: nothing escaped or changed while timed, and the answer is still right."""
    if t.wall_check and t.wall_check.get("escaped"):
        raise Failed(f"work escaped the caller's stream: the median round of samples took "
                     f"{t.wall_check['median_wall_over_event_span']:.2f}x longer on the host's clock than its "
                     f"events span (timed again end to end: {t.median_ms:.4g} ms)")
    check_flags(flags, "while timed")
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
    modified = own.modified()  # against the value set fed last
    if modified:
        raise Failed(f"while timed: modified input {modified[0]!r}")
    last = call(fn, own, "a", "after timing", flags)
    check_outputs(ctx, ctx.ref_a, last, precision, allowed_dtypes(v), "after timing")


def in_loop_answer(ctx: Context, v: Variant, out, own: OwnInputs, flags: dict, precision: str) -> None:
    """The answer a call gave inside a timing loop, fed seed B's values, is seed B's answer."""
    seen, late = snapshot_as_caller(out)
    if late:
        raise Failed(f"inside a timing loop: {late}")
    modified = own.modified("b")
    if modified:
        raise Failed(f"inside a timing loop: modified input {modified[0]!r}")
    check_flags(flags, "inside a timing loop")
    verdict = ctx.compare(ctx.ref_b, seen, precision, allowed_dtypes(v))
    if not verdict.ok:
        raise Failed(f"a call inside a timing loop, back to back with others, returned a wrong answer: "
                     f"{verdict.message}")


def profile_variant(fn, v: Variant, ctx: Context) -> dict:
    """Kernels per call (GPU), and the requested profile or the overlap timeline."""
    out = {}
    # Kernel and launch counts are a launch-bound pair's story; elsewhere they cost a profiler start
    # (4-6 s a pair on an H100) for a figure nobody reads, so they come only with --profile. Not under nsys or
    # ncu, which hold the profiling interface: torch.profiler sees no GPU work there, and its counts read 0.
    if ctx.device.type == "cuda" and (ctx.pair.bound == "launch" or ctx.profile) and ctx.profile not in TOOL_PROFILERS:
        out.update(count_launches(fn) or {})
    label = f"{ctx.pair.key}/{v.name}" + (f".rank{os.environ.get('RANK', '0')}" if ctx.world_size > 1 else "")
    # Overlap pairs always get a timeline next to the report: a trace and its Gantt chart.
    mode = ctx.profile or ("torch" if ctx.stages and ctx.outdir and ctx.device.type == "cuda" else None)
    trace = profile_calls(fn, label, mode, ctx.outdir, calls=2 if ctx.stages else 5, cuda=ctx.device.type == "cuda")
    if trace:
        out["trace"] = Path(trace).name
        if ctx.stages:
            png = Path(trace).with_name(Path(trace).name.replace(".trace.json", ".timeline.png"))
            if draw_gantt(Path(trace), png, f"{label} (2 calls shown)"):
                out["timeline"] = png.name
    return out


def check_reference(ctx: Context) -> None:
    """For several processes: the baseline's output on this rank against the single-process reference."""
    reference = getattr(ctx.pair.baseline.module, "reference", None)
    if reference is None or not _distributed():
        return
    expected = [t.to("cpu") for t in as_tensors(reference(seed=SEEDS[0], rank=dist.get_rank(),
                                                          world_size=dist.get_world_size(), quick=ctx.quick))]
    verdict = verify_outputs(expected, ctx.ref_a, ctx.base_precision)
    if not verdict.ok:
        raise Failed(f"the baseline disagrees with the single-process reference: {verdict.message}")


# ----------------------------------------------------------------------------- timed beside the baseline
def timed_entry(ctx: Context, trial: "Trial") -> Timed:
    """A verified variant's callable as the timed rounds run it: fed new values (the i-th value set never fed
    before, written outside the timing), scrubbed, in its flags."""
    own = trial.own
    host_inputs = ctx.device.type == "cuda" and any(not own.w.inputs[k].is_cuda for k in own.refs.per_call)

    def feed(i: int) -> None:
        if host_inputs:  # the previous call's copies may still be reading the host buffers
            torch.cuda.current_stream().synchronize()
        own.feed_new(i)
    return Timed(trial.fn, Between(feed, ctx.scrubber), context=lambda: numerics(flags_precision(ctx, trial.v)))


def time_with_baseline(ctx: Context, base: "Trial", t: "Trial | None") -> None:
    """Step d: the baseline and one variant timed in interleaved rounds (common.timing.time_rounds), the answers
    inside them checked (`in_loop_check`). The baseline's samples pool over every variant it is timed beside."""
    log(f"  {t.v.name if t else 'baseline'}: timing" + (" (in turn with the baseline)" if t else ""))
    trials = [base] + ([t] if t else [])
    entries = [base.timed] + ([timed_entry(ctx, t)] if t else [])
    first_round, first_sample = len(base.timed.round_s), len(base.timed.per_call)
    guard = lambda step: checked(lambda: (step(), intact(ctx, "while timed"))[0])  # noqa: E731
    started = time.perf_counter()
    time_rounds(entries, ctx.device, budget_s=ctx.budget_s, agree=ctx.agree,
                compute_bound=ctx.pair.bound == "compute" and not ctx.quick,
                check=in_loop_check(ctx, base, trials), guard=guard)
    state = gpu_state(ctx.device) if ctx.device.type == "cuda" else None
    (t or base).entry["timed_s"] = time.perf_counter() - started   # warm-ups and rounds, both sides
    for trial, e in zip(trials, entries):
        if e.error is not None:
            trial.stage = "time"
            trial.failed(e.error)
            trial.close()
            continue
        trial.t = finish(e, ctx.device, budget_s=ctx.budget_s, agree=ctx.agree, flushed=ctx.scrubber is not None,
                         state=state)
        trial.entry.update(precision=trial.precision, **trial.t.as_dict())
        # True only where no value set repeated: integer-only inputs (token ids) and small float tensors
        # (a rotation repeats after numel samples) are fed, but not with values never seen.
        trial.entry["fed_new_values"] = trial.t.fed_new_values and trial.own.new_every_sample(trial.t.samples)
    if t is not None and t.t is not None and base.alive:
        t.entry["paired"] = paired_speedup(base.timed.round_s[first_round:], entries[1].round_s)
        t.entry["baseline_in_rounds_ms"] = round_level_ms(base.timed.round_s[first_round:])   # report.baseline_moved
        # against the baseline's samples of the same rounds (beside other variants it was timed in other conditions)
        t.entry["baseline_two_modes"] = two_modes(base.timed.per_call[first_sample:])
        t.entry["two_modes_flag"] = modes_of_its_own(t.t.two_modes, t.entry["baseline_two_modes"])
    if base.alive and base.t is not None:
        base.run(base.rate_so_far)  # the baseline's figures so far (a variant that hangs later loses none of them)


def in_loop_check(ctx: Context, base: "Trial", trials: list["Trial"]):
    """A round's last call inside the timed loop (the most calls back to back before it) against the baseline fed
    the same values and called alone: it catches an answer that differs at speed (a lower precision after N calls
    in a row, a cache warmed by a streak). Not where the call updates declared state (a KV cache): each variant's
    state has moved on in its own way."""
    def check(index: int, entry: Timed, kept) -> None:
        trial = trials[index]
        if ctx.refs.a.updated:
            trial.entry["in_loop_checks"] = "not applicable: the call updates declared state"
            return
        fed = entry.between.fed
        base.own.feed_new(fed)
        with numerics(flags_precision(ctx, base.v)):
            out = as_tensors(base.fn())
        if ctx.device.type == "cuda":  # read as its caller would: a host output is final once the stream is done
            torch.cuda.current_stream().synchronize()
        expected = [x.detach().clone() for x in out]
        verdict = ctx.compare(expected, as_tensors(kept), trial.precision, allowed_dtypes(trial.v))
        trial.entry["in_loop_checks"] = trial.entry.get("in_loop_checks", 0) + 1
        if not verdict.ok:
            raise Failed(f"inside the timing loop, at its pace: the answer of its call on value set {fed} (the last "
                         f"of {max(entry.rnd, entry.streak)} samples back to back in round {len(entry.round_s)}) "
                         f"differs from the baseline's on the same values: {verdict.message}")
    return check


def paired_result(base: "Trial", t: "Trial") -> None:
    """A verified variant's speedup and its interval, from the rounds timed in turn with the baseline."""
    e = t.entry
    if not e.get("verified") or e.get("error"):
        return
    paired = e.pop("paired", None)
    if paired:
        low, high = paired[1]
        floor = RESOLUTION.get(base.ctx.device.type, RESOLUTION["cpu"])  # two copies of one code differ this much
        e["speedup"] = paired[0]
        e["speedup_ci"] = [min(low, paired[0] / (1 + floor)), max(high, paired[0] * (1 + floor))]
        e["speedup_of_medians"] = base.entry["median_ms"] / e["median_ms"]
    else:  # fewer than three rounds (a budget spent by one slow call): the ratio of the medians
        e["speedup"] = base.entry["median_ms"] / e["median_ms"]
        interval = speedup_interval(base.entry, e)
        e["speedup_ci"] = list(interval) if interval else None


def base_failed(result: dict, base: "Trial", rest: list[Variant]) -> dict:
    """The pair fails with its baseline: the variants not reached are listed as not run, none has a speedup."""
    fail(result, f"baseline failed ({base.entry.get('failed_at')}): {base.entry['error']}")
    result["variants"] += [variant_record(v.name, v.path.name, summary=v.summary, kind=v.kind,
                                          skipped="not run: the baseline failed") for v in rest]
    for e in result["variants"]:
        e["speedup"] = e["speedup_ci"] = None
    return result


# ----------------------------------------------------------------------------- the pair
def run_pair(pair: Pair, device: torch.device, quick: bool = False, budget_s: float = BUDGET_S,
             peaks: dict | None = None, profile: str | None = None, outdir: Path | None = None,
             progress: Callable[[dict, dict | None], None] = lambda result, doing: None,
             untouched: Snapshot | None = None) -> dict:
    """Verify and time the baseline and every variant; `progress(result, doing)` after each step."""
    device = torch.device(device)
    result = pair_record(pair.chapter, pair.name, pair.bound, device_type=device.type, **pair.point_fields)
    why = pair.cannot_run(device.type)
    if why:
        result.update(status="skipped", error=why)
        return result
    if _distributed():
        result.update(world_size=dist.get_world_size(), backend=dist.get_backend())
    progress(result, {"variant": "baseline", "stage": "workload"})
    ctx = reference_context(pair, device, quick, budget_s, peaks, profile, outdir, untouched, result)
    progress(result, {"variant": "baseline", "stage": "verify"})
    base = Trial(ctx, pair.baseline)
    result["baseline"] = base.entry
    if not base.cannot_run():
        base.run(base.prepare, base.verify)
    result["workload"]["seeds"] = [SEEDS[0], ctx.refs.seed_b]
    if ctx.stages:
        result["stages"] = ctx.stages
    if base.entry.get("skipped"):  # the baseline cannot run here (a package, a kernel this GPU lacks): nothing can
        result.update(status="skipped", error=base.entry["skipped"])
        return result
    if not base.alive:
        return base_failed(result, base, pair.variants)
    base.timed = timed_entry(ctx, base)
    for i, v in enumerate(pair.variants):
        progress(result, {"variant": v.name, "stage": "verify and time"})
        t = Trial(ctx, v)
        if not t.cannot_run() and t.run(t.prepare, t.verify):
            time_with_baseline(ctx, base, t)
            if i == len(pair.variants) - 1:  # benchmark.py may start the next pair's process now
                progress(result, {"variant": v.name, "stage": ROUNDS_OVER})
            t.run(t.verify_after_timing, t.back_to_back, t.profile, t.rate)
            t.close()
        if not base.alive:  # its in-loop answer failed, or it crashed, while timed beside this variant
            return base_failed(result, base, pair.variants[i + 1:])
        paired_result(base, t)
        if t.entry.get("error"):
            fail(result, f"{v.name} failed ({t.entry.get('failed_at')}): {t.entry['error']}")
        result["variants"].append(t.entry)
    return finish_baseline(ctx, base, result, progress)


def fail(result: dict, reason: str) -> None:
    """The pair fails: its error names the first reason, errors lists them all."""
    result["status"] = "failed"
    result["error"] = result["error"] or reason
    result["errors"].append(reason)


def reference_context(pair: Pair, device: torch.device, quick: bool, budget_s: float, peaks: dict | None,
                      profile: str | None, outdir: Path | None, untouched: Snapshot | None, result: dict) -> Context:
    """The pair's Context (its reference workload built and checked), with the workload in the result."""
    changed = untouched.changed() if untouched is not None else []
    if changed:  # before anything ran: a pair file did it when imported
        untouched.restore()
        raise RuntimeError(f"a pair file changed {changed[0]} when it was imported: a pair may not patch the "
                           f"harness, the clock or torch")
    started = time.perf_counter()
    ctx = Context(pair, device, quick, budget_s, peaks, profile, outdir, untouched)
    result["setup_s"] = round(time.perf_counter() - started, 3)  # the reference workload built, the scrubber
    complaint = check_inputs_random(ctx.refs.a.inputs)
    if complaint:
        raise ValueError(f"{pair.key}: {complaint}")
    check_workload(pair, ctx.refs.a)
    w = ctx.refs.a
    result["workload"] = {"flops": w.flops, "bytes_moved": w.bytes_moved, "items": w.items, "item_name": w.item_name,
                          "launches": w.launches, "note": w.note, "once": list(w.once), "updated": list(w.updated),
                          "per_call": ctx.refs.per_call, "duplex": w.duplex, "collective": w.collective,
                          "message_bytes": w.message_bytes}
    return ctx


def finish_baseline(ctx: Context, base: "Trial", result: dict, progress) -> dict:
    """The baseline's own steps after the variants (timed alone where none was timed beside it), then what its
    outcome means for the variants' speedups."""
    if not base.timed.round_s:  # no variant reached the timed rounds: the baseline is timed alone
        progress(result, {"variant": "baseline", "stage": "time"})
        time_with_baseline(ctx, base, None)
    progress(result, {"variant": "baseline", "stage": "verify after timing"})
    if base.alive:
        base.run(base.verify_after_timing, base.back_to_back, base.profile, base.rate)
        base.close()
    base.entry.update(speedup=1.0 if base.entry["verified"] else None)
    if not base.entry["verified"]:  # its checks after timing failed: no variant has a speedup
        base_failed(result, base, [])
    for e in result["variants"]:
        if base.entry.get("suspect") and e.get("verified"):
            e["suspect"] = e["suspect"] or "the baseline's time is suspect"
        if e.get("suspect"):
            e["speedup"] = e["speedup_ci"] = None
    result["suspect"] = [e["name"] for e in [base.entry] + result["variants"] if e.get("suspect")]
    return result


def main(spec_path: str) -> int:
    """Run the pair a RunSpec file describes (common.launch writes it) and write its result as it goes."""
    spec = RunSpec(**json.loads(Path(spec_path).read_text()))
    rank0 = int(os.environ.get("RANK", "0")) == 0

    def progress(result: dict, doing: dict | None) -> None:
        """Write the result so far: a variant that hangs or crashes the process loses no one else's result."""
        if rank0:
            atomic_write_json(Path(spec.result), {**result, "in_progress": doing})

    device = torch.device(spec.device)
    if spec.nproc > 1:  # torchrun's workers: one GPU each (benchmark.py checked there are enough)
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    untouched = Snapshot()  # before any pair file is imported
    pair = load_pair(spec.chapter, spec.pair, Path(spec.baseline), [Path(p) for p in spec.optimized])
    pair = pair.at(spec.point) if spec.point else pair
    stub = pair_record(pair.chapter, pair.name, pair.bound)
    progress(stub, {"variant": None, "stage": "starting"})
    try:
        result = run_pair(pair, device, spec.quick, spec.budget_s, spec.peaks, spec.profile, spec.outdir, progress,
                          untouched)
    except Exception as e:  # the pair as a whole cannot run (a bad workload, a contract error): say why
        traceback.print_exc()
        reason = f"out of memory: {str(e).splitlines()[0]}" if isinstance(e, torch.cuda.OutOfMemoryError) \
            else f"{type(e).__name__}: {e}"
        result = {**stub, "status": "failed", "error": reason, "errors": [reason]}
    progress(result, None)
    if spec.nproc > 1:  # first free the variants (cycles hold them): destroying a group while a CUDA graph that
        gc.collect()    # captured its NCCL calls lives hangs (2 x H200, tp_decode; pytorch/pytorch#115388)
        dist.destroy_process_group()
    return 0 if result["status"] != "failed" else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--spare"]:  # started ahead (common.launch.Spare): torch is imported; wait for a pair
        import torch.profiler  # noqa: F401 - a launch-bound pair's kernel counts need it; no GPU is touched here
        line = sys.stdin.readline()
        if not line.strip():
            sys.exit(0)
        args = json.loads(line)
    if len(args) != 1 or not Path(args[0]).is_file():
        sys.exit("internal: python -m common.run SPEC.json (benchmark.py writes SPEC; see common.launch.RunSpec)")
    try:
        sys.exit(main(args[0]))
    except torch.cuda.OutOfMemoryError as e:
        print(f"out of memory: {str(e).splitlines()[0]}", file=sys.stderr)
        sys.exit(3)
    except Exception:
        traceback.print_exc()
        sys.exit(1)
