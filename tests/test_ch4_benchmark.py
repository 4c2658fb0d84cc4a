"""ch4/nvshmem_vs_nccl_benchmark.py under torchrun on Gloo: the NCCL-equivalent sweep, verified, with
its JSON and plot; symmetric memory is reported unavailable rather than silently missing. Times come
from a clock the test controls, so the reported times and bandwidths are checked against known values."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import run_script

ROOT = Path(__file__).resolve().parent.parent


# Under torchrun, the benchmark with a clock this test controls (the harness's timer reads it): each
# all-reduce call advances it by a known time, 250 us on rank 0 and 400 us on rank 1, except that every
# tenth call on rank 1 takes 4 ms. A sample is a batch of calls, and most samples hold no slow call, so the
# median is 400 us (a mean would read over 700), and every reported time and rate is known in advance.
FAKE_CLOCK = """
import os, sys, types
import ch4.nvshmem_vs_nccl_benchmark as bench
import common.timing
rank = int(os.environ["RANK"])
clock = types.SimpleNamespace(t=1000.0, calls=0)
common.timing.time = types.SimpleNamespace(perf_counter=lambda: clock.t)   # the harness's timer reads this clock
real_methods = bench.methods

def ticking(make):
    def make_ticking(x):
        call = make(x)
        def tick():
            clock.calls += 1
            clock.t += 250e-6 if rank == 0 else 4e-3 if clock.calls % 10 == 0 else 400e-6
            return call()
        return tick
    return make_ticking

bench.methods = lambda *a: [(name, label, ticking(make)) for name, label, make in real_methods(*a)]
sys.exit(bench.main(sys.argv[1:]))
"""


def test_allreduce_sweep_on_gloo_reports_the_slowest_ranks_time_and_nccl_tests_bandwidth(tmp_path):
    shim = tmp_path / "fake_clock.py"
    shim.write_text(FAKE_CLOCK)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")  # the Gloo path, even on a GPU machine
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(shim), "--sizes", "4K", "64K", "--budget", "0.3", "--output", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "symmetric memory is unavailable" in proc.stdout
    doc = json.loads((out / "allreduce.json").read_text())
    assert doc["world_size"] == 2 and doc["dist_backend"] == "gloo"
    assert [(r["method"], r["bytes"]) for r in doc["results"]] == [("gloo", 4096), ("gloo", 65536)]
    # nccl-tests: algbw = S / t; busbw = algbw x 2(n-1)/n, which is algbw itself for n = 2.
    # 4096 B / 400 us = 10.24 MB/s; 65536 B / 400 us = 163.84 MB/s (rank 1, the slower, sets t)
    want_gbps = {4096: 0.01024, 65536: 0.16384}
    for r in doc["results"]:
        assert r["verified"]
        assert r["us"] == pytest.approx(400.0, rel=1e-9)
        assert r["algbw_gbps"] == pytest.approx(want_gbps[r["bytes"]], rel=1e-9)
        assert r["busbw_gbps"] == pytest.approx(want_gbps[r["bytes"]], rel=1e-9)
        assert r["timer"] == "cpu_wall" and r["samples"] >= 10 and r["median_ci_pct"] == pytest.approx(0.0, abs=1e-6)
    off = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    assert doc["env"] == {k: os.environ.get(k, v) for k, v in off.items()}   # multicast off unless the caller chose
    assert "default" in doc["symm_unavailable"]
    assert (out / "allreduce.png").read_bytes()[:4] == b"\x89PNG"


# Every sum wrong on every rank, and rank 0's JSON 3 s slow to write: the other rank is done first.
WRONG_SUMS = """
import json, os, sys, time, types
import ch4.nvshmem_vs_nccl_benchmark as bench
right = bench.expected_sum
bench.expected_sum = lambda numel, world, device: right(numel, world, device) + 1
if os.environ["RANK"] == "0":
    bench.json = types.SimpleNamespace(loads=json.loads, dumps=lambda *a, **k: (time.sleep(3), json.dumps(*a, **k))[1])
sys.exit(bench.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("part", [False, True], ids=["a run", "a driver's part"])
def test_wrong_sums_are_written_when_the_other_rank_finishes_first(tmp_path, part):
    # While every rank returned 1 on a wrong sum, the other rank's exit had torchrun stop rank 0 before it wrote
    # the report (a run) or its part (so the driver wrote no report). A run's report says WRONG and fails; a
    # part is written and exits 0, and the driver's report fails it.
    shim = tmp_path / "wrong_sums.py"
    shim.write_text(WRONG_SUMS)
    out = tmp_path / "out"
    where = ["--part", str(tmp_path / "part.json")] if part else ["--output", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(shim), "--sizes", "4K", "--budget", "0.3", *where],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert "WRONG RESULT" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.returncode == (0 if part else 1), proc.stdout[-2000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "part.json" if part else out / "allreduce.json").read_text())
    assert [r["verified"] for r in doc["results"]] == [False]


def test_a_wrong_row_fails_the_report_that_a_part_passed_on():
    # a part exits 0 with its wrong rows in it (the test above); the driver's report of them must still fail
    sys.path.insert(0, str(ROOT))
    from ch4.nvshmem_vs_nccl_benchmark import exit_status, merge
    right, wrong = ({"world_size": 2, "results": [{"bytes": 4096, "verified": v}], "symm_unavailable": {}}
                    for v in (True, False))
    assert exit_status(merge([right, right])) == 0
    assert exit_status(merge([right, wrong])) == 1 and exit_status(merge([wrong])) == 1


def test_one_process_is_one_line_before_any_folder(tmp_path):
    # an all-reduce over one process exchanges nothing (busbw's 2(n-1)/n is 0), and NVSHMEM's rendezvous raises
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    script, out = str(ROOT / "ch4" / "nvshmem_vs_nccl_benchmark.py"), tmp_path / "out"
    for cmd in ([sys.executable, script, "--nproc", "1", "--output", str(out)],
                [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", script,
                 "--output", str(out)]):
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert proc.returncode != 0 and len(lines) == 1 and "2 or more processes" in lines[0], proc.stderr[-2000:]
        assert 'nvshmem_vs_nccl_benchmark.py", line' not in proc.stderr and not out.exists(), proc.stderr[-2000:]


def test_an_output_that_is_a_file_is_one_line_before_any_process(tmp_path):
    # it was checked when rank 0 wrote the report: the whole sweep ran, then rank 0 crashed on mkdir
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    if torch.cuda.device_count() == 1:   # one GPU refuses two processes first (the test below): run them on the CPU
        env["CUDA_VISIBLE_DEVICES"] = ""
    script, taken = str(ROOT / "ch4" / "nvshmem_vs_nccl_benchmark.py"), tmp_path / "a_file"
    taken.write_text("not a folder")
    for cmd in ([sys.executable, script, "--nproc", "2", "--quick", "--output", str(taken)],
                [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", script,
                 "--quick", "--output", str(taken)]):
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert proc.returncode != 0 and len(lines) == 1 and "is not a folder" in lines[0], proc.stderr[-2000:]
        # torchrun prints its own traceback around a rank's exit 2; none may come from the script
        assert 'nvshmem_vs_nccl_benchmark.py", line' not in proc.stderr and "writing into" not in proc.stdout
        assert taken.read_text() == "not a folder"


@pytest.mark.skipif(torch.cuda.device_count() != 1, reason="needs exactly one GPU visible")
def test_two_processes_on_one_gpu_are_one_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(ROOT / "ch4" / "nvshmem_vs_nccl_benchmark.py"), "--output", str(tmp_path / "out")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    want = ["error: 2 processes need 2 GPUs, one each; 1 visible"]
    assert proc.returncode != 0 and lines == want, proc.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_two_runs_in_the_same_second_get_a_folder_each(tmp_path):
    import datetime
    sys.path.insert(0, str(ROOT))
    from ch4.nvshmem_vs_nccl_benchmark import new_run_folder
    now = datetime.datetime(2026, 3, 4, 5, 6, 7, tzinfo=datetime.timezone.utc)
    first, second = (new_run_folder("ch4-allreduce", runs=tmp_path, now=now) for _ in range(2))
    assert first.name == "20260304-050607-ch4-allreduce" and second.name == "20260304-050607-ch4-allreduce-2"
    assert first.is_dir() and second.is_dir() and sorted(tmp_path.iterdir()) == [first, second]


def test_sizes_parse_and_sweep_by_device():
    sys.path.insert(0, str(ROOT))
    from ch4.nvshmem_vs_nccl_benchmark import default_sizes, parse_size
    assert [parse_size(s) for s in ("4K", "64KiB", "1M", "256MB", "1G", "512")] == \
        [4096, 65536, 1 << 20, 256 << 20, 1 << 30, 512]
    gpu = default_sizes("cuda", quick=False)
    assert gpu[0] == 4 << 10 and gpu[-1] == 256 << 20 and all(b == 4 * a for a, b in zip(gpu, gpu[1:]))
    assert default_sizes("cpu", quick=True)[-1] == 64 << 10


@pytest.mark.parametrize("budget", ["0", "-1", "nan"])
def test_a_budget_that_is_not_a_positive_number_of_seconds_is_refused(budget):
    proc = run_script(ROOT / "ch4" / "nvshmem_vs_nccl_benchmark.py", "--budget", budget, timeout=120)
    assert proc.returncode == 2 and "a budget is a positive number of seconds" in proc.stderr, proc.stderr


@pytest.mark.parametrize("sizes", [["3X"], ["4K", "0"], ["K"]])
def test_a_bad_size_is_one_line_before_any_process_or_folder(tmp_path, sizes):
    out = tmp_path / "run"
    proc = run_script(ROOT / "ch4" / "nvshmem_vs_nccl_benchmark.py", "--output", str(out), "--sizes", *sizes,
                      timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "a size is a positive byte count" in lines[0], proc.stderr
    assert not out.exists()   # no torchrun was started and no report folder made
