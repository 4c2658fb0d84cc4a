"""Chapter 1's CUDA kernels and samples, checked where no GPU is needed: what the compiler did.

- launch_bounds: ptxas really caps the registers of the __launch_bounds__ versions (and spills), and
  leaves the free version unspilled: the premise of the pair, visible at compile time. The chase
  sample's premise too: free, just over the 128 registers that let two blocks share an SM; capped at
  two blocks, a small spill; tighter caps, much more.
- smem_prefetch: the three GEMM kernels share one register cap; the cp.async and TMA kernels really
  contain cp.async and cp.async.bulk.tensor; the extension still compiles for GPUs without them.
- the samples have make rules under the names the chapter's guide uses, and the PyTorch bindings
  compile against torch's headers.
- the new pairs follow the pair contract (discovery, once/KIND declarations) on a CPU.
"""
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
CH1 = ROOT / "ch1"


def ptxas_report(src, arch="sm_90", tmp_path=None) -> dict[str, dict]:
    """{kernel name: {"registers", "spill_stores"}} from `nvcc -Xptxas -v` for one .cu file."""
    out = tmp_path / (src.stem + ".o")
    proc = subprocess.run([NVCC, "-std=c++17", "-O3", f"-arch={arch}", f"-I{ROOT / 'common' / 'cuda'}", "-c",
                           str(src), "-o", str(out), "-Xptxas", "-v"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kernels, name = {}, None
    for line in proc.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name = m.group(1)
            kernels[name] = {"spill_stores": 0}
        m = re.search(r"(\d+) bytes spill stores", line)
        if m and name:
            kernels[name]["spill_stores"] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            kernels[name]["registers"] = int(m.group(1))
    return kernels


def find(kernels: dict, fragment: str) -> dict:
    hits = [v for k, v in kernels.items() if fragment in k]
    assert len(hits) == 1, (fragment, list(kernels))
    return hits[0]


@needs_nvcc
def test_launch_bounds_caps_registers_and_spills(tmp_path):
    k = ptxas_report(CH1 / "launch_bounds.cu", tmp_path=tmp_path)
    free = find(k, "solve8_free")
    caps = {b: find(k, f"solve8_cappedILi{b}E") for b in (2, 4, 8)}
    # Left free, the compiler keeps the 72-value system in registers: more than the 2-block cap, no spills.
    assert free["registers"] > 128 and free["spill_stores"] == 0, free
    for blocks, info in caps.items():
        cap = 65536 // (256 * blocks)
        assert info["registers"] <= cap, (blocks, info)
        assert info["registers"] < free["registers"], (blocks, info)
    # Below the live set, the cap is paid in spills, more as the cap tightens.
    assert 0 < caps[2]["spill_stores"] < caps[4]["spill_stores"] < caps[8]["spill_stores"], caps


@needs_nvcc
def test_chase_sample_sits_just_over_the_two_block_register_limit(tmp_path):
    k = ptxas_report(CH1 / "launch_bounds_chase_demo.cu", tmp_path=tmp_path)
    free = find(k, "chase_free")
    caps = {b: find(k, f"chase_cappedILi{b}E") for b in (2, 3, 4)}
    # One block of 256 per SM when free (over 128 registers), unspilled; the 2-block cap is a small spill
    # (what it costs is a few bytes per thread), and each tighter cap spills several times more.
    assert 128 < free["registers"] <= 168 and free["spill_stores"] == 0, free
    assert caps[2]["registers"] <= 128 and 0 < caps[2]["spill_stores"] <= 64, caps[2]
    assert caps[3]["spill_stores"] > 4 * caps[2]["spill_stores"] and caps[4]["spill_stores"] >= caps[3]["spill_stores"]


@needs_nvcc
def test_smem_prefetch_kernels_share_one_register_cap(tmp_path):
    k = ptxas_report(CH1 / "smem_prefetch.cu", tmp_path=tmp_path)
    for name in ("sgemm_sync", "sgemm_cp_async", "sgemm_tma"):
        assert find(k, name)["registers"] <= 128, (name, k)


@needs_nvcc
def test_smem_prefetch_kernels_use_the_copy_instructions_they_name(tmp_path):
    ptx = tmp_path / "smem_prefetch.ptx"
    proc = subprocess.run([NVCC, "-std=c++17", "-O3", "-arch=sm_90", "-ptx", str(CH1 / "smem_prefetch.cu"), "-o",
                           str(ptx)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    bodies = {}
    for m in re.finditer(r"\.entry (\w+)\((.*?)\n}\n", ptx.read_text(), re.S):
        bodies[m.group(1)] = m.group(2)
    sync, cp, tma = (find({k: {"b": v} for k, v in bodies.items()}, n)["b"]
                     for n in ("sgemm_sync", "sgemm_cp_async", "sgemm_tma"))
    assert "cp.async" not in sync
    assert "cp.async.cg.shared.global" in cp and "cp.async.wait_group" in cp
    assert "cp.async.bulk.tensor.2d" in tma and "mbarrier.try_wait.parity" in tma
    assert "ld.global" not in tma  # the copy engine loads A and B; the threads issue no global loads


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_75"])
def test_smem_prefetch_extension_builds_without_tma(arch, tmp_path):
    """The extension is compiled for the GPU it runs on: the guards keep older architectures building."""
    proc = subprocess.run([NVCC, "-std=c++17", "-O3", f"-arch={arch}", "-c", str(CH1 / "smem_prefetch.cu"), "-o",
                           str(tmp_path / "x.o")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


@needs_nvcc
@pytest.mark.parametrize("name", ["arithmetic_intensity_demo", "batched_gemm_example", "launch_bounds_demo",
                                  "smem_prefetch_demo", "restrict_demo", "divergence_demo", "l2_persist_demo",
                                  "cluster_dsmem_demo"])
def test_each_sample_has_a_make_rule_of_its_name(name):
    """`make NAME` (the chapter guide's spelling) builds bin/NAME_<arch>; dry run, nothing is built."""
    proc = subprocess.run(["make", "-n", "-B", "-C", str(CH1), name, "ARCH=sm_90", "PYTHON=true"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"{name}.cu -o bin/{name}_sm90" in proc.stdout
    if name in ("launch_bounds_demo", "smem_prefetch_demo"):
        assert "-Xptxas -v" in proc.stdout  # registers and spills printed at build time


@needs_nvcc
@pytest.mark.parametrize("arch, built_for", [("sm_90", "sm_90a"), ("sm_100", "sm_100")])
def test_warp_specialization_demo_builds_for_hopper_features_only_on_hopper(arch, built_for):
    """ARCH_warp_specialization_demo (common/cuda/samples.mk): on sm_90 the sample is built for sm_90a, whose
    wgmma and setmaxnreg it uses; elsewhere for the GPU's own architecture, where it says at run time that it
    needs a Hopper."""
    proc = subprocess.run(["make", "-n", "-B", "-C", str(ROOT / "ch13"), "warp_specialization_demo", f"ARCH={arch}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "warp_specialization_demo.cu" in x)
    assert re.findall(r"-arch=(\w+)", line) == [built_for], line


@needs_nvcc
def test_missing_cublas_is_one_line_with_the_command(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")  # cuda_paths.py finds no cuBLAS
    fake.chmod(0o755)
    proc = subprocess.run(["make", "-C", str(CH1), "bin/batched_gemm_example_sm90", "ARCH=sm_90", f"PYTHON={fake}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cuBLAS" in errors[0] and f"{fake} -m pip install nvidia-cublas" in errors[0], proc.stderr



@needs_nvcc
def test_without_cublas_every_other_sample_is_built_before_the_error(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")  # cuda_paths.py finds no cuBLAS
    fake.chmod(0o755)
    proc = subprocess.run(["make", "-C", str(CH1), "-n", "-B", "ARCH=sm_90", f"PYTHON={fake}"],
                          capture_output=True, text=True, timeout=120)
    built = re.findall(r"-o bin/(\w+)_sm90", proc.stdout)
    assert sorted(built) == sorted(re.search(r"SAMPLES := (.*)", (CH1 / "Makefile").read_text()).group(1).split())
    assert built[-1] == "batched_gemm_example", built          # the one that needs cuBLAS, last
    assert proc.stdout.index("need") > proc.stdout.index("-o bin/cluster_dsmem_demo_sm90")

TORCH_HEADERS = None
try:
    from torch.utils import cpp_extension
    TORCH_HEADERS = cpp_extension.include_paths()
except Exception:  # noqa: BLE001 - no torch, no check
    pass


@pytest.mark.skipif(not TORCH_HEADERS or not shutil.which("g++") or NVCC is None, reason="needs torch headers, g++, nvcc")
def test_ch1_bindings_compile_against_torch(tmp_path):
    """Syntax and types of every ch1 binding against torch's headers (a CPU wheel ships them too).

    Parsing torch's headers is most of a binding's compile time, so all bindings go into one
    translation unit: the headers they include first, then each binding in its own namespace, under
    its own extension name.
    """
    import sysconfig
    sys.path.insert(0, str(ROOT / "scripts"))
    from cuda_paths import cuda_home
    bindings = sorted(CH1.glob("*_binding.cpp"))
    assert bindings
    headers = sorted({line for b in bindings for line in b.read_text().splitlines() if line.startswith("#include <")})
    unit = headers + [f"namespace b{i} {{\n#define TORCH_EXTENSION_NAME b{i}\n#include \"{b}\"\n#undef TORCH_EXTENSION_NAME\n}}"
                      for i, b in enumerate(bindings)]
    src = tmp_path / "bindings.cpp"
    src.write_text("\n".join(unit) + "\n")
    cmd = ["g++", "-std=c++17", "-fsyntax-only", *(f"-I{p}" for p in TORCH_HEADERS),
           f"-I{sysconfig.get_paths()['include']}", f"-I{cuda_home() / 'include'}",
           "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE",  # a CPU wheel lacks the CUDA build's generated macro header
           str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("name", ["launch_bounds", "smem_prefetch"])
def test_new_pairs_follow_the_contract(name):
    from common.discover import load_pair, pair_files
    base, opts = pair_files(CH1)[name]
    pair = load_pair(1, name, base, opts)
    assert pair.devices == ("cuda",)
    for v in [pair.baseline, *pair.variants]:
        doc = v.module.__doc__ or ""
        assert len(doc.split()) > 40, f"{v.path.name}: the docstring should explain the version"
    doc = pair.baseline.module.__doc__
    assert "Bound:" in doc and "Napkin math" in doc and "Prepared once" in doc
    for v in pair.variants:  # a variant slower on purpose says so where a reader starts: its docstring's first word
        kind = getattr(v.module, "KIND", "optimized")
        assert (kind == "pitfall") == v.module.__doc__.startswith("Pitfall"), (v.path.name, kind)
    from common import pair as contract
    if hasattr(contract, "check_workload"):  # the declarations (once, updated) name real inputs
        import torch
        contract.check_workload(pair, pair.workload(seed=1, device=torch.device("cpu"), quick=True))


def test_launch_bounds_systems_are_diagonally_dominant_and_laid_out_by_column():
    """The workload on a CPU: A (64, m) holds one 8x8 system per column, and elimination without pivoting
    (the kernel's algorithm, here in float64) solves it."""
    import torch
    from ch1.baseline_launch_bounds import S, systems
    A, b = systems(1000, torch.Generator().manual_seed(3), torch.device("cpu"))
    mats = A.double().T.reshape(-1, S, S)
    diag = mats.diagonal(dim1=1, dim2=2).abs()
    off = mats.abs().sum(-1) - diag
    assert bool((diag > off).all())
    x = torch.linalg.solve(mats, b.double().T)
    assert float((mats @ x.unsqueeze(-1)).squeeze(-1).sub(b.double().T).abs().max()) < 1e-12


def test_smem_prefetch_workload_declares_the_weights_once():
    import torch
    from ch1.baseline_smem_prefetch import workload
    w = workload(1, torch.device("cpu"), quick=True)
    assert w.once == ("b",)
    n = w.inputs["a"].shape[0]
    assert n % 128 == 0 and w.flops == 2.0 * n**3


@pytest.mark.parametrize("chapter, name", [("ch1", "zero_copy"), ("ch1", "zero_copy_reuse"), ("ch1", "host_gather"),
                                           ("ch1", "grad_accumulation"), ("ch13", "transposed_weight")])
def test_the_topic_pairs_explain_themselves(chapter, name):
    """Issue 26's pairs: each file explains its version; the baseline states its bound, napkin math and what is
    prepared once; a slower-on-purpose variant says so in its first word (pitfall) or declares a trade-off."""
    from common.discover import load_pair, pair_files
    base, opts = pair_files(ROOT / chapter)[name]
    pair = load_pair(int(chapter[2:]), name, base, opts)
    doc = pair.baseline.module.__doc__
    assert "Bound:" in doc and "Napkin math" in doc and "Prepared once" in doc, base.name
    for v in [pair.baseline, *pair.variants]:
        assert len((v.module.__doc__ or "").split()) > 40, f"{v.path.name}: the docstring should explain the version"
    for v in pair.variants:
        kind = getattr(v.module, "KIND", "optimized")
        assert (kind == "pitfall") == v.module.__doc__.startswith("Pitfall"), (v.path.name, kind)


def ptx_counts(src, tmp_path) -> dict[str, dict[str, int]]:
    """{kernel: {instruction: count}} of the global loads and stores, ex2 and fma in one .cu file's PTX (sm_90)."""
    out = tmp_path / (src.stem + ".ptx")
    proc = subprocess.run([NVCC, "-std=c++17", "-O3", "-arch=sm_90", f"-I{ROOT / 'common' / 'cuda'}", "-ptx", str(src),
                           "-o", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts, kernel = {}, None
    for line in out.read_text().splitlines():
        m = re.search(r"\.entry (\w+)\(", line)
        if m:
            kernel = m.group(1)
            counts[kernel] = {}
        m = re.match(r"\s*(?:@%p\d+\s+)?((?:ld|st)\.global[.\w]*|ex2\.approx[.\w]*|fma\.rn\.f32)\s", line)
        if m and kernel:
            counts[kernel][m.group(1)] = counts[kernel].get(m.group(1), 0) + 1
    return counts


@needs_nvcc
def test_restrict_turns_loads_read_only_and_takes_the_stores_out_of_the_loop(tmp_path):
    """restrict_demo.cu's premise in its PTX: the __restrict__ kernels load through the non-coherent path
    (ld.global.nc) and the others never do; accumulating in y without the keyword stores y in the unrolled loop
    (several stores), with it once (the zeroing and the final store)."""
    counts = ptx_counts(CH1 / "restrict_demo.cu", tmp_path)
    for kernel, c in counts.items():
        nc = sum(n for i, n in c.items() if i.startswith("ld.global.nc"))
        plain = sum(n for i, n in c.items() if i.startswith("ld.global") and ".nc" not in i)
        assert (nc > 0 and plain == 0) if "restrict" in kernel else (plain > 0 and nc == 0), (kernel, c)
    stores = {k: sum(n for i, n in c.items() if i.startswith("st.global")) for k, c in counts.items()}
    assert find(stores, "gemv_y_may_alias") > 2 >= find(stores, "gemv_y_restrict"), stores
    assert find(stores, "gemv_local_may_alias") == 1, stores


@needs_nvcc
def test_sfu_demo_puts_each_share_of_exp2_on_the_pipe_it_names(tmp_path):
    """sfu_balance_demo.cu: the all-MUFU kernel is ex2 instructions and (almost) no FMAs, the all-polynomial one
    has no ex2, and the 2:1 kernel has twice as many ex2 as polynomials (6 FMAs each)."""
    counts = ptx_counts(ROOT / "ch13" / "sfu_balance_demo.cu", tmp_path)
    ex2 = {k: sum(n for i, n in c.items() if i.startswith("ex2")) for k, c in counts.items()}
    fma = {k: c.get("fma.rn.f32", 0) for k, c in counts.items()}
    kernel = {share: next(k for k in counts if f"ILi{share}E" in k) for share in (0, 2, 3)}  # MUFU_OF_3
    mufu, poly, mixed = kernel[3], kernel[0], kernel[2]
    assert ex2[poly] == 0 and ex2[mufu] > 0 and fma[mufu] <= 2, (ex2, fma)
    polys_in_mixed = (fma[mixed] - fma[mufu]) / 6
    assert ex2[mixed] == 2 * round(polys_in_mixed) and fma[poly] >= 6 * ex2[mufu], (ex2, fma)


def _cublas_flags() -> list[str]:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "cuda_paths.py"), "cublas"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@needs_nvcc
def test_warp_specialization_demo_gives_each_version_the_instructions_it_names(tmp_path):
    """warp_specialization_demo.cu's premise in its PTX (sm_90a): every version multiplies with wgmma; the two
    uniform TMA kernels refill a stage after a block barrier inside the loop and trade no registers; the cp.async
    version copies with cp.async, fenced for wgmma's async proxy, and no TMA; the specialized kernel has one block
    barrier (after the mbarriers' init), gives registers away and takes them (setmaxnreg), and waits on two
    kinds of mbarrier (full and empty)."""
    ptx = tmp_path / "ws.ptx"
    proc = subprocess.run([NVCC, "-std=c++17", "-O3", "-arch=sm_90a", f"-I{ROOT / 'common' / 'cuda'}", "-ptx",
                           str(ROOT / "ch13" / "warp_specialization_demo.cu"), "-o", str(ptx), *_cublas_flags()],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts, kernel = {}, None
    for line in ptx.read_text().splitlines():
        m = re.search(r"\.entry (\w+)\(", line)
        if m:
            kernel = m.group(1)
            counts[kernel] = {}
        m = re.match(r"\s*(?:@%p\d+\s+)?(wgmma\.mma_async|setmaxnreg\.\w+|bar\.sync|cp\.async\.bulk\.tensor|cp\.async\.cg|"
                     r"mbarrier\.try_wait|fence\.proxy\.async)", line)
        if m and kernel:
            counts[kernel][m.group(1)] = counts[kernel].get(m.group(1), 0) + 1
    uniform = [find(counts, "gemm_uniformILi1E"), find(counts, "gemm_uniformILi4E")]
    cp_async, special = find(counts, "gemm_uniform_cp_async"), find(counts, "gemm_specialized")
    assert all(c.get("wgmma.mma_async", 0) >= 4 for k, c in counts.items() if "gemm_" in k), counts
    for c in uniform:
        assert c.get("bar.sync", 0) >= 2 and c.get("cp.async.bulk.tensor") and not c.get("setmaxnreg.inc"), c
    assert cp_async.get("cp.async.cg") and cp_async.get("fence.proxy.async") and not cp_async.get(
        "cp.async.bulk.tensor") and not cp_async.get("mbarrier.try_wait"), cp_async
    assert special.get("bar.sync") == 1 and special.get("setmaxnreg.dec") == 1 == special.get("setmaxnreg.inc"), special
    assert special.get("mbarrier.try_wait", 0) >= 2 and special.get("cp.async.bulk.tensor"), special


@needs_nvcc
@pytest.mark.parametrize("arch, wgmma", [("sm_90a", True), ("sm_90", False), ("sm_80", False)])
def test_warp_specialization_demo_builds_anywhere_and_holds_wgmma_only_for_sm_90a(arch, wgmma, tmp_path):
    """Built for another GPU (an A100, or plain sm_90) the kernels compile empty and main() refuses in one line
    (built_for_hopper): `make -C ch13` keeps building the chapter's other samples on any GPU."""
    ptx = tmp_path / "ws.ptx"
    proc = subprocess.run([NVCC, "-std=c++17", "-O3", f"-arch={arch}", f"-I{ROOT / 'common' / 'cuda'}", "-ptx",
                           str(ROOT / "ch13" / "warp_specialization_demo.cu"), "-o", str(ptx), *_cublas_flags()],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = ptx.read_text()
    assert ("wgmma.mma_async" in text) == wgmma and ("setmaxnreg" in text) == wgmma


@needs_nvcc
def test_warp_specialization_demo_negative_control_builds(tmp_path):
    """Its -DINJECT_FAULT build (shown failing on the H100 by scripts/h100_topics.sh) keeps compiling, for the
    architecture whose instructions it uses."""
    proc = subprocess.run([NVCC, "-std=c++17", "-O3", "-arch=sm_90a", f"-I{ROOT / 'common' / 'cuda'}", "-DINJECT_FAULT",
                           "-c", str(ROOT / "ch13" / "warp_specialization_demo.cu"), "-o", str(tmp_path / "x.o"),
                           *_cublas_flags()], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


@needs_nvcc
@pytest.mark.parametrize("src", ["ch1/restrict_demo.cu", "ch1/divergence_demo.cu", "ch1/l2_persist_demo.cu",
                                 "ch1/cluster_dsmem_demo.cu", "ch13/sfu_balance_demo.cu"])
def test_each_negative_control_builds(src, tmp_path):
    """Each new sample's check is shown failing on the GPU by a build with -DINJECT_FAULT
    (scripts/h100_topics.sh); that build must keep compiling."""
    proc = subprocess.run([NVCC, "-std=c++17", "-O3", "-arch=sm_90", f"-I{ROOT / 'common' / 'cuda'}", "-DINJECT_FAULT",
                           "-c", str(ROOT / src), "-o", str(tmp_path / "x.o")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
