"""The collective ceilings' measurement runs under torchrun (Gloo on the CPU here, NCCL on GPUs)."""
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


def test_a_small_collective_is_held_to_the_small_message_latency_and_a_large_one_to_p2p():
    peaks = {"copy_gbps": 3000.0, "p2p_gbps": 400.0, "matmul_tflops": {"bf16": 700.0},
             "nccl": {"allreduce_small_us": 25.0, "allreduce_busbw_gbps": 300.0}}
    x = torch.zeros(1)
    small = Workload(inputs={"x": x}, collective="all_reduce", message_bytes=64 << 10, bytes_moved=64 << 10)
    r = achieved(small, 0.010, "link", "bf16", peaks, world_size=2)      # 10 us against NCCL's 25 us
    assert r["ceiling"] == "nccl.allreduce_small_us" and abs(r["pct_of_ceiling"] - 250.0) < 1e-6
    large = Workload(inputs={"x": x}, collective="all_reduce", message_bytes=256 << 20, bytes_moved=256 << 20)
    r = achieved(large, 1.0, "link", "bf16", peaks, world_size=2)
    assert r["ceiling"] == "p2p_gbps"
    assert abs(r["busbw_gbps"] - (256 << 20) / 1e-3 / 1e9) < 1e-6           # 2(n-1)/n = 1 for two ranks
    assert abs(r["pct_of_ceiling"] - 100 * r["busbw_gbps"] / 400.0) < 1e-6
