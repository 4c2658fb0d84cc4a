"""common/overlap.py: an overlap share is in 0-100%, or None with a reason; never outside silently."""
import math

import pytest

from common.overlap import NOISE_FRAC, overlap_note, overlap_pct

# 4 chunks of (copy 1 ms, compute 2 ms): serial 4 x 3 = 12 ms, ideal 3 x 2 + 3 = 9 ms
FOUR_CHUNKS = {"chunks": 4, "stage_ms": {"copy": 1.0, "compute": 2.0}, "serial_ms": 12.0, "ideal_ms": 9.0}


def test_a_time_between_the_bounds_is_placed_as_measured():
    assert overlap_pct(12.0, FOUR_CHUNKS) == 0.0 and overlap_note(12.0, FOUR_CHUNKS) is None
    assert overlap_pct(9.0, FOUR_CHUNKS) == 100.0 and overlap_note(9.0, FOUR_CHUNKS) is None
    assert overlap_pct(10.5, FOUR_CHUNKS) == pytest.approx(50.0) and overlap_note(10.5, FOUR_CHUNKS) is None


@pytest.mark.parametrize("old_share", [548.0, 618.0, -298.0, -408.0])   # what ch4 printed on a CPU
def test_the_shares_a_cpu_run_printed_are_refused_with_a_reason(old_share):
    st = {"chunks": 4, "serial_ms": 10.0, "ideal_ms": 9.0}
    median_ms = 10.0 - old_share / 100 * (10.0 - 9.0)    # the time that gave that share by the plain formula
    assert median_ms > 0
    assert overlap_pct(median_ms, st) is None
    note = overlap_note(median_ms, st)
    if old_share > 100:
        assert "faster than the stages' ideal overlap" in note and "timed alone are slower" in note
    else:
        assert "slower than running the stages one after another" in note


def test_just_past_a_bound_is_clamped_to_it_and_says_so():
    ideal, serial = FOUR_CHUNKS["ideal_ms"], FOUR_CHUNKS["serial_ms"]
    assert overlap_pct(ideal * 0.98, FOUR_CHUNKS) == 100.0                 # 2% faster than ideal: noise
    assert "100%" in overlap_note(ideal * 0.98, FOUR_CHUNKS)
    assert overlap_pct(serial * 1.03, FOUR_CHUNKS) == 0.0                  # 3% slower than serial: noise
    assert "0%" in overlap_note(serial * 1.03, FOUR_CHUNKS)
    assert overlap_pct(ideal * (1 - 2 * NOISE_FRAC), FOUR_CHUNKS) is None
    assert overlap_pct(serial * (1 + 2 * NOISE_FRAC), FOUR_CHUNKS) is None


def test_no_share_without_a_gap_between_serial_and_ideal():
    one_chunk = {"chunks": 1, "serial_ms": 3.0, "ideal_ms": 3.0}
    assert overlap_pct(3.0, one_chunk) is None and "no overlap to measure" in overlap_note(3.0, one_chunk)
    # 8 chunks, compute 10 ms, copy 0.01 ms: serial 80.08, ideal 80.01: the gap is below the noise
    lopsided = {"chunks": 8, "serial_ms": 80.08, "ideal_ms": 80.01}
    assert overlap_pct(80.05, lopsided) is None and overlap_note(80.05, lopsided)
    assert overlap_pct(float("nan"), FOUR_CHUNKS) is None and overlap_note(float("nan"), FOUR_CHUNKS)


def test_every_time_gives_a_share_in_range_or_a_reason():
    bounds = [FOUR_CHUNKS, {"serial_ms": 30.0, "ideal_ms": 12.0}, {"serial_ms": 1.0, "ideal_ms": 0.9}]
    for st in bounds:
        for i in range(1, 400):
            median_ms = st["serial_ms"] * i / 100          # 1% to 4x serial
            pct, note = overlap_pct(median_ms, st), overlap_note(median_ms, st)
            assert pct is None or (math.isfinite(pct) and 0.0 <= pct <= 100.0), (st, median_ms, pct)
            if pct is None:
                assert note, (st, median_ms)
            inside = st["ideal_ms"] <= median_ms <= st["serial_ms"]
            assert (note is None) == inside, (st, median_ms, note)


def test_each_stage_is_the_slowest_ranks_time(monkeypatch):
    """With several ranks every stage time goes through `agree` (the max over ranks): in a pipeline each rank
    runs its own stage, and rank 0, which writes the report, may run the shorter one (pipeline_handoff's rank 1
    also computes its loss). Here each stage takes 1 ms on this rank and `agree` stands for another rank whose
    stages took 5 ms; the timer is stubbed, since `agree` also takes its decisions."""
    import types

    import common.overlap as overlap
    monkeypatch.setattr(overlap, "time_call", lambda fn, device, budget_s, agree: types.SimpleNamespace(median_ms=1.0))
    module = types.SimpleNamespace(stages=lambda w: (4, {"copy": lambda: None, "compute": lambda: None}))
    pair = types.SimpleNamespace(baseline=types.SimpleNamespace(module=module))
    st = overlap.stage_times(pair, None, "cpu", agree=lambda t: max(t, 5.0))
    assert st["stage_ms"] == {"copy": 5.0, "compute": 5.0}
    assert st["serial_ms"] == 4 * 10.0 and st["ideal_ms"] == 3 * 5.0 + 10.0
