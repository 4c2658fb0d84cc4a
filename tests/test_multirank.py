"""Several processes: a rank that dies ends its pair, named, and the run goes on (Gloo on the CPU)."""
import json

from conftest import FIXTURES


def test_a_rank_that_dies_is_named_with_its_exit_code(run_bench, tmp_path):
    proc = run_bench("--root", str(FIXTURES), "--chapter", "82", "--quick", "--device", "cpu", "--timeout", "60",
                     "--output", str(tmp_path))
    assert proc.returncode == 1
    (pair,) = json.loads((tmp_path / "results.json").read_text())["pairs"]
    assert pair["status"] == "failed"
    assert "rank 1 failed first (exit code 7)" in pair["error"], pair["error"]
    assert pair["baseline"]["error"] and pair["variants"][0]["skipped"].startswith("not run")
