"""The collective ceilings' measurement runs under torchrun (Gloo on the CPU here, NCCL on GPUs), and
the shares held against them follow nccl-tests' definitions, checked on hand-worked numbers."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from common.pair import Workload
from common.peaks import collective_peaks
from common.physics import achieved


def test_all_reduce_ceilings_are_measured_over_two_processes():
    logged = []
    result = collective_peaks(2, "cpu", log=logged.append, extra=("--large-mib", "4", "--budget", "0.2"))
    assert result is not None, logged
    assert result["world_size"] == 2 and result["backend"] == "gloo"
    assert result["allreduce_busbw_gbps"] > 0 and result["allreduce_small_us"] > 0
    assert result["allreduce_bytes"] == 4 << 20 and result["allreduce_small_bytes"] == 8 << 10
    assert any("bus bandwidth" in line for line in logged)


# common.peaks_collective under torchrun with time_call replaced: each rank's all-reduce "takes" a time
# this test chose (the collective still runs, so the ranks stay in step), rank 1 slower than rank 0.
FAKE_TIMES = """
import os, sys, types
import common.peaks_collective as pc
rank = int(os.environ["RANK"])
times_ms = iter([(2.0, 3.0)[rank], (0.020, 0.050)[rank]])      # large, then small

def fake_time_call(fn, device, **kw):
    fn()
    return types.SimpleNamespace(median_ms=next(times_ms))

pc.time_call = fake_time_call
sys.exit(pc.main(sys.argv[1:]))
"""


def test_the_ceilings_are_the_slowest_ranks_with_nccl_tests_bus_bandwidth(tmp_path):
    root = Path(__file__).resolve().parent.parent
    shim, out = tmp_path / "fake_times.py", tmp_path / "nccl.json"
    shim.write_text(FAKE_TIMES)
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(shim), "--out", str(out), "--device", "cpu", "--large-mib", "4", "--small-kib", "8"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["allreduce_bytes"] == 4 << 20 and result["allreduce_small_bytes"] == 8 << 10
    # 4 MiB = 4,194,304 B in 3 ms (rank 1's, the slower) = 1.398101 GB/s algbw; x 2(n-1)/n = 1 for n = 2
    assert result["allreduce_busbw_gbps"] == pytest.approx(1.3981013333, rel=1e-9)
    assert result["allreduce_small_us"] == pytest.approx(50.0, rel=1e-9)       # rank 1's 0.050 ms


def test_a_small_collective_is_held_to_the_small_message_latency_and_a_large_one_to_p2p():
    peaks = {"copy_gbps": 3000.0, "p2p_gbps": 400.0, "matmul_tflops": {"bf16": 700.0},
             "nccl": {"allreduce_small_us": 25.0, "allreduce_busbw_gbps": 300.0}}
    x = torch.zeros(1)
    small = Workload(inputs={"x": x}, collective="all_reduce", message_bytes=64 << 10, bytes_moved=64 << 10)
    r = achieved(small, 0.030, "link", "bf16", peaks, world_size=2)      # 30 us against NCCL's 25 us
    assert r["ceiling"] == "nccl.allreduce_small_us" and r["pct_of_ceiling"] == pytest.approx(83.333333)
    large = Workload(inputs={"x": x}, collective="all_reduce", message_bytes=256 << 20, bytes_moved=256 << 20)
    r = achieved(large, 1.0, "link", "bf16", peaks, world_size=2)
    assert r["ceiling"] == "p2p_gbps"
    # 256 MiB = 268,435,456 B in 1 ms: algbw 268.435456 GB/s; busbw = algbw x 2(n-1)/n = algbw for n = 2
    assert r["algbw_gbps"] == pytest.approx(268.435456) and r["busbw_gbps"] == pytest.approx(268.435456)
    assert r["pct_of_ceiling"] == pytest.approx(67.108864)                  # 268.435456 of 400 GB/s


@pytest.mark.parametrize("collective, n, busbw_gbps", [
    ("all_reduce", 8, 234.881024),      # 134.217728 x 2 x 7 / 8 = x 1.75
    ("all_reduce", 4, 201.326592),      # x 2 x 3 / 4 = x 1.5
    ("all_gather", 8, 117.440512),      # x 7 / 8
    ("send_recv", 2, 134.217728),       # x 1
])
def test_bus_bandwidth_follows_nccl_tests_on_hand_worked_numbers(collective, n, busbw_gbps):
    peaks = {"copy_gbps": 3000.0, "p2p_gbps": 400.0, "matmul_tflops": {"bf16": 700.0}}
    w = Workload(inputs={"x": torch.zeros(1)}, collective=collective, message_bytes=256 << 20, bytes_moved=256 << 20)
    r = achieved(w, 2.0, "link", "bf16", peaks, world_size=n)               # 256 MiB in 2 ms: algbw 134.217728 GB/s
    assert r["algbw_gbps"] == pytest.approx(134.217728)
    assert r["busbw_gbps"] == pytest.approx(busbw_gbps)
    assert r["pct_of_ceiling"] == pytest.approx(busbw_gbps / 4.0)            # of 400 GB/s, in %


def test_dropping_ceilings_another_run_already_dropped_is_quiet(tmp_path):
    """Two runs (two test processes, or a user's two shells) sharing one cache may both drop it: the second
    finds nothing to drop, says nothing and does not fail. (One after the other here; at the same moment,
    the unlink itself is what tells the second run, with no exists() check to race.)"""
    from common.peaks import invalidate
    path, said = tmp_path / "cpu-x.json", []
    path.write_text("{}")
    invalidate(path, "beaten", log=said.append)
    assert not path.exists() and len(said) == 1 and "beaten" in said[0]
    invalidate(path, "beaten", log=said.append)
    assert len(said) == 1
