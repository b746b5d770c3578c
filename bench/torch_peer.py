"""What the PyTorch peers of bench/fusion.sh share: the mode (eager or
torch.compile), the timed loop and the last-line JSON. Works with PyTorch 1.13
(Debian's python3-torch: eager only) and 2.x (bench/torch_venv.sh)."""
import json, resource, statistics, sys, time

import torch

# Peak RSS right after importing torch: what the libraries alone take (PyPI's
# 2.x wheels load CUDA libraries even on a machine without a GPU).
import_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def compile_or_exit(mode):
    """Ends the program with a clear message when mode is "compile" and this
    PyTorch has no torch.compile (1.x)."""
    if mode == "compile" and not hasattr(torch, "compile"):
        sys.exit("PyTorch %s has no torch.compile (it came with 2.0): run --mode compile with the python of "
                 "bench/torch_venv.sh" % torch.__version__)


def prepare(mode, model_step, optimizer):
    """The step to time. Eager: model_step() (forward, loss, backward), then
    optimizer.step(). Compile: the model's forward and backward compiled by
    torch.compile (inductor, the default backend), and the optimizer's step
    compiled too (PyTorch's recipe for compiled optimizers), so that the
    elementwise work of AdamW is fused as well."""
    if mode == "eager":
        def step():
            optimizer.zero_grad(set_to_none=True)
            loss = model_step()
            optimizer.step()
            return loss.item()
        return step

    @torch.compile(fullgraph=False)
    def opt_step():
        optimizer.step()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = model_step()
        opt_step()
        return loss.item()
    return step


def run(step, mode, steps, fields, emit_line=True):
    """Times step(): warm-up first (eager: one step, first-touch allocation
    and oneDNN primitive creation; compile: three steps, which include
    compiling, and recompiling once the optimizer has state), then `steps`
    timed steps. Prints one JSON line: fields plus the median ms per step,
    warm-up seconds, peak RSS (and that right after importing torch) and the
    torch version; returns it as a dict (emit_line=False: only returns it)."""
    warmup = 1 if mode == "eager" else 3
    t0 = time.perf_counter()
    for _ in range(warmup):
        step()
    warmup_s = time.perf_counter() - t0
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    ms = statistics.median(times) * 1e3
    out = {"peer": "pytorch", "version": torch.__version__, "mode": mode}
    out.update(fields)
    out.update({"threads": torch.get_num_threads(), "steps": steps, "ms_per_step": round(ms, 3),
                "warmup_steps": warmup, "warmup_seconds": round(warmup_s, 3),
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                "import_rss_mb": import_rss_mb})
    if emit_line:
        emit(out)
    return out


def emit(result):
    print(json.dumps(result), flush=True)
