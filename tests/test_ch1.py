"""Chapter 1 on the CPU: every pair's CPU path verifies, and the scripts run end to end."""
import json
import os

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def ch1_run(tmp_path_factory):
    from conftest import bench
    out = tmp_path_factory.mktemp("ch1")
    proc = bench("--chapter", "1", "--quick", "--device", "cpu", "--output", str(out))
    return proc, json.loads((out / "results.json").read_text())


def test_every_cpu_path_verifies(ch1_run):
    proc, doc = ch1_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran = 0
    for p in doc["pairs"]:
        if p["status"] == "skipped":
            assert "CUDA" in p["error"]
            continue
        assert p["status"] == "ok", p
        for v in p["variants"]:
            if v.get("skipped"):
                continue
            assert v["verified"] and v["speedup"] > 0, (p["name"], v)
            ran += 1
    assert ran >= 5  # batched_gemm, coalescing, preallocation, tensor_cores (tf32), fused_gelu


def test_gpu_only_pairs_are_skipped_with_a_reason(ch1_run):
    _, doc = ch1_run
    skipped = {p["name"]: p["error"] for p in doc["pairs"] if p["status"] == "skipped"}
    assert {"pinned_memory", "vectorization", "double_buffering"} <= set(skipped)
    for name, why in skipped.items():  # the reason a reader sees: what the pair needs, and what this run is on
        assert "needs CUDA" in why and "CPU" in why, (name, why)


def test_gpu_only_variants_of_a_cpu_pair_are_skipped_with_a_reason(ch1_run):
    """fused_gelu runs on a CPU, its Triton variant (chapter 13's GEMM with the epilogue) only on a GPU:
    the variant is found, skipped with the reason, and the rest of the pair still runs."""
    _, doc = ch1_run
    fused = {v["name"]: v for p in doc["pairs"] if p["name"] == "fused_gelu" for v in p["variants"]}
    assert fused["optimized_fused_gelu"]["verified"] and not fused["optimized_fused_gelu"].get("skipped")
    why = fused["optimized_fused_gelu_triton"].get("skipped")
    assert why and "needs CUDA" in why, why


def test_performance_basics_reports_goodput(capsys):
    from ch1 import performance_basics
    r = performance_basics.main(["--steps", "3", "--device", "cpu"])
    line = capsys.readouterr().out
    assert "goodput=" in line and "(useful=" in line and "total=" in line
    assert r["total_s"] > 0 and r["useful_s"] > 0


def test_performance_basics_optimized_runs_every_cpu_test(tmp_path, capsys):
    from ch1 import performance_basics_optimized as pbo
    r = pbo.main(["--steps", "3", "--repeats", "2", "--device", "cpu", "--json", str(tmp_path / "pb.json")])
    out = capsys.readouterr().out
    for header in ("Test 1", "Test 2", "Test 2b", "Test 3: skipped", "Test 4"):
        assert header in out
    assert len(r["test2"]["speedup_runs"]) == 2 and len(r["test2b"]["runs_ms_per_iter"]) == 2
    assert [row["batch"] for row in r["test4"]] == [32, 64, 128, 256, 512]
    assert json.loads((tmp_path / "pb.json").read_text())["test2"]["batch"] == 32


def test_roofline_analysis_classifies_and_plots(tmp_path):
    from ch1 import roofline_analysis
    rows = roofline_analysis.main(["--device", "cpu", "--out", str(tmp_path / "roof.png")])
    bounds = {r["name"].split()[0]: r["bound"] for r in rows}
    assert bounds == {"vector": "memory-bound", "matmul": "compute-bound"}
    assert (tmp_path / "roof.png").read_bytes()[:4] == b"\x89PNG"


def test_every_ch1_file_runs_as_a_script():
    """`python ch1/<file>.py` must find the repository without PYTHONPATH: every file answers --help from
    another folder, with the repository on no path (conftest.run_script: each child starts as `python FILE`
    would, its sys.path[0] the file's folder), and one pair file runs its pair there in a process of its own."""
    import subprocess
    import sys
    from conftest import run_script
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for f in sorted((ROOT / "ch1").glob("*.py")):
        if f.name != "__init__.py":
            r = run_script(f, "--help", timeout=120, cwd="/", env=env)
            assert r.returncode == 0 and r.stdout.startswith("usage:"), (f.name, r.returncode, r.stderr[-1500:])
    proc = subprocess.run([sys.executable, str(ROOT / "ch1" / "optimized_batched_gemm.py"), "--quick", "--device", "cpu"],
                          capture_output=True, text=True, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "optimized_batched_gemm" in proc.stdout


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_compare_profile_writes_a_trace_per_variant(tmp_path, device):
    """A trace per variant, holding its profiled calls. On a GPU each also holds their kernels and launch calls:
    batched_gemm is launch-bound, so its kernels are counted under the profiler just before its trace is taken,
    the order in which a trace once came out with neither (common.profiling.capture._profiler)."""
    import torch
    from collections import Counter
    from ch1.compare import profile
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    rc = profile("torch", ["--quick", "--pair", "batched_gemm", "--device", device, "--output", str(tmp_path)])
    assert rc == 0
    traces = sorted(tmp_path.glob("*.trace.json"))
    assert [t.name for t in traces] == ["ch1__batched_gemm__baseline.trace.json",
                                        "ch1__batched_gemm__optimized_batched_gemm.trace.json"]
    for t in traces:
        events = json.loads(t.read_text())["traceEvents"]
        cats = Counter(e.get("cat") for e in events)
        label = t.name.removesuffix(".trace.json").replace("__", "/")
        calls = [e for e in events if e.get("name") == label and e.get("cat") == "user_annotation"]
        assert len(calls) == 5, (t.name, dict(cats))   # the five profiled calls, each in its host range
        if device == "cuda":
            assert cats["kernel"] >= 5 and cats["cuda_runtime"] >= 5, (t.name, dict(cats))


def test_compare_profile_ncu_reports_no_kernel_counts(tmp_path):
    """Under ncu, which holds the profiling interface, torch.profiler sees no GPU work: the launch-bound pair's kernel
    and launch counts, which a plain run reports, are left out rather than read as 0. The report and its
    speed-of-light rows are written, and both variants verify."""
    import csv
    import shutil
    import torch
    from ch1.compare import profile
    if not torch.cuda.is_available() or shutil.which("ncu") is None:
        pytest.skip("needs a CUDA GPU and ncu")
    assert profile("ncu", ["--quick", "--pair", "batched_gemm", "--output", str(tmp_path)]) == 0
    pair, = json.loads((tmp_path / "results.json").read_text())["pairs"]
    for v in [pair["baseline"], *pair["variants"]]:
        assert v["verified"] and "kernels_per_call" not in v and "launch_calls_per_call" not in v, v
    assert (tmp_path / "ch1_batched_gemm.ncu-rep").is_file()
    rows = list(csv.DictReader((tmp_path / pair["ncu_sol_csv"]).open()))
    assert rows and all(r["Kernel Name"] for r in rows), rows[:2]


def pip_dry_run(cwd, requirements):
    """`pip install -r <requirements>` from `cwd`, offline and installing nothing: pip reads the file (and the
    files it includes) and resolves each requirement against what is installed."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps",
                           "--disable-pip-version-check", "-r", requirements],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_guide_pip_command_works_from_ch1(tmp_path):
    """The guide's `cd ch1 && pip install -r requirements.txt`, as ch1/README.md quotes it, run (as a dry run):
    pip reads every requirement of the repository's requirements.txt from it."""
    import re
    import sys
    readme = (ROOT / "ch1" / "README.md").read_text()
    (folder, path), = set(re.findall(r"`cd (\S+) && pip install -r (\S+)`", readme))
    expected = [re.match(r"[A-Za-z0-9_.\-]+", line)[0].lower()
                for line in (ROOT / "requirements.txt").read_text().splitlines()
                if line.strip() and not line.lstrip().startswith(("#", "-"))]
    assert expected, "the top-level requirements.txt names no package"
    proc = pip_dry_run(ROOT / folder, path)
    out = proc.stdout + proc.stderr
    assert "Could not open requirements file" not in out, out[-2000:]
    named = {m.lower() for m in re.findall(r"Requirement already satisfied: ([A-Za-z0-9_.\-]+)", out)}
    missing = re.search(r"satisfies the requirement ([A-Za-z0-9_.\-]+)", out)
    if proc.returncode != 0:
        # offline, pip stops at the first requirement not installed here: the file was still read
        assert missing and missing[1].lower() in expected, out[-2000:]
        pytest.skip(f"{missing[1]} is not installed in {sys.prefix}: cannot dry-run the rest offline")
    assert named == set(expected), out[-2000:]
    assert "from -r ../requirements.txt" in out   # read through ch1/requirements.txt's include

    # the check can fail: an include that points nowhere stops pip
    (tmp_path / "ch1").mkdir()
    (tmp_path / "ch1" / "requirements.txt").write_text("-r ../nowhere.txt\n")
    broken = pip_dry_run(tmp_path / "ch1", "requirements.txt")
    assert broken.returncode != 0 and "Could not open requirements file" in broken.stderr


IMAGE_KERNELS_CHECK = r"""
import torch
from ch1 import image_kernels as k
g = torch.Generator().manual_seed(0)
# planes of 40 x 120 = 4800 elements: more than one block per plane (BLOCK 1024), the last one partial
x = torch.rand(3, 3, 40, 120, generator=g)
x[1] = 0.25                                   # a constant image: std 0, clamped to 1/sqrt(n)
out = k.normalize_channels(x, torch.empty(x.shape, dtype=torch.bfloat16))
ref = k.reference_channels(x)
assert (out.float() - ref.float()).abs().max() <= 2 ** -6 * ref.float().abs().max(), "normalize_channels"
out = k.standardize_images(x, torch.full(x.shape, float("nan"), dtype=torch.bfloat16), torch.empty(2, 3))
ref = k.reference_images(x)
assert not out.float().isnan().any(), "every element written"
assert (out.float() - ref.float()).abs().max() <= 2 ** -6 * ref.float().abs().max(), "standardize_images"
assert out[1].float().abs().max() == 0, "a constant image standardizes to zeros"
table, idx = torch.randn(1000, 64, generator=g), torch.randint(0, 1000, (77,), generator=g)   # 77: a partial program
rows = k.gather_rows(table, idx, torch.full((77, 64), float("nan")))
assert torch.equal(rows, table[idx]), "gather_rows"
print("ok")
"""


def test_zero_copy_kernels_under_the_triton_interpreter_match_torch():
    """ch1/image_kernels.py on the CPU (TRITON_INTERPRET=1): the per-channel normalization and the two-pass
    per-image standardization (more than one block per image, a partial last block, a constant image) equal
    the torch references within bf16 rounding, and the row gather (77 rows: a partial program) equals indexing.
    The pairs run the same kernels on pinned host memory."""
    from test_ch16 import _run_interpreted
    _run_interpreted(IMAGE_KERNELS_CHECK, timeout=300)


def test_the_gpu_scripts_of_the_new_topics_fail_in_one_line(tmp_path):
    """The zero-copy sweep and probe, the gradient-accumulation sweep and the preallocation profile: a bad
    argument, and (without a GPU) the missing GPU, each one `error:` line, exit 2, no traceback, no folder
    left behind."""
    from test_ch13 import no_gpu, one_error_line
    assert "does not divide" in one_error_line(["ch1/grad_accumulation_sweep.py", "--micro", "3", "--out", str(tmp_path)])
    if not no_gpu():
        pytest.skip("with a GPU these scripts run")
    for cmd in (["ch1/zero_copy_sweep.py", "--out", str(tmp_path / "zc")],
                ["ch1/grad_accumulation_sweep.py", "--out", str(tmp_path / "ga")],
                ["scripts/zero_copy_probe.py", str(tmp_path / "probe" / "p.md")],
                ["ch1/preallocation_profile.py", "--json", str(tmp_path / "prealloc.json")]):
        assert "needs a CUDA GPU" in one_error_line(cmd)
    assert not any(tmp_path.iterdir())
