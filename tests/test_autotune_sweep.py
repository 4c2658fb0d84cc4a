"""ch13/autotune_sweep.py on a CPU: its occupancy, payback and "why" arithmetic on inputs whose answers are worked out
by hand, one shape swept end to end with a stand-in for the Triton module, and the one-line error without a GPU."""
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from ch13 import autotune_sweep as sweep
from conftest import run_script

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ occupancy: the scarcest resource sets it
def test_shared_memory_limits_small_register_kernels():
    # 100,000 B + 1 KB reserved per program: 2 fit in 233,472 B; registers (32 x 32 = 1024 a warp) allow 16 programs
    assert sweep.programs_per_sm(32, 4, 100_000) == (2, "shared memory")


def test_registers_limit_fat_kernels():
    # 255 registers round up to 256: 8192 a warp, 8 warps in 65,536, one program of 8 warps; shared memory allows 13
    assert sweep.programs_per_sm(255, 8, 16_384) == (1, "registers")


def test_the_driver_reserve_and_the_register_granularity_count():
    # two programs of 116,000 B would fit in 233,472 B, but not with the 1 KB the driver reserves for each
    assert sweep.programs_per_sm(32, 4, 116_000) == (1, "shared memory")
    # 65 registers are handed out as 72: 2304 a warp, 28 warps, 14 programs of 2 warps (65 exactly would give 15)
    assert sweep.programs_per_sm(65, 2, 0) == (14, "registers")


def test_a_program_over_the_per_block_shared_memory_does_not_fit():
    assert sweep.programs_per_sm(32, 4, 240_000) == (0, "shared memory")


def test_threads_limit_when_nothing_else_does():
    # 16 warps a program: 2048 threads hold 4. 40 registers (1280 a warp) allow 51 warps, 3 programs of 16;
    # 24 registers (768 a warp) allow 85 warps, 5 programs, so the threads decide
    assert sweep.programs_per_sm(40, 16, 0) == (3, "registers")
    assert sweep.programs_per_sm(24, 16, 0) == (4, "threads")


def test_occupancy_follows_the_device_limits():
    smaller = {**sweep.H100, "smem_per_sm": 167_936, "smem_per_block": 166_912}  # an A100's 164 KB
    # 60,000 + 1024 B a program: 2 in 164 KB, 3 in 228 KB
    assert sweep.programs_per_sm(32, 4, 60_000, smaller) == (2, "shared memory")
    assert sweep.programs_per_sm(32, 4, 60_000) == (3, "shared memory")


def test_unknown_resources_give_no_occupancy():
    assert sweep.programs_per_sm(None, 4, 1000) == (None, "unknown")
    assert sweep.programs_per_sm(100, 4, None) == (None, "unknown")


# ------------------------------------------------------------------ what tuning gains, and when it pays back
def test_payback_is_tuning_time_over_the_saving_per_call():
    assert sweep.payback_calls(4.0, 2.0, 1.0) == 4000        # 4 s at 1 ms saved a call
    assert sweep.payback_calls(1.0, 1.3, 1.0) == 3334        # 1000 ms / 0.3 ms, rounded up
    assert sweep.payback_calls(4.0, 1.0, 1.0) is None        # no saving: never
    assert sweep.payback_calls(4.0, 1.0, 1.5) is None        # a loss: never
    assert sweep.payback_calls(None, 2.0, 1.0) is None


def cfg_row(config, ms, correct=True):
    return {"config": config, "ms": ms, "correct": correct}


def test_the_gain_counts_only_correct_timed_configurations():
    configs = [cfg_row((1,), 1.0), cfg_row((2,), 2.0), cfg_row((3,), 4.0), cfg_row((4,), 0.1, False),
               cfg_row((5,), float("nan"), "OutOfResources")]
    g = sweep.tuning_gain(configs, (1,), 2.0)
    assert (g["fastest_ms"], g["median_ms"], g["slowest_ms"], g["pick_ms"]) == (1.0, 2.0, 4.0, 1.0)
    assert g["payback_calls_vs_median"] == 2000 and g["payback_calls_vs_slowest"] == 667
    worst = sweep.tuning_gain(configs, (3,), 2.0)
    assert worst["payback_calls_vs_median"] is None and worst["payback_calls_vs_slowest"] is None
    assert sweep.tuning_gain([cfg_row((4,), 0.1, False)], (4,), 2.0) == {}


# ------------------------------------------------------------------ one shape, end to end, with a stand-in Triton
A, B, C = (128, 256, 64, 3, 8), (64, 64, 64, 5, 4), (64, 128, 64, 4, 4)
NAMES = ["a_ptr", "BLOCK_M", "BLOCK_N", "BLOCK_K"]


class Config:  # what triton.Config carries
    def __init__(self, c):
        self.kwargs, self.num_stages, self.num_warps = {"BLOCK_M": c[0], "BLOCK_N": c[1], "BLOCK_K": c[2]}, c[3], c[4]


def compiled(c, regs, shared):
    """A CompiledKernel as Triton 3.6 keeps it: src.fn.arg_names, src.constants keyed by argument path, metadata."""
    return SimpleNamespace(src=SimpleNamespace(fn=SimpleNamespace(arg_names=NAMES),
                                               constants={(1,): c[0], (2,): c[1], (3,): c[2]}),
                           metadata=SimpleNamespace(num_warps=c[4], num_stages=c[3], shared=shared), n_regs=regs,
                           n_spills=0)


class NotLoaded:  # a kernel whose binary cannot be loaded: no n_regs, and _init_handles raises
    metadata = SimpleNamespace(num_warps=4, num_stages=4, shared=None)

    def _init_handles(self):
        raise RuntimeError("out of resources")


def stand_in(m, n, k, pick, tunes=True):
    state = {}
    jit = SimpleNamespace(device_caches={0: ({"a": compiled(A, 168, 147_456), "b": compiled(B, 96, 81_920),
                                              "c": NotLoaded()}, {}, None, None, None)})

    def gemm(x, w, b, out, gelu, config=None):
        state["last"] = config
        if config is None and tunes:  # the autotuner benchmarks, picks, and keeps its timings
            at.cache[(m, n, k, "torch.float32")] = Config(pick)
            at.configs_timings, at.bench_time = {Config(A): [2.1, 2.0, 2.2], Config(B): [1.1, 1.0, 1.2]}, 0.5
        return out.zero_() if config == C else out.copy_(x @ w)  # C computes the wrong answer
    at = SimpleNamespace(fn=jit, cache={}, configs_timings={Config(C): [9.0, 9.0, 9.0]})  # another shape's timings
    tk = SimpleNamespace(GEMM_CONFIGS=[A, B, C], gemm=gemm, gemm_autotuned=at, _gemm_kernel=at,
                         picked=lambda *shape: str(pick))
    ms = {A: 2.0, B: 1.0, C: 0.5, "cublas": 0.8}

    def bench(fn):
        state["last"] = "cublas"
        fn()
        return ms[state["last"]]
    return tk, bench


@pytest.fixture
def one_shape(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    clock = iter([0.0, 3.0])  # the autotuned first call takes 3 s
    monkeypatch.setattr(sweep, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    m, n, k = 64, 256, 128
    x, w = torch.randn(m, k), torch.randn(k, n)

    def run(pick, tunes=True):
        tk, bench = stand_in(m, n, k, pick, tunes)
        return sweep.sweep_shape(tk, bench, m, n, k, x, w, x @ w, {**sweep.H100, "sms": 2})
    return run


def test_a_shape_row_has_tiles_waves_occupancy_and_gain(one_shape):
    r = one_shape(B)
    a, b, c = r["configs"]
    assert (a["tiles"], a["tile_fill"], b["tiles"], b["tile_fill"]) == (1, 0.5, 4, 1.0)  # M = 64 fills half a 128 row
    assert (b["regs"], b["shared_bytes"], b["programs_per_sm"], b["limited_by"]) == (96, 81_920, 2, "shared memory")
    assert (b["waves"], b["waves_resident"]) == (2.0, 1.0)                               # 4 tiles, 2 SMs x 2 programs
    assert a["programs_per_sm"] == 1 and a["regs"] == 168
    assert c["correct"] is False and c["regs"] is None and c["programs_per_sm"] is None  # wrong, and never loaded
    assert (a["autotuner_ms"], b["autotuner_ms"], c["autotuner_ms"]) == (2.1, 1.1, None)
    assert r["fastest"] == B and r["autotuner_pick_config"] == B and r["cublas_ms"] == 0.8 and r["autotune_s"] == 3.0
    # median of the correct ones (1.0, 2.0) is 1.5: 3000 ms / 0.5 ms saved; against the slowest, 3000 / 1.0
    assert r["gain"]["payback_calls_vs_median"] == 6000 and r["gain"]["payback_calls_vs_slowest"] == 3000
    assert "fastest: 64x64x64, 5 stages, 4 warps" in r["why"] and "the autotuner picked it" in r["why"]
    assert "1.00 waves at 2 program(s)/SM (limit: shared memory)" in r["why"]
    assert "repays after 6000 calls" in r["why"] and "3000 against the slowest" in r["why"]


def test_timings_left_from_another_shape_are_not_shown_as_this_ones(one_shape):
    r = one_shape(B, tunes=False)  # the autotuner had this shape already: no new timings, no pick recorded here
    assert [c["autotuner_ms"] for c in r["configs"]] == [None, None, None]


def test_a_slower_pick_never_repays_against_the_median(one_shape):
    r = one_shape(A)
    assert "the autotuner picked 128x256x64, 3 stages, 8 warps (2.00x the fastest's time here)" in r["why"]
    assert "never repays" in r["why"] and "(never against the slowest" in r["why"]


def test_the_markdown_has_one_cell_per_column_and_says_gemlite_is_absent(one_shape, monkeypatch):
    r = one_shape(B)
    monkeypatch.setitem(sys.modules, "gemlite", None)  # `import gemlite` raises ImportError
    r["gemlite"] = sweep.gemlite_at(torch.randn(64, 128), torch.randn(128, 256), torch.randn(64, 256), None)
    assert r["gemlite"]["installed"] is False
    md = sweep.markdown([r], "a CPU", 2)
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(table) == 2 + 3 + 1 and {line.count("|") for line in table} == {14}  # header, 3 configs, cuBLAS
    assert "(64, 64, 64, 5, 4) **fastest** *picked*" in md and "| 2 (shared memory) |" in md
    assert "GemLite was not installed" in md and "its rows are absent" in md
    assert r["why"] in md


# ------------------------------------------------------------------ without a GPU: one line, exit 2, no files
@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU the sweep runs")
def test_without_a_gpu_it_says_so_in_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "sweep"
    r = run_script(ROOT / "ch13" / "autotune_sweep.py", "--out", str(out), timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "GPU" in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout and not out.exists()


def test_an_out_path_that_is_a_file_is_refused_before_anything_runs(tmp_path):
    f = tmp_path / "a_file"
    f.write_text("kept")
    assert sweep.main(["--out", str(f)]) == 2 and f.read_text() == "kept"
