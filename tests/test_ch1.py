"""Chapter 1 on the CPU: every pair's CPU path verifies, and the scripts run end to end."""
import json

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def ch1_run(tmp_path_factory):
    from conftest import bench
    out = tmp_path_factory.mktemp("ch1")
    proc = bench("--chapter", "1", "--quick", "--device", "cpu", "--output", str(out))
    return proc, json.loads((out / "results.json").read_text())


def test_every_cpu_path_verifies(ch1_run):
    proc, doc = ch1_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran = 0
    for p in doc["pairs"]:
        if p["status"] == "skipped":
            assert "CUDA" in p["error"]
            continue
        assert p["status"] == "ok", p
        for v in p["variants"]:
            if v.get("skipped"):
                continue
            assert v["verified"] and v["speedup"] > 0, (p["name"], v)
            ran += 1
    assert ran >= 5  # batched_gemm, coalescing, preallocation, tensor_cores (tf32), fused_gelu


def test_gpu_only_pairs_are_skipped_with_a_reason(ch1_run):
    _, doc = ch1_run
    skipped = {p["name"] for p in doc["pairs"] if p["status"] == "skipped"}
    assert {"pinned_memory", "vectorization", "double_buffering"} <= skipped


def test_performance_basics_reports_goodput(capsys):
    from ch1 import performance_basics
    r = performance_basics.main(["--steps", "3", "--device", "cpu"])
    line = capsys.readouterr().out
    assert "goodput=" in line and "(useful=" in line and "total=" in line
    assert r["total_s"] > 0 and r["useful_s"] > 0


def test_performance_basics_optimized_runs_every_cpu_test(tmp_path, capsys):
    from ch1 import performance_basics_optimized as pbo
    r = pbo.main(["--steps", "3", "--device", "cpu", "--json", str(tmp_path / "pb.json")])
    out = capsys.readouterr().out
    for header in ("Test 1", "Test 2", "Test 3: skipped", "Test 4"):
        assert header in out
    assert [row["batch"] for row in r["test4"]] == [32, 64, 128, 256, 512]
    assert json.loads((tmp_path / "pb.json").read_text())["test2"]["batch"] == 32


def test_roofline_analysis_classifies_and_plots(tmp_path):
    from ch1 import roofline_analysis
    rows = roofline_analysis.main(["--device", "cpu", "--out", str(tmp_path / "roof.png")])
    bounds = {r["name"].split()[0]: r["bound"] for r in rows}
    assert bounds == {"vector": "memory-bound", "matmul": "compute-bound"}
    assert (tmp_path / "roof.png").read_bytes()[:4] == b"\x89PNG"


def test_every_ch1_file_runs_as_a_script():
    """`python ch1/<file>.py` must find the repository without PYTHONPATH."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, str(ROOT / "ch1" / "optimized_batched_gemm.py"), "--quick", "--device", "cpu"],
                          capture_output=True, text=True, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "optimized_batched_gemm" in proc.stdout


def test_compare_profile_writes_a_trace_per_variant(tmp_path):
    from ch1.compare import profile
    rc = profile("torch", ["--quick", "--pair", "batched_gemm", "--device", "cpu", "--output", str(tmp_path)])
    assert rc == 0
    traces = sorted(p.name for p in tmp_path.glob("*.trace.json"))
    assert traces == ["ch1__batched_gemm__baseline.trace.json", "ch1__batched_gemm__optimized_batched_gemm.trace.json"]
