"""User runs go under profiles/runs/, which git ignores, never into the source tree beside committed reports."""
import json
import shutil
import subprocess

import pytest

from conftest import ROOT


def test_profiles_runs_is_ignored_and_committed_reports_are_not():
    if not shutil.which("git") or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "check-ignore", "-q", "profiles/runs/20260101-000000-x/results.json"], cwd=ROOT)
    assert ignored.returncode == 0
    committed = subprocess.run(["git", "check-ignore", "-q", "profiles/h100/ch1/results.json"], cwd=ROOT)
    assert committed.returncode == 1


def test_benchmark_runs_default_to_profiles_runs():
    from common.cli import RUNS_DIR, new_run_dir
    d = new_run_dir("NVIDIA H100 80GB HBM3")
    assert d.parent == RUNS_DIR == ROOT / "profiles" / "runs"
    assert d.name.endswith("-nvidia-h100-80gb-hbm3")


def test_two_runs_in_the_same_second_get_two_report_folders(monkeypatch, tmp_path):
    import datetime
    import common.cli
    monkeypatch.setattr(common.cli, "RUNS_DIR", tmp_path / "runs")
    now = datetime.datetime(2026, 11, 23, 12, 0, 0, tzinfo=datetime.timezone.utc)
    first, second = (common.cli.default_report_dir("NVIDIA H100 80GB HBM3", now=now) for _ in range(2))
    assert first != second and first.is_dir() and second.is_dir()
    assert first.name == "20261123-120000-nvidia-h100-80gb-hbm3" and second.name == first.name + "-2"


def test_roofline_picture_defaults_to_profiles_runs(monkeypatch, tmp_path):
    import common.cli
    from ch1 import roofline_analysis
    peaks = json.loads((ROOT / "profiles" / "h100" / "peaks-3bfe94c.json").read_text())
    rows = [{"name": "vector add (fp32)", "median_ms": 1.0, "flops": 1e6, "bytes": 12e6, "ai": 1 / 12,
             "tflops": 1e-3, "gbps": 12.0, "precision": "fp32"}]
    monkeypatch.setattr(roofline_analysis, "load_or_measure", lambda device: peaks)
    monkeypatch.setattr(roofline_analysis, "measure", lambda device: [dict(r) for r in rows])
    monkeypatch.setattr(common.cli, "RUNS_DIR", tmp_path / "runs")
    roofline_analysis.main(["--device", "cpu"])
    (png,) = (tmp_path / "runs").iterdir()
    assert png.name.endswith("-roofline.png") and png.read_bytes()[:4] == b"\x89PNG"
