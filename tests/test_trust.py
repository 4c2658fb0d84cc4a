"""The harness catches each class of fault that makes a timed result untrustworthy. The same fixtures and assertions
run on the CPU and, where a GPU is present, on it too (a GPU's timer, input feed, streams and ceilings are other code).

Fixtures: tests/fixtures/ch80 (one variant per fault, correct variants sorted after the offenders),
ch81 (a workload whose claimed bytes no call can move that fast), ch89 (variants that tamper with the
process: the clock, the harness, torch, threads, autocast; a pair each), ch92 (work left on a side
stream, GPU). Many of these were written by an adversarial review of the harness.
"""
import json

import pytest
import torch

from common.inputs import References
from common.numerics import FlagChanged, numerics, read_flags, wanted_flags
from common.pair import Workload
from common.physics import suspect_reason
from common.verify import verify_outputs
from conftest import FIXTURES

pytestmark = pytest.mark.serial   # speedups and SUSPECT verdicts of timed fixtures: run alone (make test)


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(scope="module", params=DEVICES)
def trust_run(request, tmp_path_factory):
    """The fixtures run once per device, a report each; each test below runs once per device."""
    from conftest import bench
    out = tmp_path_factory.mktemp(f"trust-{request.param}")
    proc = bench("--root", str(FIXTURES), "--chapter", "80", "--chapter", "81", "--chapter", "89", "--quick",
                 "--device", request.param, "--output", str(out))
    doc = json.loads((out / "results.json").read_text())
    assert doc["device"]["type"] == request.param, doc["device"]
    pairs = {p["name"]: p for p in doc["pairs"]}
    return proc, pairs, (out / "summary.md").read_text(), request.param


def variants(pair):
    return {v["name"].replace("optimized_trust_", "").replace("optimized_", ""): v for v in pair["variants"]}


FAILS = {  # variant: what the report must say
    "a_inplace": "modified input 'x'",
    "c_precomputed": "computed before the call",
    "d_version_cache": "computed before the call",
    "f_tf32": "allow_tf32",
    "h_wrong_tile": "max element",
    "k_gc_refs": "KeyError",                  # a table of answers read out of the harness's memory
    "l_seed_table": "KeyError",               # a table of answers for the seeds it expects
    "m_call_count": "timing loop",           # honest for the first calls only
    "n_stack": "timing loop",                # wrong when called from the timing code
    "o_gap": "timing loop",                  # wrong when called back to back
    "p_lazy": "plain tensors",                # a tensor subclass that computes only when read
    "q_feed_notify": "replaced input 'x'",    # an input whose class notices the harness's writes
    "s_bf16_undeclared": "fp32 tolerance",
}
# Caches of earlier answers: right on every input, and timed on values they have never seen, so they
# gain nothing.
REUSE = ("e_memo", "j_sampled_lru2", "r_sampled_lru1")


def test_each_fault_class_fails_or_is_suspect(trust_run):
    proc, pairs, _, _ = trust_run
    assert proc.returncode == 1, proc.stderr[-2000:]
    v = variants(pairs["trust"])
    for name, words in FAILS.items():
        assert v[name]["verified"] is False and v[name]["speedup"] is None, (name, v[name])
        assert words in v[name]["error"], (name, v[name]["error"])
    # A cache hit costs microseconds; the work, about as long as the fastest correct samples (p10: a busy
    # CPU inflates medians, never the best case). A variant timed on hits would be ~100x under this bound.
    work_ms = min(pairs["trust"]["baseline"]["p10_ms"], v["b_correct"]["p10_ms"])
    for name in REUSE:
        assert v[name]["verified"] and v[name]["median_ms"] > 0.25 * work_ms, (name, v[name]["median_ms"], work_ms)


def test_tampering_with_the_process_fails_and_is_undone(trust_run):
    _, pairs, _, _ = trust_run
    assert "time.perf_counter" in pairs["clock"]["variants"][0]["error"]
    assert "common.verify.verify_outputs" in pairs["verify"]["variants"][0]["error"]
    assert pairs["sabotage"]["status"] == "failed" and "torch.Tensor.__matmul__" in pairs["sabotage"]["error"]
    leak = {x["name"]: x for x in pairs["leak"]["variants"]}
    assert "autocast" in leak["optimized_leak_a_autocast"]["error"]
    assert leak["optimized_leak_b_honest_after"]["verified"]       # autocast was switched back off for it
    # the import-time set_num_threads(1) did not reach the baseline: its call refuses to run on fewer
    # threads than the process started with (tests/fixtures/ch89/baseline_threads.py)
    threads = pairs["threads"]
    assert threads["baseline"]["verified"] and threads["variants"][0]["verified"], threads


def test_a_correct_variant_after_a_mutating_one_still_verifies(trust_run):
    _, pairs, _, _ = trust_run
    v = variants(pairs["trust"])
    for name in ("b_correct", "g_flags_seen"):  # g refuses to run if TF32 leaked from f
        assert v[name]["verified"] and v[name]["error"] is None and v[name]["speedup"] > 0, v[name]
        assert not v[name]["suspect"], v[name]["suspect"]
    assert pairs["trust"]["baseline"]["verified"]


def test_every_failure_of_a_pair_is_listed(trust_run):
    _, pairs, summary, _ = trust_run
    assert len(pairs["trust"]["errors"]) == len(FAILS)
    for name in FAILS:
        assert name in summary


def test_a_result_beyond_the_physical_floor_is_suspect_and_has_no_speedup(trust_run):
    _, pairs, summary, _ = trust_run
    claims = pairs["claims"]
    assert "floor its workload implies" in claims["baseline"]["suspect"]
    var = variants(claims)["claims"]
    assert var["verified"] and "floor its workload implies" in var["suspect"] and var["speedup"] is None
    assert "SUSPECT" in summary


def test_a_variant_declaring_its_own_bytes_is_rated_on_them_within_what_its_precision_saves(trust_run):
    # bytes_moved in a variant file (float8 weights read where the baseline reads bf16): its GB/s and the
    # physics check use them, within the workload's bytes scaled by the precision's width; a declaration
    # beyond that is ignored, so it cannot lower the floor the check holds a variant to.
    _, pairs, _, _ = trust_run
    v = variants(pairs["claims"])
    own, few = v["claims_own_bytes"], v["claims_too_few_bytes"]
    assert own["verified"] and own["bytes_moved"] == 32e9 and "its bytes_moved" in own["ceiling_note"]
    assert "3.2e+04 MB" in own["suspect"]              # the check's floor is its 32 GB, not the workload's 64
    assert few["verified"] and "bytes_moved" not in few and "bytes_moved ignored" in few["bytes_note"]
    assert "6.4e+04 MB" in few["suspect"] and "floor its workload implies" in few["suspect"]


def test_ceilings_a_result_beat_are_not_reused(trust_run):
    proc, _, _, device = trust_run
    from common.peaks import peaks_path
    assert "dropped" in proc.stderr and "measured again" in proc.stderr
    assert not peaks_path(torch.device(device)).exists()


def test_a_variant_needing_a_missing_package_is_skipped_with_the_reason(trust_run):
    _, pairs, _, _ = trust_run
    v = variants(pairs["trust"])["i_needs_package"]
    assert "a_package_nobody_installs" in v["skipped"] and not v["error"]


def test_a_wrong_tile_fails_where_the_norm_alone_would_pass():
    g = torch.Generator().manual_seed(0)
    ref = torch.nn.functional.gelu(torch.randn(4096, 4096, generator=g), approximate="tanh")
    assert verify_outputs([ref], [ref.bfloat16().float()], "bf16").ok  # a correct bf16 result passes
    bad = ref.clone()
    bad[1024:1152, 2048:2176] *= 1.15  # one 128 x 128 tile 15% wrong
    norm_err = float((bad - ref).norm() / ref.norm())
    assert norm_err < 1e-2  # the norm-wise bound alone would let it through
    verdict = verify_outputs([ref], [bad], "bf16")
    assert not verdict.ok and "max element" in verdict.message


class FakeGPU:
    """A simulated device for the round check: a caller's stream, a side stream, a host clock.

    A call costs the host `launch_s`; its work runs on the caller's stream (`main_s`) and, for a
    variant that leaves work behind, on a side stream (`side_s`) that nothing joins. Events read the
    caller's stream; a device-wide sync waits for both streams. `stall_s` is added once to the host
    at the end of round `stall_round` (a descheduled host, a lazily loaded kernel): outside any span.
    `neighbour_s`: another process takes the GPU that long after every device-wide sync (which waits only for
    this process's work), so whatever this process queues next (the round's first event) waits for it.
    """

    def __init__(self, main_s, side_s=0.0, launch_s=5e-6, stall_s=0.0, stall_round=1, neighbour_s=0.0):
        self.host = self.main_end = self.side_end = self.held_until = 0.0
        self.main_s, self.side_s, self.launch_s = main_s, side_s, launch_s
        self.stall_s, self.stall_round, self.syncs = stall_s, stall_round, 0
        self.neighbour_s, self.made = neighbour_s, 0   # made: events constructed
        gpu = self

        class Event:
            def __init__(self, enable_timing=True):
                self.t = None
                gpu.made += 1

            def record(self, stream=None):
                gpu.host += 2e-6
                self.t = gpu.main_end = max(gpu.host, gpu.main_end, gpu.held_until)

            def synchronize(self):
                if self.t is not None:   # an event never recorded: nothing to wait for
                    gpu.host = max(gpu.host, self.t) + 5e-6

            def elapsed_time(self, other):
                return (other.t - self.t) * 1e3

            def query(self):
                return self.t is not None and self.t <= gpu.host
        self.Event = Event

    def call(self):
        self.host += self.launch_s
        self.main_end = max(self.host, self.main_end, self.held_until) + self.main_s
        if self.side_s:
            self.side_end = max(self.host, self.side_end, self.held_until) + self.side_s

    def synchronize(self, device=None):
        self.syncs += 1
        self.host = max(self.host, self.main_end, self.side_end) + 10e-6
        if self.syncs == 2 * self.stall_round:  # each round: a sync before it and one after it
            self.host += self.stall_s
        self.held_until = self.host + self.neighbour_s

    def perf_counter(self):
        return self.host


def on_fake_gpu(monkeypatch, gpu):
    import types

    from common import timing
    monkeypatch.setattr(timing.torch.cuda, "Event", gpu.Event)
    monkeypatch.setattr(timing.torch.cuda, "synchronize", gpu.synchronize)
    monkeypatch.setattr(timing.torch.cuda, "current_stream", lambda: None)   # the one stream the fake has
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=gpu.perf_counter))
    return timing


def test_rounds_record_events_made_once(monkeypatch):
    gpu = FakeGPU(main_s=3e-4)
    timing = on_fake_gpu(monkeypatch, gpu)
    t = timing.Timed(gpu.call, timing.Between(None, None), rnd=5, streak=16)
    sizes = [len(timing._round_events(t, None, keep)[0]) for keep in (False, True, False, True)]
    assert sizes == [5, 16, 5, 16]
    assert gpu.made == 2 * 16 + 1   # the longest round's pairs and the span's first event, none made again


def round_check(monkeypatch, gpu):
    timing = on_fake_gpu(monkeypatch, gpu)
    monkeypatch.setattr(timing, "MEDIAN_CI_TARGET", -1.0)  # identical simulated samples: run until the budget
    t = timing.Timed(gpu.call, timing.Between(None, None), rnd=timing._round_size(gpu.main_s + gpu.side_s))
    timing._rounds_alone(t, None, budget_s=0.5, agree=lambda x: x, events=True)
    return timing.wall_check(t.wall_ratios)


def test_the_round_check_passes_correct_work_through_a_once_only_stall(monkeypatch):
    # A 0.3 ms call, and once a 20 ms stall outside the span (the H100 showed 22 ms in a first round)
    check = round_check(monkeypatch, FakeGPU(main_s=3e-4, stall_s=0.02))
    assert check["rounds"] >= 3 and check["max_wall_over_event_span"] > 1.3  # that round alone looks escaped
    assert not check["escaped"], check


def test_the_round_check_catches_work_on_an_unjoined_stream(monkeypatch):
    # All of the work on a side stream: the caller's events see almost nothing of it
    assert round_check(monkeypatch, FakeGPU(main_s=1e-5, side_s=3e-4))["escaped"]
    # The side stream is the slower one by a fifth: it runs past the last event, more each call
    assert round_check(monkeypatch, FakeGPU(main_s=2.5e-4, side_s=3e-4))["escaped"]
    # Side work that finishes within the caller's: nothing escapes the span (verification's job, not this one)
    assert not round_check(monkeypatch, FakeGPU(main_s=3e-4, side_s=3e-5))["escaped"]


def test_the_round_check_passes_correct_work_beside_a_process_that_holds_the_gpu(monkeypatch):
    # Each round's work waits 5 ms for another process (a tenth of a 50 ms round): the wait is not this call's
    held = round_check(monkeypatch, FakeGPU(main_s=3e-4, neighbour_s=5e-3))
    assert held["rounds"] >= 3 and not held["escaped"], held
    # ...and work on an unjoined stream is still caught there
    assert round_check(monkeypatch, FakeGPU(main_s=2.5e-4, side_s=3e-4, neighbour_s=5e-3))["escaped"]


def host_pace(monkeypatch, gpu, calls=1):
    timing = on_fake_gpu(monkeypatch, gpu)
    t = timing.Timed(gpu.call, timing.Between(None, None), calls=calls,
                     rnd=timing._round_size(calls * (gpu.main_s + gpu.launch_s)))
    for _ in range(5):
        timing._round_events(t, None, False)
    return timing.host_pace(t)


def test_the_gpu_waiting_on_the_host_is_found_and_a_gpu_that_is_behind_it_is_not(monkeypatch):
    # The host needs 50 us to issue a 10 us call (and 4 us for its two events): the GPU waits on it every sample
    slow_host = host_pace(monkeypatch, FakeGPU(main_s=1e-5, launch_s=5e-5))
    assert slow_host["gpu_waited"] and slow_host["caught_up_rounds"] == 5, slow_host
    # A 300 us call issued in 9 us: the GPU is behind all round
    fast_host = host_pace(monkeypatch, FakeGPU(main_s=3e-4))
    assert not fast_host["gpu_waited"] and fast_host["caught_up_rounds"] == 0, fast_host
    # 44 us of host time against 50 us of GPU time: the host takes 0.88 of the GPU's time, yet stays ahead of it
    close = host_pace(monkeypatch, FakeGPU(main_s=5e-5, launch_s=4e-5))
    assert not close["gpu_waited"] and close["median_host_over_span"] > 0.85, close
    # 54 us against 50: it falls behind, by a tenth of a sample a sample
    assert host_pace(monkeypatch, FakeGPU(main_s=5e-5, launch_s=5e-5))["gpu_waited"]
    # A sample of several calls is a loop of the call: paced by the slower side, as a program's loop is
    assert host_pace(monkeypatch, FakeGPU(main_s=1e-5, launch_s=5e-5), calls=10) is None
    # Calls of seconds, a round of one sample each: no earlier sample to have caught up with (ch16/batching on an
    # H200 read a host time of 1.00 of its span and 0 of 3 rounds caught up, as any such call would)
    assert host_pace(monkeypatch, FakeGPU(main_s=0.5, launch_s=1.5)) is None


def test_numerics_flags_are_set_checked_and_restored():
    before = read_flags()
    with numerics("tf32"):
        assert torch.backends.cuda.matmul.allow_tf32
    assert read_flags() == before
    with pytest.raises(FlagChanged, match="allow_tf32"):
        with numerics(None):
            torch.backends.cuda.matmul.allow_tf32 = True
    assert read_flags() == before and wanted_flags(None)["matmul.allow_tf32"] is False


def test_the_physics_check_uses_the_bound_s_own_ceiling():
    peaks = {"copy_gbps": 3000.0, "h2d_gbps": 50.0, "duplex_gbps": 100.0, "matmul_tflops": {"fp32": 50.0, "bf16": 700.0}}
    x = torch.zeros(1)
    one_way = Workload(inputs={"x": x}, bytes_moved=1e9)
    both = Workload(inputs={"x": x}, bytes_moved=1e9, duplex=True)
    # 1 GB over a 50 GB/s link takes 20 ms; both ways at 100 GB/s, 10 ms
    assert suspect_reason(15.0, one_way, "transfer", peaks, "fp32", False)
    assert suspect_reason(15.0, both, "transfer", peaks, "fp32", False) is None
    assert suspect_reason(8.0, both, "transfer", peaks, "fp32", False)
    # FLOP floors hold the baseline (its algorithm), not a variant that may change the algorithm
    gemm = Workload(inputs={"x": x}, flops=1e12)  # 20 ms at 50 TFLOP/s
    assert suspect_reason(10.0, gemm, "compute", peaks, "fp32", is_baseline=True)
    assert suspect_reason(10.0, gemm, "compute", peaks, "fp32", is_baseline=False) is None
    # device memory's floor does not apply to a working set that fits in cache
    small = Workload(inputs={"x": x}, bytes_moved=1e6)
    assert suspect_reason(1e-6, small, "memory", peaks, "fp32", False, cache=50 << 20) is None


def test_feeding_new_inputs_does_not_move_the_version_counter():
    from common.discover import load_pair
    base = FIXTURES / "ch80" / "baseline_trust.py"
    pair = load_pair(80, "trust", base, [FIXTURES / "ch80" / "optimized_trust_b_correct.py"])
    refs = References(pair, torch.device("cpu"), quick=True)
    own = refs.own_copy()
    x = own.w.inputs["x"]
    version = x._version
    own.feed("b")
    assert x._version == version and torch.equal(x, refs.fresh["x"])
    assert own.modified() == []
    x.add_(1)
    assert own.modified() == ["x"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (side streams)")
def test_on_a_gpu_side_stream_work_fails_reuse_gains_nothing_and_correct_work_passes(run_bench, tmp_path):
    proc = run_bench("--root", str(FIXTURES), "--chapter", "92", "--chapter", "83", "--output", str(tmp_path))
    pairs = {p["name"]: p for p in json.loads((tmp_path / "results.json").read_text())["pairs"]}
    side, reuse = pairs["sidestream"], pairs["reuse"]
    assert side["baseline"]["verified"] and not side["baseline"]["wall_check"]["escaped"]  # memory-bound, correct
    v = {x["name"]: x for x in side["variants"]}
    assert "never waits" in (v["optimized_sidestream_escaped"]["error"] or ""), v["optimized_sidestream_escaped"]
    assert "timing loop" in (v["optimized_sidestream_partial"]["error"] or ""), v["optimized_sidestream_partial"]
    r = {x["name"]: x for x in reuse["variants"]}
    assert reuse["baseline"]["verified"] and r["optimized_reuse_honest"]["verified"]
    assert r["optimized_reuse_cache"]["verified"] and r["optimized_reuse_cache"]["speedup"] < 1.05, r["optimized_reuse_cache"]
    assert proc.returncode == 1


def test_the_logits_margin_rule_forgives_a_fork_at_a_near_tie_only():
    from common.decode_check import compare_logits_margin
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(1, 6, 50, generator=g)
    ref[0, 2, 7], ref[0, 2, 9] = 10.0, 10.0 - 1e-4      # position 2: a near-tie between tokens 7 and 9
    out = ref.clone()
    out[0, 2, 9] += 2e-4                                  # a rounding-sized change picks token 9 instead
    out[0, 3:] = torch.randn(3, 50, generator=g)          # ...and the sequences differ from there on
    verdict = compare_logits_margin([ref], [out], "bf16")
    assert verdict.ok and "near-tie" in verdict.message, verdict.message
    decided = ref.clone()
    decided[0, 2, 9] = 5.0                                # the same fork where the baseline was sure
    forked = decided.clone()
    forked[0, 2, 9] = 10.5
    assert not compare_logits_margin([decided], [forked], "bf16").ok


def test_the_feed_rotates_non_contiguous_inputs_and_says_when_values_repeat():
    from common.inputs import rotate_into
    src = torch.arange(12.0).reshape(3, 4)
    dst = torch.empty(4, 3).t()                       # a transposed (non-contiguous) input
    rotate_into(dst, src, 5)
    assert torch.equal(dst, src.reshape(-1).roll(5).view(3, 4))
    from common.discover import load_pair
    pair = load_pair(80, "trust", FIXTURES / "ch80" / "baseline_trust.py", [FIXTURES / "ch80" / "optimized_trust_b_correct.py"])
    own = References(pair, torch.device("cpu"), quick=True).own_copy()
    n = own.w.inputs["x"].numel()
    assert own.new_every_sample(n) and not own.new_every_sample(n + 1)


FEED_SHAPES = """
"Fixture: per-call inputs of every shape the timed loop's feed meets."
import torch
from common import Workload
BOUND = "memory"


def workload(seed, device, quick=False):
    g = torch.Generator(device=device).manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g, device=device)  # noqa: E731
    return Workload(inputs={"m": r(6, 5), "ones": r(1, 7, 1), "scalar": r(()), "empty": r(0),
                            "bf16": r(4, 3).bfloat16(), "wide": r(5, 8).t()}, bytes_moved=1.0)


def prepare(w):
    return lambda: w.inputs["m"].sum()
"""


@pytest.mark.parametrize("limit", [64 << 20, 0])   # seed B's values laid twice (one copy), or rotate_into's two
def test_the_timed_loops_feed_writes_seed_b_rotated_by_each_new_shift(monkeypatch, tmp_path, limit):
    from common import inputs
    from common.discover import load_pair
    (tmp_path / "baseline_shapes.py").write_text(FEED_SHAPES)
    (tmp_path / "optimized_shapes.py").write_text("def prepare(w):\n    return lambda: w.inputs['m'].sum()\n")
    monkeypatch.setattr(inputs, "TWICE_BYTES", limit)
    rotated = []   # the inputs fed through rotate_into's two copies
    monkeypatch.setattr(inputs, "rotate_into", lambda dst, src, k, two=inputs.rotate_into: (rotated.append(src.numel()),
                                                                                           two(dst, src, k)))
    pair = load_pair(80, "shapes", tmp_path / "baseline_shapes.py", [tmp_path / "optimized_shapes.py"])
    own = References(pair, torch.device("cpu"), quick=True).own_copy()
    for i in (0, 1, 2, 29):
        own.feed_new(i)
        for k, x in own.w.inputs.items():
            shift = i * inputs.SHIFT_STEP % max(1, x.numel())
            assert torch.equal(x, own.refs.fresh[k].reshape(-1).roll(shift).view_as(x)), (k, i)
    # one copy for every non-empty contiguous input; the empty and the transposed one through rotate_into
    assert set(own.refs.twice) == ({"m", "ones", "scalar", "bf16"} if limit else set())
    assert sorted(set(rotated)) == ([0, 40] if limit else [0, 1, 7, 12, 30, 40])
