"""The README's pair example runs as printed, and the profiling wrappers work without nsys."""
import json
import re
import subprocess
import sys

from conftest import ROOT


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


# Imports a harness function may make where it runs, each for its reason: an optional or heavy package loaded
# only when used (matplotlib, nvtx, pynvml, the C++ extension builder), torch kept out of `import common`, and
# the CLI and the figures kept out of reading a report.
LAZY_IMPORTS = {"matplotlib", "matplotlib.pyplot", "nvtx", "pynvml", "torch.utils", "torch", "common.cli",
                "common.figures"}


def test_no_harness_function_is_over_60_lines_or_imports_but_for_a_reason():
    """Issue 25's shape of common/: a reader follows functions of a screen at most, and its imports sit at the top
    of each module except those in LAZY_IMPORTS; a longer function or another import inside one fails here."""
    import ast
    long, lazy = [], []
    for path in sorted((ROOT / "common").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
            if node.end_lineno - node.lineno + 1 > 60:
                long.append(where)
            lazy += [f"{where} imports {name}" for inner in ast.walk(node)
                     for name in ([inner.module] if isinstance(inner, ast.ImportFrom) else
                                  [a.name for a in inner.names] if isinstance(inner, ast.Import) else [])
                     if name not in LAZY_IMPORTS]
    assert not long, long
    assert not lazy, lazy
