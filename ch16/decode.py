"""What the decode pairs share: the served model, a request's state at a given context, a CUDA-graph capture.

The model is built once per process from a fixed seed (it is what the server serves; prepared once);
the request (its prefix, the token it feeds next) is drawn from the workload's seed. On a GPU the
model is the ~1B configuration in bf16; on a CPU the small one in fp32, and in a quick run on a GPU
the small one in bf16.
"""
from __future__ import annotations

import contextlib
import json

import torch

from common import Workload
from common.peaks import peaks_path
from ch16.model import CONFIGS, KVCache, Transformer, build_model, prefill, random_tokens

MODEL_SEED = 0
_models: dict = {}


def served_model(device, quick: bool = False, cfg_name: str | None = None) -> Transformer:
    device = torch.device(device)
    name = cfg_name or ("llama-1b" if device.type == "cuda" and not quick else "small")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    key = (name, str(device), dtype)
    if key not in _models:
        _models[key] = build_model(CONFIGS[name], MODEL_SEED, device, dtype)
    return _models[key]


def step_work(model: Transformer, batch: int, keys_read: int, tokens_in: int = 1) -> tuple[float, float]:
    """(flops, bytes) of one forward of `tokens_in` tokens per sequence over `keys_read` cached positions.

    Bytes: every weight once, plus K and V of every position attention reads, for every sequence.
    FLOPs: 2 per weight per token, plus QK^T and PV (4 x heads x head_dim per query-key pair).
    """
    c = model.cfg
    dtype = model.output.weight.dtype
    flops = 2.0 * (c.n_params() - c.vocab_size * c.dim) * batch * tokens_in
    flops += 4.0 * c.n_layers * c.n_heads * c.head_dim * keys_read * batch * tokens_in
    bytes_moved = model.weight_bytes() + batch * keys_read * c.kv_bytes_per_token(dtype)
    return flops, bytes_moved


def decode_workload(seed: int, device, quick: bool, batch: int, context: int, room: int = 64,
                    note: str = "") -> Workload:
    """A batch of requests `context` tokens in, with the next token to feed.

    inputs: model (an object, built once per process), prefix (B, context) token ids, token (B, 1) the token fed this step,
    input_pos (1,) its position (= context, the same for every seed), k_cache/v_cache the static
    cache (max length context + room) holding the prefix: state the step writes at input_pos.
    """
    model = served_model(device, quick)
    cfg = model.cfg
    prefix = random_tokens(cfg, (batch, context), seed, device)
    token = random_tokens(cfg, (batch, 1), seed + 1, device)
    cache = KVCache.empty(cfg, batch, context + room, device, model.output.weight.dtype)
    with torch.no_grad():
        prefill(model, prefix, cache)
    input_pos = torch.tensor([context], device=device)
    flops, bytes_moved = step_work(model, batch, context + 1)  # the fewest: only the filled positions
    return Workload(inputs={"model": model, "prefix": prefix, "token": token, "input_pos": input_pos,
                            "k_cache": cache.k, "v_cache": cache.v},
                    flops=flops, bytes_moved=bytes_moved, items=batch, item_name="tokens",
                    note=note or f"{cfg.n_params() / 1e9:.2f}B params, batch {batch}, context {context}, "
                                 f"cache {cache.max_len}, {model.output.weight.dtype}".replace("torch.", ""),
                    updated=("k_cache", "v_cache"))


def capture_graph(fn, warmup: int = 3):
    """Capture fn() in a CUDA graph after warming it up on a side stream; returns replay() -> fn's output.

    The graph replays the recorded kernels on the same memory: whatever fn read (token ids,
    positions, the cache) it reads again from the same tensors, so a caller updates them in place.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(warmup):  # cuBLAS picks kernels and allocates its workspace outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        out = fn()

    def replay():
        graph.replay()
        return out
    replay.graph = graph
    # The graph holds addresses, not tensors: whatever fn owns (weights it made, its buffers) must live as long
    # as the graph, or the allocator hands that memory to the next allocation while replays still read it (on
    # the H100 the float8 PDL step, whose weights only it held, failed its second check so at a6a9cab:
    # relative error 3.4e3).
    replay.fn = fn
    return replay


def compile_available() -> str | None:
    """None when torch.compile can build GPU kernels here; else why not."""
    if not torch.cuda.is_available():
        return "no GPU"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "triton is not installed"
    return None


def compile_like_eager():
    """A context in which torch.compile makes Inductor round bf16 intermediates where eager does (read while
    compiling). Default Inductor keeps a fused kernel's intermediates in fp32: closer to an fp32 run, but
    further from eager bf16 than the harness's bf16 tolerance over the 16 layers of the decode step
    (ch16/optimized_decode_graph_compile.py has the measurement)."""
    return torch._inductor.config.patch(emulate_precision_casts=True)


def compiled_replay(step, args, static=(), round_like_eager: bool = True, inductor: dict | None = None):
    """step(*args) under torch.compile(mode="reduce-overhead"): compiled, recorded as a CUDA graph, and
    returned as call() -> step(*args), each call a replay. `static` tensors (the cache, weights that are not
    the model's parameters) are read and written where they are; any other tensor input is copied into the
    graph's own buffers at every replay. round_like_eager: compile inside compile_like_eager(); inductor:
    more Inductor settings for the compilation (e.g. {"triton.enable_pdl": True})."""
    for t in static:
        torch._dynamo.mark_static_address(t)
    fn = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    rounding = compile_like_eager() if round_like_eager else contextlib.nullcontext()
    with torch.no_grad(), rounding, torch._inductor.config.patch(inductor or {}):
        for _ in range(3):  # compile, record, then replay
            fn(*args)

    @torch.no_grad()
    def call():
        return fn(*args)
    return call


def gpu_copy_rate(script: str, given: float | None = None) -> tuple[float | None, str | None]:
    """(copy rate in GB/s, None) for a measurement script on this GPU, or (None, a one-line error): no GPU, or no
    measured rate (`python benchmark.py --peaks` caches it; `given` overrides it)."""
    if not torch.cuda.is_available():
        return None, f"error: {script} needs a CUDA GPU; none is visible to PyTorch"
    gbps = given or measured_copy_gbps()
    if gbps is None:
        return None, ("error: no measured copy rate for this GPU: run `python benchmark.py --peaks` first, "
                      "or pass --copy-gbps")
    return gbps, None


def measured_copy_gbps(device=None) -> float | None:
    """This GPU's measured copy rate (GB/s) from the ceilings `python benchmark.py --peaks` caches, or None."""
    path = peaks_path(torch.device(device or "cuda"))
    try:
        return float(json.loads(path.read_text())["copy_gbps"])
    except (OSError, ValueError, KeyError):
        return None
