"""The capstone (notebook 12): a transformer block's GEMMs end to end, every kernel of the course on one
roofline, and the numerics of low-precision GEMMs.

    shapes = layer_shapes(LLAMA3_8B)              # {"qkv": (N, K), "o": ..., "gate_up": ..., "down": ...}
    rows = block_benchmark()                      # the four GEMMs back to back: course.gemm against cuBLAS
    points = course_points()                      # one roofline point per notebook, from the records
    fig = course_roofline(hardware.lookup("NVIDIA H100 80GB HBM3"))   # those points, the compute-bound ones zoomed
    rows = quantization_error()                   # int8 with per-row scales against float16, outliers or not
"""

from __future__ import annotations

import math

import torch

from course import runtime

#: Llama-3 8B's block: width, query heads, key/value heads, head dimension, MLP hidden size.
LLAMA3_8B = dict(width=4096, heads=32, kv_heads=8, head_dim=128, hidden=14336)


def layer_shapes(model: dict = LLAMA3_8B) -> dict:
    """``{layer: (N, K)}`` of the block's four GEMMs (``y = x @ W.T``, W of shape (N, K)): the fused
    q, k and v projection, the attention output, the fused gate and up projections, the down projection."""
    qkv = (model["heads"] + 2 * model["kv_heads"]) * model["head_dim"]
    return {"qkv": (qkv, model["width"]), "o": (model["width"], model["heads"] * model["head_dim"]),
            "gate_up": (2 * model["hidden"], model["width"]), "down": (model["width"], model["hidden"])}


def _loop_ms(fn, iters: int) -> float:
    """Milliseconds per call of ``fn`` called back to back ``iters`` times, as a model's forward pass
    calls its layers: host time and GPU time overlap, and whichever is longer sets the pace."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def block_benchmark(tokens=(1, 16, 64, 512, 4096, 8192), model: dict = LLAMA3_8B, dtype=torch.bfloat16,
                    graph_up_to: int = 64) -> list[dict]:
    """The block's four GEMMs back to back (attention and the elementwise work left out), through
    ``course.gemm.matmul`` and through ``torch.matmul`` (cuBLAS): milliseconds per block for each number
    of tokens, called eagerly, and for batches up to ``graph_up_to`` tokens also replayed from a CUDA graph."""
    from course import gemm, timing

    shapes = layer_shapes(model)
    weights = {name: torch.randn(N, K, device=runtime.DEVICE, dtype=dtype) / K ** 0.5
               for name, (N, K) in shapes.items()}
    rows = []
    for M in tokens:
        inputs = {name: torch.randn(M, K, device=runtime.DEVICE, dtype=dtype) for name, (N, K) in shapes.items()}
        outs = {name: torch.empty(M, N, device=runtime.DEVICE, dtype=dtype) for name, (N, K) in shapes.items()}

        def ours():
            for name in shapes:
                gemm.matmul(inputs[name], weights[name].T, out=outs[name])

        def cublas():
            for name in shapes:
                torch.matmul(inputs[name], weights[name].T, out=outs[name])

        iters = max(20, min(200, int(100 / (M * 1e-3 + 0.2))))  # about 0.1 s a measurement
        calls = {"ours_ms": ours, "torch_ms": cublas}
        if M <= graph_up_to:
            calls.update(ours_graph_ms=timing.cuda_graph(ours)[0], torch_graph_ms=timing.cuda_graph(cublas)[0])
        row = dict(M=M, **timing.in_turns(calls, measure=lambda call: _loop_ms(call, iters)))
        flops = sum(2 * M * N * K for N, K in shapes.values())
        row["tflops"] = flops / min(row["ours_ms"], row.get("ours_graph_ms", float("inf"))) / 1e9
        rows.append(row)
    return rows


def _gemm_point(label, M, N, K, ms, element_bytes=2):
    from course.plots import Point

    return Point(label, 2.0 * M * N * K, element_bytes * (M * K + K * N + M * N), ms)


#: The records :func:`course_points` reads, one per notebook.
POINT_RECORDS = ("vector_add", "fusion_bias_gelu", "naive_matmul", "grouped_matmul", "tuned_matmul",
                 "persistent_matmul", "stages_matmul", "quantized_linear", "gemm_h100-sxm", "flash_attention",
                 "fused_mlp")


def course_points() -> list:
    """One roofline point per kernel the course built, from the records (the largest problem of each,
    and a decode shape of ``course.gemm``), with each kernel's compulsory bytes (inputs read once, output written once)."""
    from course import records
    from course.plots import Point

    loaded = {name: records.load(name) for name in POINT_RECORDS}  # the banner's dates come from the same list

    def last(name):
        return loaded[name].rows[-1]

    points = []
    r = last("vector_add")
    points.append(Point("01 vector add (fp32)", r["n"], 12 * r["n"], r["triton_ms"]))
    r = last("fusion_bias_gelu")  # bytes from the measured bandwidth; one operation counted per element
    points.append(Point("02 fused bias + GELU", r["n"], r["fused_gbps"] * r["fused_ms"] * 1e6, r["fused_ms"]))
    for label, name, key in (("03 naive matmul", "naive_matmul", "this kernel_ms"),
                             ("04 grouped matmul", "grouped_matmul", "grouped (GROUP_M = 8)_ms"),
                             ("05 autotuned", "tuned_matmul", "tuned_ms"),
                             ("06 persistent", "persistent_matmul", "persistent_ms"),
                             ("07 with the stages", "stages_matmul", "with the stages_ms"),
                             ("08 fused linear", "quantized_linear", "fused linear_ms")):
        r = last(name)
        points.append(_gemm_point(f"{label}, {r['M']}x{r['N']}x{r['K']}", r["M"], r["N"], r["K"], r[key]))
    gemm_rows = loaded["gemm_h100-sxm"].rows
    for name in ("square 8192", "8B qkv M=16"):
        r = next(r for r in gemm_rows if r["dtype"] == "bf16" and r["name"] == name)
        points.append(_gemm_point(f"09-10 course.gemm, {r['M']}x{r['N']}x{r['K']}", r["M"], r["N"], r["K"],
                                  r["auto_ms"]))
    r = max((r for r in loaded["flash_attention"].rows if r["head_dim"] == 128 and not r["causal"]),
            key=lambda r: r["seq"])
    io = 4 * r["batch"] * r["heads"] * r["seq"] * r["head_dim"] * 2
    points.append(Point(f"11 flash attention, seq {r['seq']}", r["tflops"] * r["ms"] * 1e9, io, r["ms"]))
    r = next(r for r in loaded["fused_mlp"].rows if r["kind"] == "SwiGLU" and r["M"] == 4096)
    flops = 2 * r["M"] * r["d"] * r["hidden"] * 3
    weights = 2 * 3 * r["d"] * r["hidden"]
    moved = weights + 2 * 2 * r["M"] * r["d"] + r["hidden_mb"]["fused"] * 1e6  # weights, x and y, hidden twice
    points.append(Point(f"11 SwiGLU MLP, fused, {r['M']} tokens", flops, moved, r["fused_ms"]))
    return points


def points_record():
    """A :class:`course.records.Record` that stands for all of :data:`POINT_RECORDS`: the GPU they
    were recorded on and the range of their dates (``"2026-11-21 to 2026-11-24"``), for the banner."""
    from course import records

    metas = [records.load(name).meta for name in POINT_RECORDS]
    dates = sorted({m.get("date", "undated") for m in metas})
    gpus = sorted({m.get("gpu", "an unknown GPU") for m in metas})
    date = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    return records.Record(rows=[], meta={"gpu": " / ".join(gpus), "date": date})


def course_roofline(machine, points=None, *, zoom=((1600, 10000), (450, 800)), title: str = ""):
    """:func:`course.plots.roofline` of :func:`course_points` under a banner with the records' range
    of dates, and under it a second panel that spreads out the compute-bound GEMMs (``zoom``: their
    ranges of intensity, log, and of TFLOP/s, linear), which the log-log plot stacks on one another."""
    import matplotlib.pyplot as plt

    from course import plots

    points = course_points() if points is None else points
    fig, (ax, near) = plt.subplots(2, 1, figsize=(9, 8), layout="constrained", height_ratios=[1.1, 0.9])
    plots.roofline(machine, points, dtype="bf16", record=points_record(), title=title, ax=ax)
    (x0, x1), (y0, y1) = zoom
    shown = [p for p in points if x0 <= p.intensity <= x1 and y0 <= p.tflops <= y1]
    tags = {}  # one label per cluster of points that sit on one another: "06, 07"
    for line in ax.lines:  # the roofline's markers, the same styles
        label = line.get_label()
        point = next((p for p in shown if label.startswith(p.label + ":")), None)
        if point is not None:
            near.plot(point.intensity, point.tflops, ls="none", marker=line.get_marker(), color=line.get_color(),
                      ms=9, mew=2)
            words = point.label.split(",")[0].split()  # "07", or "11 flash" where "11" is not unique
            tag = " ".join(words[:2]) if sum(p.label.startswith(words[0] + " ") for p in shown) > 1 else words[0]
            spot = next((xy for xy in tags if abs(xy[0] / point.intensity - 1) < 0.03
                         and abs(xy[1] - point.tflops) < 0.03 * (y1 - y0)), (point.intensity, point.tflops))
            tags[spot] = tags.get(spot, []) + [(tag, point.tflops)]
    placed = []  # labels above their points; one that would touch its left neighbour's goes below instead
    for (x, _), cluster in sorted(tags.items()):
        y = max(y for _, y in cluster)
        below = any(math.log10(x / px) < 0.15 and abs(y - py) < 0.1 * (y1 - y0) for px, py in placed)
        near.annotate(", ".join(sorted(t for t, _ in cluster)), (x, min(y for _, y in cluster) if below else y),
                      xytext=(0, -11 if below else 9), textcoords="offset points", ha="center",
                      va="top" if below else "baseline", fontsize=9)
        placed.append((x, y))
    near.set_xscale("log")
    near.set_xlim(x0, x1)
    near.set_ylim(y0, y1)
    ticks = [t for t in (1600, 2000, 3000, 4000, 6000, 8000, 10000) if x0 <= t <= x1]
    near.set_xticks(ticks, [f"{t:,}" for t in ticks])
    near.minorticks_off()
    near.set_xlabel("arithmetic intensity (FLOP / byte), log")
    near.set_ylabel("TFLOP/s, linear")
    near.set_title(f"the compute-bound kernels, zoomed: {x0:,}-{x1:,} FLOP/byte, {y0}-{y1} TFLOP/s", fontsize=10)
    near.grid(alpha=0.3)
    return fig


def quantization_error(M: int = 64, K: int = 256, N: int = 48, outlier_scale: float = 50.0, seed: int = 0,
                       **blocks) -> list[dict]:
    """Relative error against float64 of ``x @ w.T`` computed in float16 and in int8 with one scale per
    row of x and of w (``epilogues.quantize``, ``epilogues.linear``), for ordinary activations and for
    activations whose first 4 channels are ``outlier_scale`` times larger (as some channels of large
    language models are)."""
    from course import epilogues
    from course.check import rel_error

    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(N, K, generator=generator)
    rows = []
    for case in ("ordinary", "outlier channels"):
        x = torch.randn(M, K, generator=generator)
        if case == "outlier channels":
            x[:, :4] *= outlier_scale
        ref = x.double() @ w.double().T
        x_dev, w_dev = x.to(runtime.DEVICE), w.to(runtime.DEVICE)
        fp16 = epilogues.linear(x_dev.half(), w_dev.half(), out_dtype=torch.float32, **blocks)
        (xq, xs), (wq, ws) = epilogues.quantize(x_dev), epilogues.quantize(w_dev)
        int8 = epilogues.linear(xq, wq, a_scale=xs, w_scale=ws, **blocks)
        rows.append(dict(case=case, fp16=rel_error(fp16, ref), int8=rel_error(int8, ref)))
    return rows
