"""Chapter 11 and the harness's multi-stream support, on the CPU (and the escaped-stream check on a GPU)."""
import json

import pytest
import torch

from common.overlap import overlap_pct
from common.timeline import draw_gantt, gpu_events


def test_overlap_is_placed_between_serial_and_ideal():
    st = {"serial_ms": 30.0, "ideal_ms": 12.0}
    assert overlap_pct(30.0, st) == 0.0
    assert overlap_pct(12.0, st) == 100.0
    assert overlap_pct(21.0, st) == 50.0
    assert overlap_pct(5.0, {"serial_ms": 5.0, "ideal_ms": 5.0}) is None


def test_gantt_reads_streams_and_copy_directions(tmp_path):
    trace = {"traceEvents": [
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": 0, "dur": 300, "args": {"stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 300, "dur": 350, "args": {"stream": 7}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "ts": 650, "dur": 300, "args": {"stream": 7}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": 310, "dur": 300, "args": {"stream": 9}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 10},
    ]}
    (tmp_path / "t.json").write_text(json.dumps(trace))
    events = gpu_events(trace)
    assert [e["kind"] for e in events] == ["HtoD", "kernel", "DtoH", "HtoD"]
    assert {e["stream"] for e in events} == {7, 9}
    assert draw_gantt(tmp_path / "t.json", tmp_path / "t.png", "test") == 4
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_ch11_pairs_are_listed_and_skipped_without_a_gpu(run_bench, tmp_path):
    proc = run_bench("--list", "--chapter", "11")
    assert proc.returncode == 0
    for name in ("stream_pipeline", "concurrent_gemms", "stream_alloc", "kv_prefetch"):
        assert name in proc.stdout
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the skip path is not taken")
    proc = run_bench("--chapter", "11", "--quick", "--output", str(tmp_path))
    doc = json.loads((tmp_path / "results.json").read_text())
    assert proc.returncode == 0
    assert all(p["status"] == "skipped" and "CUDA" in p["error"] for p in doc["pairs"])

# The escaped side-stream fixture (ch92) is checked in tests/test_trust.py.


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (builds ch11/tile_gemm.cu)")
def test_the_grouped_launch_computes_each_product_as_its_own_launch_does():
    """grouped_tile_gemm over products of different shapes, in any order, against tile_gemm on each one: equal bit
    for bit; a grid with more blocks than the table has tiles leaves every product's answer as it was; a table
    from mismatched lists is refused."""
    from ch11.baseline_concurrent_gemms import kernels
    ext = kernels()
    g = torch.Generator(device="cuda").manual_seed(3)
    shapes = [(128, 64, 512), (64, 192, 1024), (256, 128, 256), (64, 64, 2048)]
    a = [torch.randn(m, k, device="cuda", generator=g) for m, n, k in shapes]
    b = [torch.randn(k, n, device="cuda", generator=g) for m, n, k in shapes]
    want = [ext.tile_gemm(x, y, torch.empty(x.shape[0], y.shape[1], device="cuda")) for x, y in zip(a, b)]
    for order in ([0, 1, 2, 3], [3, 1, 0, 2]):
        outs = [torch.full((m, n), float("nan"), device="cuda") for m, n, k in shapes]
        table, tiles = ext.grouped_table([a[i] for i in order], [b[i] for i in order], [outs[i] for i in order])
        assert tiles == sum((m // 64) * (n // 64) for m, n, k in shapes)
        ext.grouped_tile_gemm(table, tiles + 64)
        torch.cuda.synchronize()
        assert all(torch.equal(o, r) for o, r in zip(outs, want))
    with pytest.raises(RuntimeError, match="as many"):
        ext.grouped_table(a, b[:2], want)
