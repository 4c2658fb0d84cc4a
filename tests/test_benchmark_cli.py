"""benchmark.py end to end on the CPU, as a user runs it."""
import json
import shutil

import pytest

from common.report import validate_results
from conftest import FIXTURES


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
    pairs = {p["name"]: p for p in doc["pairs"]}
    assert set(pairs) == {"crash", "scale", "zeros"}
    assert pairs["crash"]["status"] == "failed" and "crashed" in pairs["crash"]["error"]
    assert pairs["zeros"]["status"] == "failed" and "constant" in pairs["zeros"]["error"]
    variants = {v["name"]: v for v in pairs["scale"]["variants"]}
    good = variants["optimized_scale"]
    assert good["verified"] and good["speedup"] > 0 and good["median_ms"] > 0
    for bad in ("wrong", "nan", "const", "shape", "dtype"):
        v = variants[f"optimized_scale_{bad}"]
        assert v["verified"] is False and v["speedup"] is None, bad
        assert v["verification"]["message"]
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


def test_missing_profiler_is_one_line_and_exit_2(run_bench):
    if shutil.which("nsys"):
        pytest.skip("nsys is installed here")
    proc = run_bench("--pair", "batched_gemm", "--profile", "nsys")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


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
    assert "optimized_batched_gemm" in proc.stdout and "| yes |" in proc.stdout


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
