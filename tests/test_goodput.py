"""ch1's goodput: useful time measured apart from the loop, so the ratio is not bounded by construction, and
on a CPU it stays within 100% (it printed 105% and 147% when the reference step was not the loop's fastest math)."""
import pytest
import torch

from ch1 import performance_basics as pb
from ch1 import performance_basics_optimized as pbo


def test_goodput_is_not_capped_and_a_share_above_100_is_flagged(capsys):
    r = pb.report("x", steps=10, batch=32, total_s=1.0, useful_s=1.5)
    assert r["goodput_pct"] == pytest.approx(150.0)
    out = capsys.readouterr().out
    assert "goodput=150.0%" in out and "warning: goodput above 100%" in out
    pb.report("x", steps=10, batch=32, total_s=1.0, useful_s=0.5)
    assert "warning" not in capsys.readouterr().out


@pytest.fixture
def one_thread():
    # One intra-op thread: on a shared 2-core machine, two threads stall on each other's time slices.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_goodput_of_the_cpu_loops_is_a_share(one_thread):
    """A definition bug (a reference slower than the loop's own math, as the default Adam against a foreach one
    was) fails every attempt. Other agents' bursts of load on a shared CPU can slow every reference sample of one
    attempt, so the reference is measured before and after the loops, and a disturbed attempt is run again."""
    cpu = torch.device("cpu")
    steps = 10
    for attempt in range(3):
        before = pb.useful_step_seconds(32, cpu)
        totals = {loop.__name__: loop(steps, 32, cpu) for loop in (pb.original_loop, pbo.pinned_loop)}
        useful = min(before, pb.useful_step_seconds(32, cpu))
        shares = {name: 100 * steps * useful / total for name, total in totals.items()}
        if all(0 < g <= 100 for g in shares.values()):
            return
    pytest.fail(f"goodput above 100% in 3 attempts: {shares} (useful {useful * 1e3:.2f} ms/step, "
                f"loops {[round(t / steps * 1e3, 2) for t in totals.values()]} ms/step)")
