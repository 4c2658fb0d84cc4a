"""ch13/graph_memory.py on a CPU: its error paths, its bookkeeping, and the measuring loop with fake memory readers."""
import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ch13 import graph_memory as gm  # noqa: E402
from ch13.baseline_compile_shapes import lengths  # noqa: E402

SCRIPT = str(ROOT / "ch13" / "graph_memory.py")


def script(*args):
    from conftest import run_script
    return run_script(SCRIPT, *args, timeout=120)


def test_help_works():
    r = script("--help")
    assert r.returncode == 0 and "--quick" in r.stdout and "--out" in r.stdout, r.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the script would run for real")
def test_without_a_gpu_one_error_line_and_no_folder(tmp_path):
    out = tmp_path / "graph_memory"
    for args in (["--out", str(out)], ["--out", str(out), "--strategy", "per_length"]):
        r = script(*args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "GPU" in lines[0], r.stderr
        assert r.stdout == "" and not out.exists()


def test_a_file_as_out_is_refused(tmp_path):
    f = tmp_path / "a_file"
    f.write_text("")
    r = script("--out", str(f))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"error: --out {f} is a file, not a folder"]


def test_without_triton_says_so(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "triton", None)  # None in sys.modules: `import triton` raises ImportError
    assert gm.main(["--out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "Triton" in err[0], err
    assert not (tmp_path / "g").exists()


def test_graph_counts_from_the_pairs_lengths():
    ts = lengths("cuda", quick=False)
    assert gm.graphs_so_far(ts, "per_length")[-1] == len(set(ts)) == 8
    assert gm.graphs_so_far(ts, "bucketed") == [1, 1, 2, 2, 2, 2, 3, 3]  # 100, 180 -> 256; ...; 580, 660 -> 768
    assert gm.graphs_so_far(ts, "eager") == [0] * len(ts)
    for t in ts:
        p = gm.padded_length(t, "bucketed")
        assert p % gm.BUCKET == 0 and t <= p < t + gm.BUCKET
    assert [gm.padded_length(t, "per_length") for t in ts] == ts
    assert gm.graphs_so_far(lengths("cuda", quick=True), "bucketed") == [1, 1, 1, 1]


@pytest.fixture
def fake_memory(monkeypatch):
    """The CUDA memory readers, replaced by a counter that grows with each read: the loop runs on the CPU."""
    reads = iter(range(1, 10_000))
    monkeypatch.setattr(gm, "memory_bytes", lambda: (next(reads) * gm.MIB, 2 * next(reads) * gm.MIB, 3 * gm.MIB))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: None)
    monkeypatch.setattr(gm, "compiled", lambda model: torch.no_grad()(model))  # no compile: the loop is the test


def test_measure_runs_every_strategy_and_the_outputs_are_written(fake_memory, tmp_path, capsys):
    runs = [gm.measure(s, quick=True, out=tmp_path, device="cpu") for s in gm.STRATEGIES]
    ts = lengths("cpu", quick=True)
    for s in runs:
        assert [r["length"] for r in s["rows"]] == ts
        assert [r["graphs"] for r in s["rows"]] == gm.graphs_so_far(ts, s["strategy"])
        assert s["snapshot"] is None  # a CPU run records no CUDA memory history
        json.dumps(s)
    assert "per_length length 17" in capsys.readouterr().err
    result = {"device": "cpu", "torch": torch.__version__, "quick": True, "config": runs[0]["config"],
              "bucket": gm.BUCKET, "calls_per_length": gm.CALLS_PER_LENGTH, "strategies": runs}
    gm.write_outputs(result, tmp_path / "out")
    md = (tmp_path / "out" / "graph_memory.md").read_text()
    assert md.count("\n| bucketed | ") == len(ts) and "- per_length: 4 graphs" in md and "against eager" in md
    assert json.loads((tmp_path / "out" / "graph_memory.json").read_text())["strategies"][2]["strategy"] == "bucketed"
    assert (tmp_path / "out" / "graph_memory.png").read_bytes()[:4] == b"\x89PNG"


def test_the_bucketed_step_matches_the_unpadded_model(monkeypatch):
    """Causal attention: the padded tail never reaches a real position, so the sliced output is the model's."""
    from ch13.baseline_compile_shapes import batches, workload
    monkeypatch.setattr(gm, "compiled", lambda model: torch.no_grad()(model))
    w = workload(0, "cpu", quick=True)
    model, step = w.inputs["model"], gm.make_step("bucketed", w.inputs["model"])
    with torch.no_grad():
        for x in batches(w):
            torch.testing.assert_close(step(x), model(x), rtol=1e-4, atol=1e-4)
