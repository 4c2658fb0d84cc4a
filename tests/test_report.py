import json
import subprocess
import sys
import textwrap
import time

from common.files import atomic_write_json
from common.report import compare_runs
from common.results import validate_results
from conftest import ROOT


def doc(median=1.0, verified=True):
    v = {"name": "optimized_x", "median_ms": median, "speedup": 2.0 / median if verified else None,
         "verified": verified, "pct_of_ceiling": 50.0}
    return {"schema_version": 1, "device": {"name": "GPU"}, "torch": "2", "cuda": None, "driver": None,
            "git_commit": "abc", "created": "2026-01-01T00:00:00+00:00",
            "pairs": [{"chapter": 1, "name": "x", "bound": "memory", "status": "ok",
                       "baseline": {"name": "baseline", "median_ms": 2.0, "speedup": 1.0, "verified": True,
                                    "pct_of_ceiling": 25.0}, "variants": [v]}]}


def test_schema_accepts_a_good_document_and_names_what_is_missing():
    assert validate_results(doc()) == []
    d = doc()
    del d["pairs"][0]["variants"][0]["verified"]
    del d["git_commit"]
    errs = validate_results(d)
    assert any("git_commit" in e for e in errs) and any("verified" in e for e in errs)


def test_schema_refuses_a_speedup_on_a_failed_variant():
    d = doc()
    d["pairs"][0]["variants"][0]["verified"] = False
    assert any("speedup" in e for e in validate_results(d))


def test_compare_flags_regressions_and_new_failures():
    text, n = compare_runs(doc(1.0), doc(1.5))
    assert n == 1 and "REGRESSION" in text
    text, n = compare_runs(doc(1.0), doc(0.5))
    assert n == 0 and "faster" in text
    _, n = compare_runs(doc(1.0), doc(1.0, verified=False))
    assert n == 1


def test_results_survive_a_kill_mid_write(tmp_path):
    target = tmp_path / "results.json"
    atomic_write_json(target, {"run": "old"})
    # A writer that streams slowly; killed while streaming, it must leave the old file intact.
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from common.files import atomic_write
        def chunks():
            yield '{{"run": "new", "data": ['
            while True:
                print("writing", flush=True)
                yield '1,' * 1000
                time.sleep(0.01)
        atomic_write({str(target)!r}, chunks())
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    time.sleep(0.2)
    proc.kill()
    proc.wait()
    assert json.loads(target.read_text()) == {"run": "old"}
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "results.json"]
    # the temporary file may remain after SIGKILL, but it is hidden and never mistaken for results.json
    assert all(n.startswith(".results.json.") for n in leftovers)


_HOLD = """
import os, signal, sys
from common.files import signals_deferred
signal.signal(signal.SIGINT, signal.{sigint})
signal.signal(signal.SIGTERM, signal.SIG_DFL)  # even where the tests were started ignoring it
with signals_deferred():
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGTERM)
    print("the block ran to its end", flush=True)
    {end}
print("still running", flush=True)
"""


def _hold(sigint: str, end: str = "pass"):
    return subprocess.run([sys.executable, "-c", _HOLD.format(sigint=sigint, end=end)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_signals_held_over_a_block_act_after_it_each_with_its_own_handler():
    # SIGTERM's default stops the process after the block, whether Ctrl-C is handled or ignored
    for sigint in ("default_int_handler", "SIG_IGN"):
        proc = _hold(sigint)
        assert proc.returncode == -15 and proc.stdout == "the block ran to its end\n", (sigint, proc)
    # a block that fails: its error is what the process ends with, not the signals it held
    proc = _hold("default_int_handler", end="raise OSError('disk full')")
    assert proc.returncode == 1 and "OSError: disk full" in proc.stderr and "still running" not in proc.stdout, proc


def test_the_details_table_prints_each_tolerance_as_given():
    # fp8's 0.15 printed with one significant digit read "1e-01", a tolerance 1.5x tighter than the one applied
    from common.report import _verification_text
    from common.verify import TOLERANCE
    for precision in ("fp8", "bf16", "fp32"):
        tol = TOLERANCE[precision][0]
        text = _verification_text({"verification": {"rel_err": tol / 3, "tolerance": tol}})
        assert float(text.split("≤ ")[1].rstrip(")")) == tol, (precision, text)


def test_a_baseline_is_said_to_move_only_where_its_levels_are_far_apart_and_their_intervals_too():
    from common.report import baseline_moved
    def pair(*levels):
        d = doc()["pairs"][0]
        d["variants"] = [{**d["variants"][0], "name": f"optimized_{i}", "baseline_in_rounds_ms": level}
                         for i, level in enumerate(levels)]
        return d
    assert "13 ms" in baseline_moved(pair([13, 12.9, 13.1], [29.7, 29, 30])) and "29.7 ms" in \
        baseline_moved(pair([13, 12.9, 13.1], [29.7, 29, 30], [20, 19, 21]))
    assert baseline_moved(pair([13, 12.9, 13.1], [14, 13.9, 14.1])) is None      # 8% apart: within what rounds vary
    assert baseline_moved(pair([13, 11, 16], [15, 13, 17])) is None              # 15% apart, intervals overlap
    assert baseline_moved(pair([13, 12.9, 13.1])) is None                        # one variant: nothing to set beside
    # a third level with a wide interval between the two hides nothing; a failed variant (no speedup) counts not
    assert "11.5 ms" in baseline_moved(pair([10, 9.9, 10.1], [11.5, 11.4, 11.6], [12, 10, 14]))
    failed = pair([10, 9.9, 10.1], [20, 19.9, 20.1])
    failed["variants"][1]["speedup"] = None
    assert baseline_moved(failed) is None


def test_a_memory_or_compute_bound_time_the_gpu_waited_on_the_host_for_is_said_and_a_launch_bound_one_is_not(tmp_path):
    from common.report import write_report
    waited = {"rounds": 20, "caught_up_rounds": 19, "gpu_waited": True, "median_host_over_span": 0.99}
    ahead = {**waited, "caught_up_rounds": 0, "gpu_waited": False, "median_host_over_span": 0.6}
    d = doc()
    d["pairs"][0]["variants"][0]["host_pace"] = {**waited, "gpu_busy_ms": 0.0612}   # the profiler's GPU time
    d["pairs"][0]["baseline"]["host_pace"] = ahead
    d["pairs"].append({**d["pairs"][0], "name": "y", "bound": "launch",
                       "baseline": {**d["pairs"][0]["baseline"], "host_pace": waited}})
    write_report(d, tmp_path, figures=False)
    section = (tmp_path / "summary.md").read_text().split("## The GPU waited on the host")[1]
    lines = [line for line in section.splitlines() if line.startswith("- ")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("- ch1/x optimized_x: the GPU had caught up with the host in 19 of 20 rounds"), lines
    median = d["pairs"][0]["variants"][0]["median_ms"]
    assert lines[0].endswith(f"; the GPU worked 0.0612 ms of its {median:.4g} ms (torch.profiler)"), lines
    d["pairs"][0]["variants"][0]["host_pace"]["gpu_busy_ms"] = None   # the profiler gave none: no figure said
    write_report(d, tmp_path / "none", figures=False)
    section = (tmp_path / "none" / "summary.md").read_text().split("## The GPU waited on the host")[1]
    assert "the GPU worked" not in section and "19 of 20 rounds" in section, section
