import pytest

from common.discover import UnknownSelection, chapter_dirs, load_pair, pair_files, select, unmatched_files
from common.pair import ContractError
from conftest import FIXTURES, ROOT


def test_chapters_and_pairs_are_found_by_file_name():
    assert {1, 4, 11, 13, 16} <= set(chapter_dirs(ROOT))
    pairs = pair_files(ROOT / "ch1")
    assert "batched_gemm" in pairs
    base, opts = pairs["batched_gemm"]
    assert base.name == "baseline_batched_gemm.py" and opts


def test_optimized_files_go_to_the_longest_matching_baseline(tmp_path):
    ch = tmp_path / "ch7"
    ch.mkdir()
    for f in ("baseline_gemm.py", "baseline_gemm_batched.py", "optimized_gemm.py",
              "optimized_gemm_tf32.py", "optimized_gemm_batched.py", "optimized_gemm_batched_strided.py"):
        (ch / f).write_text("")
    pairs = pair_files(ch)
    assert [p.name for p in pairs["gemm"][1]] == ["optimized_gemm.py", "optimized_gemm_tf32.py"]
    assert [p.name for p in pairs["gemm_batched"][1]] == ["optimized_gemm_batched.py",
                                                           "optimized_gemm_batched_strided.py"]


def test_unknown_chapter_and_pair_name_the_valid_choices():
    with pytest.raises(UnknownSelection, match="valid chapters: .*1"):
        select([99])
    with pytest.raises(UnknownSelection, match="valid pairs: .*batched_gemm"):
        select([1], ["no_such_pair"])
    assert select(None, ["ch1/batched_gemm"])[0][1] == "batched_gemm"


def test_a_chapter_without_pairs_is_not_an_empty_selection(tmp_path):
    for ch in ("ch2", "ch3"):
        (tmp_path / ch).mkdir()
    for f in ("baseline_x.py", "optimized_x.py"):
        (tmp_path / "ch3" / f).write_text("")
    with pytest.raises(UnknownSelection, match="^chapter 2 has no pairs yet; chapters with pairs: 3$"):
        select([2], root=tmp_path)
    assert [t[1] for t in select([3], root=tmp_path)] == ["x"]
    (tmp_path / "ch3" / "baseline_x.py").unlink()
    (tmp_path / "ch3" / "optimized_x.py").unlink()
    with pytest.raises(UnknownSelection, match="no pairs under"):
        select(None, root=tmp_path)


def test_optimized_files_outside_the_naming_rule_are_reported(tmp_path):
    ch = tmp_path / "ch7"
    ch.mkdir()
    for f in ("baseline_gemm.py", "optimized_gemm.py", "optimized_gemm_tf32.py", "optimized_gemm2.py",
              "optimized_gemmm.py", "optimized_conv.py"):
        (ch / f).write_text("")
    assert [p.name for p in pair_files(ch)["gemm"][1]] == ["optimized_gemm.py", "optimized_gemm_tf32.py"]
    messages = unmatched_files(ch)
    assert len(messages) == 3
    rule = "variants are named optimized_<pair>.py or optimized_<pair>_<suffix>.py"
    assert all(rule in m for m in messages)
    by_file = {m.split()[0]: m for m in messages}
    assert by_file["ch7/optimized_gemm2.py"].endswith("rename it optimized_gemm_2.py to make it a variant of gemm")
    assert by_file["ch7/optimized_gemmm.py"].endswith("rename it optimized_gemm_m.py to make it a variant of gemm")
    assert by_file["ch7/optimized_conv.py"].endswith("no baseline_conv.py beside it")
    warned = []
    select([7], root=tmp_path, warn=warned.append)
    assert warned == messages


def test_the_repository_has_no_stray_variants():
    assert [m for d in chapter_dirs(ROOT).values() for m in unmatched_files(d)] == []


def test_the_contract_is_checked(tmp_path):
    ch = tmp_path / "ch8"
    ch.mkdir()
    (ch / "baseline_bad.py").write_text("BOUND = 'fast'\ndef workload(seed, device, quick): pass\n"
                                        "def prepare(w): pass\n")
    (ch / "optimized_bad.py").write_text("def prepare(w): pass\n")
    with pytest.raises(ContractError, match="BOUND"):
        load_pair(8, "bad", ch / "baseline_bad.py", [ch / "optimized_bad.py"])
    (ch / "baseline_bad2.py").write_text("BOUND = 'memory'\ndef prepare(w): pass\n")
    with pytest.raises(ContractError, match="workload"):
        load_pair(8, "bad2", ch / "baseline_bad2.py", [ch / "optimized_bad.py"])


@pytest.mark.parametrize("baseline_extra, variant_text, message", [
    ("COMPARE = 'logit_margin'\n", "def prepare(w): pass\n", r"COMPARE='logit_margin', expected one of"),
    ("", "PRECISON = 'bf16'\ndef prepare(w): pass\n", r"defines PRECISON, which the harness does not read: PRECISION\?"),
    ("Compare = 'outputs'\n", "def prepare(w): pass\n", r"defines Compare, which the harness does not read: COMPARE\?"),
    ("", "COMPARE = 'outputs'\ndef prepare(w): pass\n", r"defines COMPARE, which the harness reads from the baseline only"),
    ("KIND = 'pitfall'\n", "def prepare(w): pass\n", r"defines KIND, which the harness reads from the optimized files only"),
    ("stages = 4\n", "def prepare(w): pass\n", r"stages must be a function"),
    ("SWEEP = {'rows': 'x'}\n", "def prepare(w): pass\n", r"SWEEP must be a dict with the keys size and/or dtype"),
    ("SWEEP = {'size': ''}\n", "def prepare(w): pass\n", r"SWEEP\['size'\] must say what a size counts"),
    ("SWEEP = {'dtype': ('int8',)}\n", "def prepare(w): pass\n", r"SWEEP\['dtype'\] must be a tuple of"),
    ("SWEEP = {'size': 'rows'}\n", "def prepare(w): pass\n", r"SWEEP names size, which workload\(\) does not take"),
    ("", "SWEEP = {'size': 'rows'}\ndef prepare(w): pass\n", r"defines SWEEP, which the harness reads from the baseline"),
])
def test_a_misspelt_or_misplaced_contract_name_is_one_line_at_load(tmp_path, baseline_extra, variant_text, message):
    """Names the harness would silently ignore (or trip over in the child process) are refused at load."""
    ch = tmp_path / "ch8"
    ch.mkdir()
    name = "p_" + "".join(c if c.isalnum() else "_" for c in tmp_path.name)   # one module name per case
    (ch / f"baseline_{name}.py").write_text("BOUND = 'memory'\ndef workload(seed, device, quick): pass\n"
                                            "def prepare(w): pass\n" + baseline_extra)
    (ch / f"optimized_{name}.py").write_text(variant_text)
    with pytest.raises(ContractError, match=message) as e:
        load_pair(8, name, ch / f"baseline_{name}.py", [ch / f"optimized_{name}.py"])
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("doc, summary", [
    ("A sentence that\n    goes on, torch.compile inside. A second one.\n\nMore.",
     "A sentence that goes on, torch.compile inside."),
    ("No full stop,\nover two lines\n\nThe next paragraph.", "No full stop, over two lines"),
    ("", ""),
])
def test_a_files_summary_is_its_first_sentence_whole(tmp_path, doc, summary):
    """--list and the report show a file by its docstring's first sentence: whole, on one line, however wrapped."""
    ch = tmp_path / "ch8"
    ch.mkdir()
    name = "s_" + "".join(c if c.isalnum() else "_" for c in tmp_path.name)
    (ch / f"baseline_{name}.py").write_text(f'"""{doc}"""\nBOUND = "memory"\ndef workload(seed, device, quick): pass\n'
                                            "def prepare(w): pass\n")
    (ch / f"optimized_{name}.py").write_text(f'"""{doc}"""\ndef prepare(w): pass\n')
    pair = load_pair(8, name, ch / f"baseline_{name}.py", [ch / f"optimized_{name}.py"])
    assert pair.baseline.summary == summary and pair.variants[0].summary == summary


def test_fixture_pairs_load():
    pair = load_pair(90, "scale", FIXTURES / "ch90" / "baseline_scale.py",
                     sorted((FIXTURES / "ch90").glob("optimized_scale*.py")))
    assert pair.bound == "memory" and len(pair.variants) == 7
