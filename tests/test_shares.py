"""A share of a ceiling is printed only where that ceiling applies; a pair that needs more GPUs than
are visible is skipped before any process starts."""
import types

import torch

from common.pair import Workload
from common.physics import achieved, suspect_reason

PEAKS = {"device_type": "cuda", "copy_gbps": 3000.0, "h2d_gbps": 50.0,
         "matmul_tflops": {"fp32": 50.0, "tf32": 360.0, "bf16": 700.0}}
L2 = 50 << 20
X = torch.zeros(1)


def test_no_share_for_a_precision_whose_rate_was_not_measured():
    w = Workload(inputs={"x": X}, flops=2 * 8192**3, bytes_moved=3 * 2 * 8192**2)
    out = achieved(w, 1.0, "compute", "fp8", PEAKS, cache=L2)   # 1100 TFLOP/s: an fp8 GEMM
    assert out["pct_of_ceiling"] is None and "fp8" in out["ceiling_note"]
    bf16 = achieved(w, 2.0, "compute", "bf16", PEAKS, cache=L2)  # 550 TFLOP/s of 700
    assert 78 < bf16["pct_of_ceiling"] < 79 and bf16["ceiling"] == "matmul_tflops.bf16"


def test_a_variant_that_changed_the_algorithm_is_rated_on_its_bytes():
    # a diagonal matmul done as a broadcast multiply: the baseline's 2n^3 FLOPs "at" 45x the fp32 rate
    n = 8192
    w = Workload(inputs={"x": X}, flops=2 * n**3, bytes_moved=3 * 4 * n**2)
    out = achieved(w, 0.5, "compute", "fp32", PEAKS, cache=L2)
    assert out["ceiling"] == "copy_gbps" and 50 < out["pct_of_ceiling"] < 55  # 805 MB in 0.5 ms of 3000 GB/s
    assert "less arithmetic" in out["ceiling_note"]


def test_a_share_above_the_ceiling_s_noise_is_dropped_with_the_reason():
    w = Workload(inputs={"x": X}, bytes_moved=4 << 30)
    within = achieved(w, 4 * 2**30 / 3150e9 * 1e3, "memory", "fp32", PEAKS, cache=L2)  # 105%
    assert 104 < within["pct_of_ceiling"] < 106
    above = achieved(w, 4 * 2**30 / 3600e9 * 1e3, "memory", "fp32", {**PEAKS, "device_type": "cpu"}, cache=L2)
    assert above["pct_of_ceiling"] is None and "120%" in above["ceiling_note"] and "CPU" in above["ceiling_note"]


def test_the_memory_floor_holds_between_one_and_four_times_the_cache():
    # 128 MB at most 50 MB of which can sit in L2: at least 78 MB must cross DRAM, 0.026 ms at 3000 GB/s
    w = Workload(inputs={"x": X}, bytes_moved=128e6)
    assert suspect_reason(0.013, w, "memory", PEAKS, "fp32", False, cache=int(50e6))  # 4.8 TB/s "effective"
    assert suspect_reason(0.045, w, "memory", PEAKS, "fp32", False, cache=int(50e6)) is None
    assert suspect_reason(1e-6, Workload(inputs={"x": X}, bytes_moved=1e6), "memory", PEAKS, "fp32", False,
                          cache=int(50e6)) is None  # fits in cache: no floor


def test_a_pair_needing_more_gpus_than_visible_is_skipped_before_it_starts(monkeypatch):
    from common.pair import Pair
    pair = types.SimpleNamespace(devices=("cuda", "cpu"), nproc=2,
                                 baseline=types.SimpleNamespace(cannot_run=lambda device_type: None))
    assert Pair.cannot_run(pair, "cuda", gpus=1) == "needs 2 GPUs; 1 visible"
    assert Pair.cannot_run(pair, "cpu", gpus=0) is None          # Gloo processes on a CPU: fine
    pair.nproc = 1
    assert Pair.cannot_run(pair, "cuda", gpus=1) is None
