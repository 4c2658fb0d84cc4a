"""benchmark.py --sizes/--dtypes (a sweep): one run and one report row per point, on the CPU paths."""
import json

import pytest

from common.cli import sweep_points
from common.discover import load_pair
from common.results import validate_results
from conftest import ROOT, bench


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    proc = bench("--pair", "softmax", "--sizes", "512", "1000", "--dtypes", "float32", "bfloat16", "--device", "cpu",
                 "--quick", "--output", str(out))
    return proc, out


def test_a_sweep_is_one_verified_row_per_point_with_its_size_and_dtype(sweep_run):
    proc, out = sweep_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    assert validate_results(doc) == []
    pairs = {p["name"]: p for p in doc["pairs"]}
    assert list(pairs) == ["softmax@512-float32", "softmax@512-bfloat16", "softmax@1000-float32",
                           "softmax@1000-bfloat16"]
    for name, p in pairs.items():
        size, dtype = name.split("@")[1].split("-")
        assert p["point"] == {"size": int(size), "dtype": dtype} and p["size_counts"] == "columns per row"
        assert p["baseline"]["verified"], name
        torch_variant = next(v for v in p["variants"] if v["name"] == "optimized_softmax_torch")
        assert torch_variant["verified"] and torch_variant["precision"] == {"float32": "fp32"}.get(dtype, "bf16")
    # the point reached the workload: bytes scale with the columns and with the element size
    moved = {n: p["workload"]["bytes_moved"] for n, p in pairs.items()}
    assert moved["softmax@1000-float32"] / moved["softmax@512-float32"] == pytest.approx(1000 / 512)
    assert moved["softmax@512-float32"] / moved["softmax@512-bfloat16"] == pytest.approx(2.0)
    summary = (out / "summary.md").read_text()
    assert all(f"| ch13/{n} |" in summary for n in pairs)
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args, message", [
    (["--pair", "batched_gemm", "--sizes", "4096"], "ch1/batched_gemm takes no --sizes"),
    (["--pair", "fused_gelu", "--dtypes", "float32"], "ch1/fused_gelu takes only the dtypes bfloat16, float16"),
    (["--pair", "softmax", "--sizes", "0"], "--sizes 0: a size is a positive count"),
    (["--pair", "softmax", "--dtypes", "int8"], "argument --dtypes: invalid choice: 'int8'"),
])
def test_a_sweep_a_pair_cannot_take_is_one_line_and_exit_2(args, message):
    proc = bench(*args, "--device", "cpu", "--no-report")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr


def _pairs(*names):
    found = {"softmax": (13, "softmax"), "fused_gelu": (1, "fused_gelu"), "batched_gemm": (1, "batched_gemm")}
    return [load_pair(c, name, ROOT / f"ch{c}" / f"baseline_{name}.py", sorted((ROOT / f"ch{c}").glob(f"optimized_{name}*.py")))
            for c, name in (found[n] for n in names)]


def test_a_chapter_sweep_leaves_out_what_a_pair_does_not_take_and_says_so(capsys):
    loaded = _pairs("batched_gemm", "fused_gelu", "softmax")
    pairs = sweep_points(loaded, [256], ["float32", "bfloat16"], named=False)
    assert [p.name for p in pairs] == ["fused_gelu@256-bfloat16", "softmax@256-float32", "softmax@256-bfloat16"]
    assert [p.point for p in pairs] == [{"size": 256, "dtype": "bfloat16"}, {"size": 256, "dtype": "float32"},
                                        {"size": 256, "dtype": "bfloat16"}]
    said = capsys.readouterr().err
    assert "1 pair(s) whose baseline's SWEEP does not take --sizes and --dtypes" in said, said
    assert "ch1/fused_gelu at float32 (it takes only the dtypes bfloat16, float16)" in said, said
    # the point is what the workload gets: 256 tokens of bf16 for fused_gelu
    w = pairs[0].workload(seed=1, device="cpu", quick=True)
    assert w.inputs["x"].shape[0] == 256 and str(w.inputs["x"].dtype) == "torch.bfloat16"
    assert sweep_points(loaded[:1], [256], None, named=False) == (
        "nothing to sweep: 1 pair(s) whose baseline's SWEEP does not take --sizes (--list says what each pair sweeps)")
    # a value given twice is one point, not two rows of one name
    swept = sweep_points(loaded[2:], [256, 256], ["float32", "float32"], named=False)
    assert [p.name for p in swept] == ["softmax@256-float32"]


def test_the_sweep_figure_draws_the_ceiling_the_report_applied():
    """sweep.png's dashed line is the ceiling named by the variants (a bf16 run against the bf16 rate), and none
    where the report applied none (a working set that fits in cache)."""
    from common.figures import sweep_ceilings
    peaks = {"copy_gbps": 3000.0, "matmul_tflops": {"fp32": 50.0, "bf16": 750.0}}
    bf16 = [{"baseline": {"name": "baseline", "ceiling": "matmul_tflops.bf16"}, "variants": []}]
    cached = [{"baseline": {"name": "baseline", "ceiling": None}, "variants": []}]
    assert sweep_ceilings(bf16, peaks) == [("matmul_tflops.bf16", 750.0)]
    assert sweep_ceilings(cached, peaks) == []


def test_compare_says_when_two_runs_swept_different_points(sweep_run):
    from common.report import compare_runs
    _, out = sweep_run
    new = json.loads((out / "results.json").read_text())
    old = {**new, "pairs": new["pairs"] + [{**new["pairs"][0], "name": "softmax@2048-float32",
                                             "point": {"size": 2048, "dtype": "float32"}}]}
    text, regressions = compare_runs(old, new)
    assert "different sweep points" in text and "softmax@2048-float32" in text and regressions >= 1
