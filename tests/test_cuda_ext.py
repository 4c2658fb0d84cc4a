"""benchmark.py compiles every extension the selected pairs load before the first pair starts
(common.cuda_ext.build_declared), so that no pair's wall time holds nvcc's. It finds them by reading the
pair files; these tests hold it to every pair file in the repository."""
import ast
import os
import time

from common.cuda_ext import declared, up_to_date
from conftest import ROOT


def pair_files_loading_extensions():
    return [p for d in sorted(ROOT.glob("ch*")) for p in sorted(d.glob("*.py"))
            if "load_extension(" in p.read_text()]


def test_every_extension_a_pair_file_loads_is_found_before_it_runs():
    files = pair_files_loading_extensions()
    assert files, "no pair file loads an extension: the test looks in the wrong place"
    for f in files:
        calls = [n for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", getattr(n.func, "attr", None)) == "load_extension"]
        specs = declared([f])
        # every call is found (benchmark.py only prebuilds what it finds), each with sources that exist
        assert len(specs) == len({ast.dump(c) for c in calls}), f"{f.relative_to(ROOT)}: a load_extension call " \
            "without literal arguments is not built ahead"
        for name, *sources in specs:
            assert all((ROOT / s).is_file() for s in sources), (f, name, sources)


def test_calls_with_computed_arguments_are_left_to_the_worker(tmp_path):
    f = tmp_path / "baseline_x.py"
    f.write_text('from common.cuda_ext import load_extension\n'
                 'a = load_extension("ext_a", "ch1/a.cu", "ch1/a_binding.cpp")\n'
                 'b = load_extension(NAME, "ch1/b.cu")\n'
                 'c = common.cuda_ext.load_extension("ext_a", "ch1/a.cu", "ch1/a_binding.cpp")\n')
    assert declared([f, f]) == [("ext_a", "ch1/a.cu", "ch1/a_binding.cpp")]


def test_a_library_older_than_a_header_it_includes_is_rebuilt(tmp_path, monkeypatch):
    import common.cuda_ext as ce
    monkeypatch.setattr(ce, "REPO_ROOT", tmp_path)
    (tmp_path / "k.cuh").write_text("// header\n")
    (tmp_path / "k.cu").write_text('#include "k.cuh"\n')
    lib = ce.build_dir("k", (9, 0)) / "k.so"
    assert not up_to_date(("k", "k.cu"), (9, 0))          # never built
    lib.parent.mkdir(parents=True)
    lib.write_text("")
    now = time.time()
    for f, age in ((tmp_path / "k.cu", 20), (tmp_path / "k.cuh", 20), (lib, 10)):
        os.utime(f, (now - age, now - age))
    assert up_to_date(("k", "k.cu"), (9, 0))
    os.utime(tmp_path / "k.cuh", (now, now))                # the header changed after the build
    assert not up_to_date(("k", "k.cu"), (9, 0))
    os.utime(tmp_path / "k.cuh", (now - 20, now - 20))
    (tmp_path / "k.cu").write_text('#include "k.cuh"\n#include "cuda_fp16.h"\n')   # a toolkit header, not here
    os.utime(tmp_path / "k.cu", (now - 20, now - 20))
    assert up_to_date(("k", "k.cu"), (9, 0))
