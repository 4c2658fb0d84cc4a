"""The gradient of one large batch, in one forward and one backward: the fastest step, and the most memory.

Workload: two MLP blocks (d 1024 -> 4096 -> 1024 with GELU; fp32 weights under bf16 autocast, 16.8M
parameters) and a batch of 65,536 tokens (x and its regression target y, per call), loss = mean
squared error. The timed call is the gradient step a training loop runs before its optimizer step:
zero the gradients, forward, backward; it returns the gradients. (The optimizer step that follows is
the same for every variant and is left out.)

Autograd keeps each layer's input and pre-activation for the backward pass, in bf16: about 40 KB per
token across the stack, 2.6 GB for the batch, against 134 MB of fp32 weights and gradients. That is
the memory the batch size costs. optimized_grad_accumulation_* split the batch into micro-batches and
accumulate their gradients before the one optimizer step: the same gradient (up to bf16 rounding of
a differently shaped sum) for a fraction of the activations, paid in time. Both are trade-offs. The
harness's peak memory column is the cost; its time is what the trade buys back. Prepared once: the model
(its weights). Per call: the batch, x and y; the gradients are made afresh by every call.

Bound: compute. Napkin math: 6 x 16.8M parameters x 65,536 tokens = 6.6 TFLOP per call (forward 2,
backward 4 per parameter and token), 8.8 ms at the measured bf16 750 TFLOP/s.
"""
import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
import torch
import torch.nn.functional as F

from common import Workload

BOUND = "compute"
DEVICES = ("cuda", "cpu")


def make_model(d: int, hidden: int, seed: int, device) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    layers = []
    for _ in range(2):
        up, down = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, d)
        for lin in (up, down):
            torch.nn.init.normal_(lin.weight, std=lin.in_features ** -0.5, generator=g)
            torch.nn.init.normal_(lin.bias, std=0.02, generator=g)
        layers += [up, torch.nn.GELU(), down]
    return torch.nn.Sequential(*layers).to(device)


def workload(seed: int, device, quick: bool = False) -> Workload:
    # A CPU's bf16 matmul is a slow fallback (1.2 GFLOP/s measured on a 2-core EPYC without AVX-512), so a CPU
    # gets sizes of its own: a full run's call 1.6 GFLOP (the GPU's 6.6 TFLOP would take over an hour a call
    # there), --quick's 0.2 GFLOP (the old quick size took 7 s a call).
    device = torch.device(device)
    d, hidden, tokens = (64, 256, 512) if quick else (1024, 4096, 65536) if device.type == "cuda" else (128, 512, 1024)
    model = make_model(d, hidden, seed, device)
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(tokens, d, generator=g, device=device)
    y = torch.randn(tokens, d, generator=g, device=device)
    params = sum(p.numel() for p in model.parameters())
    return Workload(inputs={"model": model, "x": x, "y": y}, flops=6.0 * params * tokens, items=tokens,
                    item_name="tokens", precision="bf16",
                    note=f"{params / 1e6:.3g}M parameters, {tokens} tokens a step; gradients compared, not weights")


def gradient_step(model, x, y, micro_batches: int):
    """Zero the gradients, then forward and backward over `micro_batches` equal slices of the batch, each
    loss scaled by its share so the accumulated gradient is the full batch's mean-loss gradient."""
    for p in model.parameters():
        p.grad = None
    device_type = x.device.type
    for xs, ys in zip(x.chunk(micro_batches), y.chunk(micro_batches)):
        with torch.autocast(device_type, dtype=torch.bfloat16):
            loss = F.mse_loss(model(xs).float(), ys)
        (loss * (xs.shape[0] / x.shape[0])).backward()   # activations of this slice freed here
    return tuple(p.grad for p in model.parameters())


def prepare(w: Workload):
    model, x, y = w.inputs["model"], w.inputs["x"], w.inputs["y"]
    return lambda: gradient_step(model, x, y, micro_batches=1)


if __name__ == "__main__":
    from common import run_pair_file
    run_pair_file(__file__)
