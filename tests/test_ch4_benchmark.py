"""ch4/nvshmem_vs_nccl_benchmark.py under torchrun on Gloo: the NCCL-equivalent sweep, verified, with
its JSON and plot; symmetric memory is reported unavailable rather than silently missing."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_allreduce_sweep_on_gloo_writes_verified_json_and_plot(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")  # the Gloo path, even on a GPU machine
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(ROOT / "ch4" / "nvshmem_vs_nccl_benchmark.py"), "--sizes", "4K", "64K", "--iters", "3",
                           "--output", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "symmetric memory is unavailable" in proc.stdout
    doc = json.loads((tmp_path / "allreduce.json").read_text())
    assert doc["world_size"] == 2 and doc["dist_backend"] == "gloo"
    assert [(r["method"], r["bytes"]) for r in doc["results"]] == [("gloo", 4096), ("gloo", 65536)]
    for r in doc["results"]:
        assert r["verified"] and r["us"] > 0
        assert abs(r["busbw_gbps"] - r["algbw_gbps"]) < 1e-9          # 2(n-1)/n = 1 for n = 2
        assert abs(r["algbw_gbps"] - r["bytes"] / (r["us"] * 1e-6) / 1e9) < 1e-6 * r["algbw_gbps"]
    off = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    assert doc["env"] == {k: os.environ.get(k, v) for k, v in off.items()}   # multicast off unless the caller chose
    assert "default" in doc["symm_unavailable"]
    assert (tmp_path / "allreduce.png").read_bytes()[:4] == b"\x89PNG"


def test_sizes_parse_and_sweep_by_device():
    sys.path.insert(0, str(ROOT))
    from ch4.nvshmem_vs_nccl_benchmark import default_sizes, parse_size
    assert [parse_size(s) for s in ("4K", "64KiB", "1M", "256MB", "1G", "512")] == \
        [4096, 65536, 1 << 20, 256 << 20, 1 << 30, 512]
    gpu = default_sizes("cuda", quick=False)
    assert gpu[0] == 4 << 10 and gpu[-1] == 256 << 20 and all(b == 4 * a for a, b in zip(gpu, gpu[1:]))
    assert default_sizes("cpu", quick=True)[-1] == 64 << 10
