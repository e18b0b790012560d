"""A first tiled matmul (notebook 03): one program per ``BLOCK_M x BLOCK_N`` tile of C, a loop over K.

Each program loads a ``BLOCK_M x BLOCK_K`` block of A and a ``BLOCK_K x BLOCK_N`` block of B per step,
multiplies them with ``tl.dot`` into a float32 accumulator, and stores its tile once at the end.
Every address comes from the strides, so transposed and sliced views work as they are; masks
cover edges that are not multiples of the blocks (rows, columns, and the last step of K)::

    c = matmul(a, b)                      # a (M, K), b (K, N), same floating dtype
    c = matmul(a.T, b[:, ::2])            # any strides

Notebooks 04 and 05 change the order in which programs take tiles, and the block sizes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course import runtime, timing


@triton.jit
def matmul_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                pid_m, pid_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Compute and store tile ``(pid_m, pid_n)`` of C: the work of one program, whatever its order."""
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # the rows of C (and A) this program owns
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # the columns of C (and B)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # float32 whatever the inputs: K sums stay precise
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rows[:, None] * stride_am + (k + ks)[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & ((k + ks)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + ks)[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=((k + ks)[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)  # zeros past K add nothing
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, c,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # A 2-D grid: program (i, j) computes tile (i, j); the hardware picks the order programs start in.
    matmul_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                tl.program_id(0), tl.program_id(1), BLOCK_M, BLOCK_N, BLOCK_K)


DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def launch(kernel, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *, block_m: int = 64, block_n: int = 64,
           block_k: int = 32) -> None:
    """Launch ``kernel`` (``matmul_kernel``'s signature) over every tile of ``c = a @ b``."""
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *, block_m: int = 64,
           block_n: int = 64, block_k: int = 32) -> torch.Tensor:
    """``a @ b`` by :func:`matmul_kernel`, for 2-D ``a`` (M, K) and ``b`` (K, N) of one floating dtype."""
    out, work = prepare("matmul", a, b, out, block_m=block_m, block_n=block_n, block_k=block_k)
    if work:
        launch(matmul_kernel, a, b, out, block_m=block_m, block_n=block_n, block_k=block_k)
    return out


def prepare(where: str, a, b, out, **blocks) -> tuple[torch.Tensor, bool]:
    """Check the inputs of ``where``; return the output (allocated if ``out`` is None) and whether
    a kernel has work to do (an empty C has none; K = 0 is all zeros, written here)."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            raise ValueError(f"{where}: {name} must be a 2-D tensor, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        if t.dtype not in DTYPES:
            raise TypeError(f"{where}: {name} is {t.dtype}; pass float16, bfloat16 or float32 (convert with .to())")
        if t.device.type != torch.device(runtime.DEVICE).type:
            raise ValueError(f"{where}: {name} is on {t.device}; move it with .to({runtime.DEVICE!r})")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{where}: a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns must equal b's rows")
    if a.dtype != b.dtype:
        raise TypeError(f"{where}: a is {a.dtype} but b is {b.dtype}; convert one with .to()")
    for name, size in blocks.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 16 or size & (size - 1):
            raise ValueError(f"{where}: {name}={size!r} must be a power of two, at least 16 (tl.dot's smallest)")
    M, N = a.shape[0], b.shape[1]
    if out is None:
        out = torch.empty((M, N), dtype=a.dtype, device=a.device)
    elif not isinstance(out, torch.Tensor) or out.shape != (M, N):
        raise ValueError(f"{where}: out has shape {tuple(getattr(out, 'shape', ()))}, expected ({M}, {N})")
    if M and N and a.shape[1] == 0:
        out.zero_()
    return out, bool(M and N and a.shape[1])


def accumulation_error(ks=(64, 256, 1024, 4096, 16384), *, block_k: int = 32, size: int = 64, seed: int = 0,
                       dtype=torch.float16):
    """What a 16-bit accumulator loses: relative errors of a ``size x K`` by ``K x size`` product of
    ``dtype`` (float16 or bfloat16) whose running sum is kept in ``dtype`` (rounded after every K step
    of ``block_k``) or in float32 (rounded once at the end), against float64. One row per K, for a
    table or a plot: ``{"K", "fp16 accumulator" (or "bf16 ..."), "fp32 accumulator"}``.

    Computed with torch on the CPU, a K step at a time as the kernel's loop does, so the figures
    are the same on every machine.
    """
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for K in ks:
        a = torch.randn(size, K, generator=generator).to(dtype)
        b = torch.randn(K, size, generator=generator).to(dtype)
        ref = a.double() @ b.double()
        acc16 = torch.zeros(size, size, dtype=dtype)
        acc32 = torch.zeros(size, size, dtype=torch.float32)
        for k in range(0, K, block_k):
            step = a[:, k:k + block_k].float() @ b[k:k + block_k].float()  # one tl.dot: exact products, fp32 sum
            acc16 = (acc16.float() + step).to(dtype)
            acc32 += step
        error = lambda c: (torch.linalg.vector_norm(c.double() - ref) / torch.linalg.vector_norm(ref)).item()  # noqa: E731
        name = "bf16" if dtype == torch.bfloat16 else "fp16"
        rows.append({"K": K, f"{name} accumulator": error(acc16), "fp32 accumulator": error(acc32.to(dtype))})
    return rows


# --- notebook 04: the order in which programs take tiles -----------------------------------------------

@triton.jit
def grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """The tile ``(pid_m, pid_n)`` of program ``pid`` in grouped order: programs sweep GROUP_M rows of
    tiles column by column, then the next GROUP_M rows. GROUP_M = 1 is plain row-major order."""
    tiles_per_group = GROUP_M * num_pid_n
    group = pid // tiles_per_group
    first_m = group * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)  # the last group may have fewer rows
    pid_m = first_m + (pid % tiles_per_group) % group_m
    pid_n = (pid % tiles_per_group) // group_m
    return pid_m, pid_n


@triton.jit
def _launch_order_kernel(m_ptr, n_ptr, num_pid_m, num_pid_n, GROUP_M: tl.constexpr, MAPPING: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = MAPPING(pid, num_pid_m, num_pid_n, GROUP_M)
    tl.store(m_ptr + pid, pid_m)
    tl.store(n_ptr + pid, pid_n)


def launch_order(num_pid_m: int, num_pid_n: int, group_m: int, mapping=grouped_tile):
    """Run ``mapping`` (a ``@triton.jit`` function like :func:`grouped_tile`) in a kernel, once per
    program, and return the tile of each program: ``(pid_m, pid_n)``, two tensors indexed by pid.
    The pictures of notebook 04 are drawn from this, so they show what the kernel really does."""
    if num_pid_m < 1 or num_pid_n < 1 or group_m < 1:
        raise ValueError(f"launch_order({num_pid_m}, {num_pid_n}, group_m={group_m}): all must be >= 1")
    programs = num_pid_m * num_pid_n
    pid_m = torch.full((programs,), -1, dtype=torch.int32, device=runtime.DEVICE)
    pid_n = torch.full((programs,), -1, dtype=torch.int32, device=runtime.DEVICE)
    _launch_order_kernel[(programs,)](pid_m, pid_n, num_pid_m, num_pid_n, GROUP_M=group_m, MAPPING=mapping)
    return pid_m.cpu(), pid_n.cpu()


def order_map(pid_m: torch.Tensor, pid_n: torch.Tensor, num_pid_m: int, num_pid_n: int) -> torch.Tensor:
    """The launch index of every tile (``num_pid_m x num_pid_n``); -1 where no program took the tile
    (where several did, the last one)."""
    order = torch.full((num_pid_m, num_pid_n), -1, dtype=torch.int64)
    inside = (pid_m >= 0) & (pid_m < num_pid_m) & (pid_n >= 0) & (pid_n < num_pid_n)
    pids = torch.arange(len(pid_m))[inside]
    order[pid_m[inside].long(), pid_n[inside].long()] = pids
    return order


def waves_footprint(pid_m: torch.Tensor, pid_n: torch.Tensor, wave: int) -> dict:
    """:func:`wave_footprint` of every whole wave (``wave`` programs after another), averaged:
    the first wave alone can flatter an order."""
    counts = [wave_footprint(pid_m[start:], pid_n[start:], wave) for start in range(0, len(pid_m) - wave + 1, wave)]
    return {key: sum(c[key] for c in counts) / len(counts) for key in counts[0]} | {"waves": len(counts)}


def wave_footprint(pid_m: torch.Tensor, pid_n: torch.Tensor, wave: int) -> dict:
    """What the first ``wave`` programs (one per SM) need at once: the distinct row blocks of A and
    column blocks of B they read. Each block is a strip of K columns (rows), so fewer blocks mean
    fewer bytes that must stay in L2 for the wave to reuse them."""
    first_m, first_n = pid_m[:wave], pid_n[:wave]
    a_blocks, b_blocks = len(torch.unique(first_m)), len(torch.unique(first_n))
    return {"programs": min(wave, len(pid_m)), "A row blocks": a_blocks, "B column blocks": b_blocks,
            "blocks in all": a_blocks + b_blocks}


@triton.jit
def swizzled_tile(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """The same mapping by Triton's built-in: ``tl.swizzle2d`` remaps program ``pid``'s row-major tile."""
    return tl.swizzle2d(pid // num_pid_n, pid % num_pid_n, num_pid_m, num_pid_n, GROUP_M)


@triton.jit
def grouped_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                          stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr):
    # A 1-D grid: the kernel itself maps its program id to a tile, in grouped order.
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    matmul_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K)


def grouped_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *, group_m: int = 8,
                   block_m: int = 128, block_n: int = 128, block_k: int = 64, num_warps: int = 8,
                   num_stages: int = 4) -> torch.Tensor:
    """``a @ b`` by :func:`grouped_matmul_kernel`, programs taking tiles in grouped order
    (``group_m=1``: row-major). The default blocks suit an H100; with 4 stages they take 128 KB of
    shared memory, so one program runs per SM (notebook 05 counts it)."""
    if isinstance(group_m, bool) or not isinstance(group_m, int) or group_m < 1:
        raise ValueError(f"grouped_matmul: group_m={group_m!r} must be an int >= 1 (1 is row-major order)")
    out, work = prepare("grouped_matmul", a, b, out, block_m=block_m, block_n=block_n, block_k=block_k)
    if work:
        M, K = a.shape
        N = b.shape[1]
        grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
        grouped_matmul_kernel[grid](a, b, out, M, N, K, *a.stride(), *b.stride(), *out.stride(), BLOCK_M=block_m,
                                    BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, num_warps=num_warps,
                                    num_stages=num_stages)
    return out


# --- notebook 05: what a configuration costs --------------------------------------------------------

def shared_bytes(block_m: int, block_n: int, block_k: int, stages: int, element_bytes: int = 2) -> int:
    """Shared memory the pipelined loop of :func:`matmul_kernel` holds: ``stages`` buffers of one
    ``block_m x block_k`` block of A and one ``block_k x block_n`` block of B."""
    return stages * (block_m * block_k + block_k * block_n) * element_bytes


def waves(M: int, N: int, block_m: int, block_n: int, sms: int) -> dict:
    """How ``M x N`` tiles of ``block_m x block_n`` fall on ``sms`` SMs, one tile per SM at a time:
    the tiles, the waves (the last one possibly partial), and how full the last wave is."""
    tiles = -(-M // block_m) * -(-N // block_n)
    count = -(-tiles // sms)
    busy = tiles - (count - 1) * sms
    return {"tiles": tiles, "waves": count, "busy in the last wave": busy, "idle in the last wave": sms - busy,
            "efficiency": tiles / (count * sms)}


def _config(block_m, block_n, block_k, warps, stages, group_m=8):
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": group_m},
                         num_warps=warps, num_stages=stages)


# The configurations tuned_matmul tries: 16-bit tiles that fit an H100's 227 KB of shared memory
# per program, from large (most reuse) to small (more tiles for small problems).
TUNING_CONFIGS = [_config(*c) for c in [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 4),
                                        (128, 128, 64, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4),
                                        (64, 64, 64, 4, 5), (64, 256, 32, 4, 4)]]

tuned_matmul_kernel = triton.autotune(configs=TUNING_CONFIGS, key=["M", "N", "K"],
                                      do_bench=timing.autotune_bench if runtime.INTERPRET else None)(
    grouped_matmul_kernel)


def tuned_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` by :func:`grouped_matmul_kernel` in the fastest of :data:`TUNING_CONFIGS` for
    this (M, N, K), chosen by ``triton.autotune`` at the first call of each shape
    (``tuned_matmul_kernel.best_config`` is the one it kept)."""
    out, work = prepare("tuned_matmul", a, b, out)
    if work:
        M, K = a.shape
        N = b.shape[1]
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
        tuned_matmul_kernel[grid](a, b, out, M, N, K, *a.stride(), *b.stride(), *out.stride())
    return out


def kept_config(M: int, N: int, K: int) -> str:
    """The configuration :func:`tuned_matmul` kept for (M, N, K), e.g. ``"128x256x64, 8 warps,
    3 stages"``; "not tuned" before its first call on that shape."""
    for key, config in tuned_matmul_kernel.cache.items():
        if tuple(key[:3]) == (M, N, K):
            kw = config.kwargs
            return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']}, {config.num_warps} warps, "
                    f"{config.num_stages} stages")
    return "not tuned"


def time_matmuls(shapes, impls: dict, *, dtype=torch.float16, rounds: int = 3, desc: str = "shapes") -> list[dict]:
    """Time each implementation on each ``(M, N, K)`` of ``shapes``, with fresh random inputs;
    ``impls`` maps a label to ``fn(a, b, c)`` that stores ``a @ b`` into ``c``. The implementations
    take turns, ``rounds`` times, and each keeps its median: a GPU's clock drifts with its
    temperature, and turns spread the drift over all of them. One JSON-ready row per shape: ``M``,
    ``N``, ``K``, ``shape`` and, per label, ``<label>_ms`` and ``<label>_tflops`` (2·M·N·K operations)::

        rows = time_matmuls([(4096, 4096, 4096)], {"torch": lambda a, b, c: torch.matmul(a, b, out=c)})
    """
    if not impls:
        raise ValueError("time_matmuls(impls=...): pass at least one {label: fn(a, b, c)} entry")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"time_matmuls(rounds={rounds!r}): pass an int, at least 1")
    rows = []
    for M, N, K in timing.progress(list(shapes), desc):
        a = torch.randn(M, K, device=runtime.DEVICE, dtype=dtype)
        b = torch.randn(K, N, device=runtime.DEVICE, dtype=dtype)
        c = torch.empty(M, N, device=runtime.DEVICE, dtype=dtype)
        row = {"shape": f"{M} x {N} x {K}", "M": M, "N": N, "K": K}
        medians = timing.in_turns({label: lambda fn=fn: fn(a, b, c) for label, fn in impls.items()}, rounds=rounds)
        for label, ms in medians.items():
            row[f"{label}_ms"] = ms
            row[f"{label}_tflops"] = timing.tflops(2 * M * N * K, ms)
        rows.append(row)
        del a, b, c  # free this shape's inputs before allocating the next
    return rows
