import math

import pytest
import torch

from common.timing import median_ci_rel, percentile, time_call, time_together

pytestmark = pytest.mark.serial   # asserts on times: run alone on the machine (make test)


def test_percentile_interpolates():
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert percentile(xs, 0.5) == 3.0
    assert percentile(xs, 0.1) == 1.4
    assert percentile(xs, 0.9) == 4.6


def test_median_ci_shrinks_with_agreeing_samples():
    assert median_ci_rel([1.0, 2.0]) == math.inf
    tight = sorted([1.0 + 1e-4 * i for i in range(200)])
    loose = sorted([1.0 + 0.1 * (i % 10) for i in range(200)])
    assert median_ci_rel(tight) < 0.01 < median_ci_rel(loose)


def test_cpu_timing_reports_every_statistic():
    x = torch.randn(256, 256)
    t = time_call(lambda: x @ x, torch.device("cpu"), budget_s=0.3)
    assert t.timer == "cpu_wall" and t.samples >= 3 and t.warmup_calls >= 3
    assert 0 < t.p10_ms <= t.median_ms <= t.p90_ms
    assert t.std_ms >= 0 and t.calls_per_sample >= 1


def test_tiny_calls_are_batched():
    x = torch.randn(4)
    t = time_call(lambda: x.add(1), torch.device("cpu"), budget_s=0.2)
    assert t.calls_per_sample > 1  # a microsecond call is timed over a batch


def test_a_call_that_memoizes_gains_nothing_when_fed_new_values():
    """A call that returns a stored answer for inputs it has seen (2 ms of work otherwise) looks free when
    timed on repeated values; fed a new value set before every sample, it pays for its work every time."""
    import time as _time

    x = torch.randn(4096)  # more elements than samples: no rotation repeats within the budget
    seen = {}

    def memo():
        key = x.numpy().tobytes()
        if key not in seen:
            _time.sleep(0.002)
            seen[key] = x.sum()
        return seen[key]

    source = torch.randn(4096)

    def feed(i):
        x.copy_(source.roll(i))

    repeated = time_call(memo, torch.device("cpu"), budget_s=0.3)
    fresh = time_call(memo, torch.device("cpu"), budget_s=0.3, feed=feed)
    assert repeated.median_ms < 0.5 and not repeated.fed_new_values
    assert fresh.median_ms > 1.8 and fresh.fed_new_values and fresh.calls_per_sample == 1


def test_the_l2_scrubber_reads_its_buffer_then_writes_as_many_bytes_as_the_call_returns(monkeypatch):
    """On a GPU the scrub reads 2x L2, then leaves min(output, L2) bytes written (dirty). Here on the CPU with a
    pretend 1 MiB L2: the written part is exactly the output's size, capped at L2, and the rest untouched."""
    import types
    import torch
    from common.timing import L2Scrubber, returned_bytes
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(L2_cache_size=1 << 20))
    s = L2Scrubber(torch.device("cpu"))
    assert s.buf.numel() * 4 >= 2 << 20
    out = (torch.ones(1000, dtype=torch.bfloat16), [torch.ones(3, 10)])
    for returned, written in ((out, returned_bytes(out)), (torch.ones(1 << 20), 1 << 20), (None, 0)):
        s.buf.fill_(7)
        s.output_bytes(returned_bytes(returned))
        s()
        assert int((s.buf != 7).sum()) * 4 == written, (written, int((s.buf != 7).sum()))
    assert returned_bytes(out) == 1000 * 2 + 30 * 4


def test_calls_timed_together_keep_their_own_times_and_share_the_feed():
    """time_together (the chapter scripts' timer): a 2 ms call and a 0.5 ms call timed in the same interleaved
    rounds come back as two timings at their own levels, each sample fed, and a failing call raises its error."""
    import time as _time

    import pytest
    fed = []
    out = time_together({"slow": lambda: _time.sleep(0.002), "fast": lambda: _time.sleep(0.0005)},
                        torch.device("cpu"), budget_s=0.3, feed=fed.append)
    assert set(out) == {"slow", "fast"}
    assert out["slow"].median_ms > 1.8 and 0.4 < out["fast"].median_ms < out["slow"].median_ms / 2
    assert out["slow"].fed_new_values and out["fast"].fed_new_values and len(fed) >= out["slow"].samples

    def broken():
        raise RuntimeError("planted")
    with pytest.raises(RuntimeError, match="planted"):
        time_together({"ok": lambda: None, "broken": broken}, torch.device("cpu"), budget_s=0.1)
