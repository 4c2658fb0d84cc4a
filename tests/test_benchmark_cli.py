"""benchmark.py end to end, as a user runs it (on the GPU where one is visible, else the CPU)."""
import json
from pathlib import Path

import pytest

from common.results import validate_results
from conftest import FIXTURES, alive


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    from conftest import bench
    out = tmp_path_factory.mktemp("run")
    proc = bench("--root", str(FIXTURES), "--chapter", "90", "--quick", "--output", str(out))
    return proc, out


def test_failures_are_reported_and_the_run_goes_on(fixture_run):
    proc, out = fixture_run
    assert proc.returncode == 1, proc.stderr
    doc = json.loads((out / "results.json").read_text())
    assert validate_results(doc) == []
    assert doc["host"]["cpu"] and doc["host"]["cores"] >= 1
    pairs = {p["name"]: p for p in doc["pairs"]}
    assert set(pairs) == {"crash", "scale", "zeros"}
    assert pairs["crash"]["status"] == "failed" and "crashed" in pairs["crash"]["error"]
    assert pairs["zeros"]["status"] == "failed" and "constant" in pairs["zeros"]["error"]
    variants = {v["name"]: v for v in pairs["scale"]["variants"]}
    good = variants["optimized_scale"]
    assert good["verified"] and good["speedup"] > 0 and good["median_ms"] > 0, \
        ((pairs["scale"]["baseline"] or {}).get("error"), good.get("error"), good.get("verification"))
    for bad in ("wrong", "nan", "const", "shape", "dtype"):
        v = variants[f"optimized_scale_{bad}"]
        assert v["verified"] is False and v["speedup"] is None, bad
        assert v.get("error") or v["verification"]["message"]  # says why
    assert variants["optimized_scale_raises"]["error"].startswith("RuntimeError: planted")
    assert "FAILED" in (out / "summary.md").read_text()
    for png in ("speedup.png", "roofline.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_unknown_chapter_and_pair_exit_2_with_one_line(run_bench):
    for args in (["--chapter", "99"], ["--pair", "nope"], ["--chapter", "x"]):
        proc = run_bench(*args)
        assert proc.returncode == 2, args
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr


def test_missing_profiler_is_one_line_and_exit_2(run_bench, monkeypatch, tmp_path):
    proc = run_bench("--pair", "batched_gemm", "--profile", "nsys", "--device", "cpu")
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and line.startswith("error:") and "--profile nsys needs a CUDA GPU" in line, proc.stderr
    from common.launch import tool_missing
    monkeypatch.setenv("PATH", str(tmp_path))   # neither profiler on PATH, whatever this machine has
    for tool, product in (("nsys", "Nsight Systems"), ("ncu", "Nsight Compute")):
        why = tool_missing(tool)
        assert why and f"'{tool}' is not on PATH" in why and product in why and "--profile torch" in why, why
    assert tool_missing("torch") is None and tool_missing(None) is None


def test_list_names_every_pair_and_variant(run_bench):
    proc = run_bench("--list", "--chapter", "1")
    assert proc.returncode == 0
    assert "batched_gemm" in proc.stdout and "optimized_batched_gemm" in proc.stdout


def test_help_explains_with_examples(run_bench):
    proc = run_bench("--help")
    assert proc.returncode == 0 and "--compare" in proc.stdout and "python benchmark.py --chapter 1" in proc.stdout


def test_compare_two_runs(fixture_run, run_bench, tmp_path):
    _, out = fixture_run
    doc = json.loads((out / "results.json").read_text())
    slower = json.loads(json.dumps(doc))
    for p in slower["pairs"]:
        for v in [p["baseline"] or {}] + p["variants"]:
            if v.get("median_ms"):
                v["median_ms"] *= 2
    (tmp_path / "new.json").write_text(json.dumps(slower))
    proc = run_bench("--compare", str(out / "results.json"), str(tmp_path / "new.json"))
    assert proc.returncode == 1 and "REGRESSION" in proc.stdout
    proc = run_bench("--compare", str(out / "results.json"), str(tmp_path / "missing.json"))
    assert proc.returncode == 2


def test_compare_two_folders_of_runs(fixture_run, run_bench, tmp_path):
    _, out = fixture_run
    doc = json.loads((out / "results.json").read_text())
    for side, factor in (("old", 1), ("new", 2)):
        for run in ("1", "2"):
            slower = json.loads(json.dumps(doc))
            for p in slower["pairs"]:
                for v in [p["baseline"] or {}] + p["variants"]:
                    if v.get("median_ms"):
                        v["median_ms"] *= factor
            (tmp_path / side / run).mkdir(parents=True)
            (tmp_path / side / run / "results.json").write_text(json.dumps(slower))
    proc = run_bench("--compare", str(tmp_path / "old"), str(tmp_path / "new"))
    assert proc.returncode == 1 and "REGRESSION" in proc.stdout and proc.stdout.startswith("old: 2 runs, ")
    (tmp_path / "empty").mkdir()
    proc = run_bench("--compare", str(tmp_path / "old"), str(tmp_path / "empty"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {tmp_path / 'empty'}: a folder with no results.json in it", proc.stderr


def test_torchrun_pair_runs_on_two_processes(run_bench, tmp_path):
    # Gloo on the CPU: two processes need no second GPU.
    proc = run_bench("--root", str(FIXTURES), "--chapter", "91", "--quick", "--device", "cpu", "--output", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    (pair,) = doc["pairs"]
    assert pair["status"] == "ok" and pair["variants"][0]["verified"]


def test_a_real_pair_runs_on_the_cpu_and_prints_its_comparison(run_bench):
    proc = run_bench("--pair", "ch1/batched_gemm", "--quick", "--no-report")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "optimized_batched_gemm" in proc.stdout and "| ok |" in proc.stdout


def test_a_gpu_only_pair_asked_for_on_a_cpu_is_one_line_and_exit_2(run_bench):
    proc = run_bench("--pair", "ch1/pinned_memory", "--device", "cpu")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a CUDA GPU" in lines[0], proc.stderr


def test_a_hanging_pair_times_out_and_is_reported(run_bench, tmp_path):
    proc = run_bench("--root", str(FIXTURES), "--chapter", "93", "--timeout", "8", "--output", str(tmp_path))
    assert proc.returncode == 1
    (pair,) = json.loads((tmp_path / "results.json").read_text())["pairs"]
    assert pair["status"] == "failed" and pair["error"].startswith("timed out after 8 s")


# ----------------------------------------------------------------------------- work lost or left behind
def _start_bench(*args, pidfile):
    import os
    import subprocess
    import sys
    from conftest import ROOT
    import signal
    env = dict(os.environ, BENCH_FIXTURE_PIDFILE=str(pidfile))
    # Ctrl-C's default even where the tests were started ignoring it (a background job): Python then installs its own
    return subprocess.Popen([sys.executable, str(ROOT / "benchmark.py"), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(path, proc, seconds=240):
    import time
    t0 = time.monotonic()
    while not path.exists():
        if proc.poll() is not None or time.monotonic() - t0 > seconds:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the slow pair's worker never started (rc {proc.returncode}): {err[-2000:]}")
        time.sleep(0.2)
    return int(path.read_text())


def test_ctrl_c_stops_the_worker_and_writes_what_finished(tmp_path):
    import signal
    out, pidfile = tmp_path / "run", tmp_path / "worker.pid"
    proc = _start_bench("--root", str(FIXTURES), "--chapter", "94", "--quick", "--device", "cpu",
                        "--output", str(out), pidfile=pidfile)
    worker = _wait_for(pidfile, proc)  # ch94/fast has finished; ch94/slow's worker is asleep
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "interrupted (SIGINT)" in stderr
    doc = json.loads((out / "results.json").read_text())
    assert validate_results(doc) == []
    assert doc["interrupted"] is True and doc["not_run"] == ["ch94/slow"]
    (fast,) = doc["pairs"]
    assert fast["name"] == "fast" and fast["status"] == "ok"
    assert "ch94/fast" in stdout  # the summary is printed
    assert not alive(worker), "the interrupted pair's worker is still running"


def test_sigterm_before_anything_finished_writes_nothing_and_stops_the_worker(tmp_path):
    import signal
    out, pidfile = tmp_path / "run", tmp_path / "worker.pid"
    proc = _start_bench("--root", str(FIXTURES), "--pair", "ch94/slow", "--quick", "--device", "cpu",
                        "--output", str(out), pidfile=pidfile)
    worker = _wait_for(pidfile, proc)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "Traceback" not in stderr and "nothing finished; no report written" in stderr
    assert not out.exists()  # the folder it created for the report is removed again
    assert not alive(worker)


_SIGNAL_WHILE_WRITING = """
import os, runpy, signal, sys
import common.report as report
signal.signal(signal.SIGINT, signal.default_int_handler)  # even where Ctrl-C was ignored when this started
signal.signal(signal.SIGTERM, signal.SIG_DFL)  # and SIGTERM
draw = report.draw_figures
def draw_after_a_signal(doc, outdir):  # the signal lands between the Markdown files and results.json
    os.kill(os.getpid(), signal.{signum})
    return draw(doc, outdir)
report.draw_figures = draw_after_a_signal
sys.argv = ["benchmark.py"] + sys.argv[1:]
runpy.run_path("benchmark.py", run_name="__main__")
"""


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_report_is_written_acts_after_results_json(tmp_path, signum):
    import signal
    import subprocess
    import sys
    from conftest import ROOT
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_WRITING.format(signum=signum), "--root", str(FIXTURES),
                           "--pair", "ch94/fast", "--quick", "--device", "cpu", "--output", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    # the signal still stops the process: SIGTERM by its default action, Ctrl-C as benchmark.py reports one
    expected = -signal.SIGTERM if signum == "SIGTERM" else 128 + signal.SIGINT
    assert proc.returncode == expected, proc.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())  # written whole, before the signal acted
    assert validate_results(doc) == [] and not doc.get("interrupted")
    assert [p["name"] for p in doc["pairs"]] == ["fast"] and doc["pairs"][0]["status"] == "ok"
    assert "ch94/fast" in (out / "summary.md").read_text() and (out / "speedup.png").read_bytes()[:4] == b"\x89PNG"
    assert f"{signum} came while the report was written" in proc.stderr and "results.json" in proc.stderr  # "wrote"
    assert "ch94/fast" in proc.stdout  # the summary is printed too


@pytest.mark.parametrize("kind", ["existing file", "under a file", "read-only folder", "holds a report"])
def test_a_bad_output_folder_is_refused_before_any_pair_runs(run_bench, tmp_path, kind):
    import os
    if kind == "existing file":
        target = tmp_path / "results.json"
        target.write_text("{}")
    elif kind == "holds a report":  # an earlier run's; the new one would leave its traces beside a new results.json
        target = tmp_path / "run"
        target.mkdir()
        (target / "results.json").write_text('{"earlier": true}')
    elif kind == "under a file":
        (tmp_path / "file").write_text("")
        target = tmp_path / "file" / "run"
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        target = tmp_path / "ro"
        target.mkdir()
        target.chmod(0o500)
    # ch94/slow would sleep for 10 minutes: only a check made before the first pair returns in time
    proc = run_bench("--root", str(FIXTURES), "--chapter", "94", "--device", "cpu", "--output", str(target),
                     timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and str(target) in lines[0], proc.stderr
    if kind == "holds a report":
        assert "already holds a report" in lines[0]
        assert sorted(p.name for p in target.iterdir()) == ["results.json"]
        assert json.loads((target / "results.json").read_text()) == {"earlier": True}


def test_a_hanging_variant_keeps_its_neighbours(run_bench, tmp_path):
    proc = run_bench("--root", str(FIXTURES), "--chapter", "97", "--quick", "--device", "cpu", "--timeout", "20",
                     "--output", str(tmp_path))
    assert proc.returncode == 1, proc.stderr[-2000:]
    (pair,) = json.loads((tmp_path / "results.json").read_text())["pairs"]
    assert pair["status"] == "failed" and pair["hung_variant"] == "optimized_hang_b"
    assert pair["error"].startswith("timed out after 20 s in optimized_hang_b")
    assert pair["baseline"]["median_ms"] > 0
    a, b, c = pair["variants"]
    assert a["name"] == "optimized_hang_a" and a["verified"] and a["speedup"] > 0
    assert b["name"] == "optimized_hang_b" and b["error"] == pair["error"] and b["speedup"] is None
    assert c["name"] == "optimized_hang_c" and c["skipped"] == "not run: optimized_hang_b timed out"


def test_a_gpu_only_pair_in_a_chapter_is_skipped_without_a_worker(run_bench, tmp_path):
    # A worker, had one started, would outlive a 1 ms timeout and be reported as timed out.
    proc = run_bench("--root", str(FIXTURES), "--chapter", "96", "--device", "cpu", "--timeout", "0.001",
                     "--output", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (pair,) = json.loads((tmp_path / "results.json").read_text())["pairs"]
    assert pair["status"] == "skipped" and pair["error"] == "needs CUDA; this run is on CPU"
    assert "elapsed_s" not in pair


# ----------------------------------------------------------------------------- small things a newcomer trips on
def test_a_broken_pair_file_is_failed_to_load_in_list(run_bench):
    proc = run_bench("--root", str(FIXTURES), "--list", "--chapter", "95")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("  ") and line.split()}
    assert "FAILED to load" in lines["nobound"] and "must define BOUND" in lines["nobound"]
    assert "FAILED to load" in lines["lonely"] and "no optimized_lonely" in lines["lonely"]
    assert "optimized_ok " in proc.stdout + " " and "FAILED" not in lines["ok"]
    # an extra variant named outside the rule is not silently ignored
    assert "ch95/optimized_ok2.py matches no pair" in proc.stderr and "optimized_<pair>_<suffix>.py" in proc.stderr


def test_a_broken_pair_file_asked_for_by_name_is_failed_to_load(run_bench):
    proc = run_bench("--root", str(FIXTURES), "--pair", "ch95/nobound", "--device", "cpu", "--no-report")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "FAILED to load" in proc.stderr and "must define BOUND" in proc.stderr


def test_a_chapter_without_pairs_is_bad_input(run_bench, tmp_path):
    (tmp_path / "ch5").mkdir()
    (tmp_path / "ch5" / "README.md").write_text("# Chapter 5: to come\n")
    (tmp_path / "ch6").mkdir()
    for f in ("baseline_x.py", "optimized_x.py"):
        (tmp_path / "ch6" / f).write_text("")
    proc = run_bench("--root", str(tmp_path), "--chapter", "5")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0] == "error: chapter 5 has no pairs yet; chapters with pairs: 6", proc.stderr


@pytest.mark.parametrize("content", ["[1, 2]", '"results"', "3", "{not json", "# Results on a device\n"])
def test_compare_refuses_a_file_that_is_not_an_object(fixture_run, run_bench, tmp_path, content):
    _, out = fixture_run
    (tmp_path / "bad.json").write_text(content)
    proc = run_bench("--compare", str(out / "results.json"), str(tmp_path / "bad.json"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert "bad.json is not a results.json" in lines[0], proc.stderr


def test_compare_refusal_is_one_line(fixture_run, run_bench, tmp_path):
    import common.report
    if not hasattr(common.report, "CompareRefused"):
        pytest.skip("common.report.compare_runs refuses nothing yet")
    _, out = fixture_run
    full = json.loads((out / "results.json").read_text())
    full["quick"] = not full["quick"]
    (tmp_path / "other.json").write_text(json.dumps(full))
    proc = run_bench("--compare", str(out / "results.json"), str(tmp_path / "other.json"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot compare"), proc.stderr


def test_benchmark_without_its_dependencies_says_how_to_get_them(tmp_path):
    import subprocess
    import sys
    from conftest import ROOT
    # -S: no site-packages, as the system Python without .venv
    proc = subprocess.run([sys.executable, "-S", str(ROOT / "benchmark.py"), "--list"], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "not installed" in lines[0] and "make bench" in lines[0] and ".venv" in lines[0]


def test_a_pair_file_takes_only_its_own_options():
    from conftest import ROOT, run_script
    pair_file = ROOT / "ch1" / "baseline_batched_gemm.py"
    proc = run_script(pair_file, "--help", timeout=120)
    assert proc.returncode == 0
    for option in ("--quick", "--device", "--budget", "--timeout", "--profile", "--output"):
        assert option in proc.stdout, option
    for option in ("--pair", "--chapter", "--list", "--compare", "--peaks", "--no-report"):
        assert option not in proc.stdout, option
    proc = run_script(pair_file, "--pair", "coalescing", timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--pair is an option of benchmark.py" in lines[0], proc.stderr


def test_help_says_where_runs_go(run_bench):
    proc = run_bench("--help")
    assert "profiles/runs/" in proc.stdout and "git ignores" in proc.stdout


def test_a_pair_needing_more_gpus_than_visible_is_one_line_from_the_gpu_count_the_cli_reads(monkeypatch, capsys):
    """The CLI hands Pair.cannot_run the GPU count torch sees: a two-process pair named with --pair on a
    one-GPU machine is refused in one line before anything runs (GPU simulated: is_available and device_count)."""
    import torch
    from common.cli import main
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert main(["--pair", "ch4/small_allreduce", "--device", "cuda", "--no-report"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: ch4/small_allreduce needs 2 GPUs; 1 visible"


@pytest.mark.parametrize("option, value", [("--budget", "nan"), ("--budget", "0"), ("--budget", "-1"),
                                           ("--timeout", "-1"), ("--timeout", "0"), ("--timeout", "inf"),
                                           ("--budget", "five")])
def test_a_budget_or_timeout_that_is_not_a_positive_number_of_seconds_is_one_line_and_exit_2(run_bench, tmp_path,
                                                                                             option, value):
    # nan failed every pair with a TypeError, a timeout of 0 or -1 failed them as timed out, a budget of 0 or -1 ran
    out = tmp_path / "run"
    proc = run_bench("--pair", "batched_gemm", "--quick", "--device", "cpu", option, value, "--output", str(out))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "give a positive number of seconds" in lines[0], proc.stderr
    assert option in lines[0] and not out.exists()


def test_compare_refuses_the_options_it_would_ignore(run_bench, tmp_path):
    # --compare OLD NEW --pair coalescing printed every pair's rows, the --pair ignored without a word
    run = tmp_path / "run.json"
    proc = run_bench("--compare", str(run), str(run), "--pair", "coalescing", "--chapter", "1")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--compare reads two runs and runs nothing, so it takes no --chapter, --pair" in lines[0], lines
