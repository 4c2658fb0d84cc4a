"""The README's pair example runs as printed, and the profiling wrappers work without nsys."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, stand_ins


def test_readme_pair_example_runs_through_the_harness(run_bench, tmp_path):
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Write your own pair"):text.index("## What a run writes")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    chapter = tmp_path / "ch77"
    chapter.mkdir()
    for code in blocks:
        name = code.splitlines()[0].split("/")[-1].strip()
        (chapter / name).write_text(code)
    out = tmp_path / "out"
    proc = run_bench("--root", str(tmp_path), "--chapter", "77", "--quick", "--device", "cpu", "--output", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (pair,) = json.loads((out / "results.json").read_text())["pairs"]
    assert pair["name"] == "scale_add" and pair["variants"][0]["verified"]


def test_torch_trace_wrapper_writes_a_trace(tmp_path):
    script = tmp_path / "work.py"
    script.write_text("import torch\nx = torch.randn(64, 64)\nprint((x @ x).sum().item() != 0)\n")
    out = tmp_path / "trace.json"
    proc = subprocess.run([sys.executable, "-m", "common.profiling.torch_trace", str(out), str(script)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = json.loads(out.read_text())["traceEvents"]
    names = {e.get("name", "") for e in events}
    assert any(n in ("aten::matmul", "aten::mm") for n in names), sorted(names)[:40]   # the script's x @ x was traced


def test_profile_cuda_refuses_a_missing_binary():
    proc = subprocess.run(["bash", str(ROOT / "common/profiling/profile_cuda.sh"), "/no/such/binary", "x"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().startswith("error:")


def test_readme_module_map_names_every_harness_module_and_no_other():
    """The README's table of common/ lists each module (a package by its folder) once, and nothing that is
    not there: a module added, renamed or removed without the map fails here."""
    text = (ROOT / "README.md").read_text().split("## The harness, module by module", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(common/[\w/.]+)` \|", text, flags=re.M)
    common = ROOT / "common"
    actual = {f"common/{p.name}" for p in common.glob("*.py") if p.name != "__init__.py"}
    actual |= {f"common/{d.name}/" for d in common.iterdir() if (d / "__init__.py").exists()}
    assert len(listed) == len(set(listed)), listed
    assert set(listed) == actual, (sorted(set(listed) - actual), sorted(actual - set(listed)))


# The imports a harness function makes where it runs, each for its reason: an optional or heavy package loaded only
# when used (matplotlib, nvtx, pynvml, the C++ extension builder), torch kept out of `import common`, and the CLI
# and the figures kept out of reading a report. (file, function): modules.
LAZY_IMPORTS = {
    ("common/__init__.py", "run_pair_file"): {"common.cli"},             # import common loads no torch
    ("common/cuda_ext.py", "load_extension"): {"torch.utils"},           # cpp_extension: slow to import
    ("common/nvtx.py", "range"): {"nvtx"},                               # optional package
    ("common/pair.py", "per_call"): {"torch"},                           # import common loads no torch
    ("common/pair.py", "check_workload"): {"torch"},
    ("common/report.py", "draw_figures"): {"common.figures"},            # matplotlib, optional
    ("common/timeline.py", "draw_gantt"): {"matplotlib", "matplotlib.pyplot"},
    ("common/timing.py", "gpu_state"): {"pynvml"},                       # optional package
}


def test_no_harness_function_is_over_60_lines_or_imports_but_for_a_reason():
    """Issue 25's shape of common/: a reader follows functions of a screen at most, and imports sit at the top
    of each module except those in LAZY_IMPORTS; a longer function, another import inside one, or an entry of
    LAZY_IMPORTS that no longer happens fails here."""
    import ast
    long, found = [], {}
    for path in sorted((ROOT / "common").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if node.end_lineno - node.lineno + 1 > 60:
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
            body = [n for stmt in node.body for n in ast.walk(stmt)]   # nested functions count once, as their own
            nested = {id(n) for f in body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                      for n in ast.walk(f) if n is not f}
            for inner in body:
                if id(inner) in nested:
                    continue
                names = [inner.module] if isinstance(inner, ast.ImportFrom) else \
                    [a.name for a in inner.names] if isinstance(inner, ast.Import) else []
                found.setdefault((str(path.relative_to(ROOT)), node.name), set()).update(names)
    found = {k: v for k, v in found.items() if v}
    assert not long, long
    assert found == LAZY_IMPORTS, ({k: v for k, v in found.items() if LAZY_IMPORTS.get(k) != v},
                                   {k: v for k, v in LAZY_IMPORTS.items() if found.get(k) != v})


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "scripts").glob("*.sh")))
def test_every_shell_script_explains_itself_with_help_and_runs_nothing(tmp_path, script):
    """--help prints the script's header comment and exits 0; a python3 or make it would have started leaves a mark
    (scripts/h100_ch16.sh once took --help for its output folder and began the GPU session)."""
    marks = {tool: f"touch {tmp_path}/ran\n" for tool in ("python3", "python", "make", "mpirun", "nvcc")}
    path = ROOT / "scripts" / script
    env = {**os.environ, "PATH": stand_ins(tmp_path, marks), "OUT": str(tmp_path / "out")}
    proc = subprocess.run(["bash", str(path), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in env.items() if k != "PYTHON"})
    header = path.read_text().splitlines()[1].lstrip("# ")
    assert proc.returncode == 0 and proc.stdout.startswith(header), (proc.stdout[:500], proc.stderr[-500:])
    assert "set -" not in proc.stdout and not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_a_calls_gpu_time_is_the_union_of_what_was_launched_inside_it():
    """call_device_ms on profiler events made by hand (gpu_busy_ms's GPU test measures real ones): two calls with
    a feed between them, each device event tied to its runtime call by id, as on torch 2.11. Call 0 launched two
    kernels that overlap (100-150 and 140-160 us: 60 us of GPU time, not 70); the feed, a fill of 230 us; call 1,
    one kernel of 30 us. Left out: a kernel whose id is a synchronize's (no launch), and the device's copies of
    two ranges (the call's own, and a region inside it whose id is also a launch's), which would count the GPU's
    time without kernels too. A call with no device work at all gives no figure."""
    from types import SimpleNamespace as Event
    from torch.autograd import DeviceType
    from common.profiling.capture import call_device_ms

    def event(name, device, start, end, id, annotation=False):
        return Event(name=name, device_type=DeviceType.CUDA if device else DeviceType.CPU, id=id,
                     is_user_annotation=annotation, time_range=Event(start=start, end=end))
    events = [event("harness.call", False, 0, 10, 1, True), event("harness.between", False, 12, 18, 2, True),
              event("harness.call", False, 20, 30, 3, True), event("aten::mul", False, 2, 5, 4),
              event("cudaLaunchKernel", False, 3, 3.5, 107), event("k", True, 100, 150, 107),
              event("cudaLaunchKernel", False, 4, 4.5, 108), event("k", True, 140, 160, 108),
              event("cudaMemsetAsync", False, 15, 15.5, 109), event("fill", True, 170, 400, 109),
              event("cuLaunchKernelEx", False, 23, 23.5, 110), event("k", True, 410, 440, 110),
              event("cudaDeviceSynchronize", False, 25, 26, 111), event("lost", True, 450, 900, 111),
              event("harness.call", True, 90, 160, 1, True), event("Compiled Region", True, 90, 170, 108, True)]
    assert call_device_ms(events, 2) == pytest.approx((0.060 + 0.030) / 2)
    assert call_device_ms(events, 3) is None   # not the calls it was asked for
    assert call_device_ms([e for e in events if e.id != 110], 2) is None   # call 1 ran nothing on the device


AFTER_A_PROFILE_THAT_RAISED = """
import torch
from torch.autograd import DeviceType
from common.profiling.capture import _profiler
x = torch.randn(1 << 20, device="cuda")
seen = []
for _ in range(3):
    try:
        with _profiler(cuda=True):
            x.mul_(0.5)
            torch.cuda.synchronize()
            raise RuntimeError("a profile that raised")
    except RuntimeError:
        pass
    with _profiler(cuda=True) as prof:   # started at once, as a trace after the kernel counts is
        x.add_(1.0)
        torch.cuda.synchronize()
    seen.append(sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA))
print(seen)
"""


def test_on_a_gpu_a_profile_that_raised_leaves_the_next_profile_its_kernels():
    """In a CUDA run's workers (TEARDOWN_CUPTI=1) Kineto detaches CUPTI inside the first CUDA call after a profile,
    and a profile started before that call sees no GPU work. common.profiling.capture._profiler makes CUDA calls
    for a moment after each profile, also after one whose body raised: the profile started right after it sees the
    add's kernel, three times out of three (without the wait: none)."""
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    env = {**os.environ, "TEARDOWN_CUPTI": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", AFTER_A_PROFILE_THAT_RAISED], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert len(seen) == 3 and min(seen) >= 1, (proc.stdout[-500:], proc.stderr[-1000:])
