"""Stages: device-side building blocks for GEMM kernels in Triton.

One file that imports only ``triton`` and the standard library: copy it into your own project.
Everything here runs *inside* ``@triton.jit`` kernels (compiled on NVIDIA or AMD GPUs, or on the
CPU through Triton's interpreter); nothing can be called from host Python.

What is in it, top to bottom::

    Tile             a BLOCK_M x BLOCK_N tile at (pid_m, pid_n): indices, bounds, scale, bias
    GemmContext      the GEMM's compile-time knobs and its K loop (reduce_tile, reduce_axis)
    ScheduleContext  which tiles / K-iterations a program works on (persistent and Stream-K)
    InputView        a matrix to read tiles from (A, B)
    OutputView       a matrix to write tiles to (C), with the epilogue scale -> bias -> convert
    ScaleView        per-row scales of A and per-column scales of B (quantized GEMM)
    BiasView         a bias vector, one value per output column
    DescriptorView, DescriptorOutputView   the same views through tensor descriptors (TMA)
    make_*_view      factories that accept Python ints as well as tensors
    chiplet_transform, chiplet_transform_chunked   program-id remaps for multi-chiplet GPUs

A persistent GEMM with them::

    @triton.jit
    def gemm_kernel(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                    stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr, EVEN_K: tl.constexpr):
        tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
        tensorB = make_tensor_view(B, K, N, stride_bk, stride_bn)
        tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
        ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, even_k=EVEN_K)
        sched = ScheduleContext(M, N, K, ctx)
        start, total, stride = sched.persistent_tile_range()
        for tile_id in range(start, total, stride):
            out_tile = sched.get_tile_from_idx(tile_id)
            acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
            tensorC.store(acc, out_tile)

    gemm_kernel[(NUM_SMS,)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                            128, 256, 64, NUM_SMS, K % 64 == 0, num_warps=8)  # 4 warps spill here

Stream-K (``ScheduleContext(..., streamk_tiles=S)``, ``streamk_span``, ``streamk_fixup``), the
decisions this file makes where its reference documents are silent, and why the interpreter shim
below exists: ``notes/stages.md``. The shim (``_aggregate``, ``_const``, ``_tensor``) only makes
the classes work under ``TRITON_INTERPRET=1``; skip it on a first reading.
"""

import os

import triton
import triton.language as tl


# ----------------------------------------------------------------------------------------------
# The interpreter shim: makes the aggregates below work under TRITON_INTERPRET=1. Skip it on a
# first reading; notes/stages.md says what it repairs.
# ----------------------------------------------------------------------------------------------
def _interpreting() -> bool:
    """True when Triton runs kernels through its CPU interpreter (decided at import, like Triton)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_INTERPRET = _interpreting()
_IN_INTERPRETER: tl.constexpr = tl.constexpr(_INTERPRET)  # readable inside @triton.jit code


def _aggregate(cls):
    """Triton's aggregate decorator, made to work under the interpreter too.

    Compiled, this is ``tl.core._aggregate``: the class becomes a device-side struct whose fields
    live in registers (tensors) or are baked in (constexpr). The interpreter drops the class's
    ``@triton.jit`` methods, so there the class stays a plain Python class whose methods are the
    functions the decorator wrapped.
    """
    if not _INTERPRET:
        # The constructor is plain Python that Triton calls while compiling (with `_semantic`);
        # marked as a builtin, Triton's dependency tracker accepts it as such.
        cls.__init__.__triton_builtin__ = True
        return tl.core._aggregate(cls)
    for name, member in list(vars(cls).items()):
        python_fn = getattr(member, "fn", None)
        if callable(python_fn) and hasattr(member, "rewrite"):  # an interpreted @triton.jit
            setattr(cls, name, python_fn)
    return cls


def _const(value):
    """A compile-time field value: ``tl.constexpr`` compiled, the plain value in the interpreter."""
    if isinstance(value, tl.constexpr):
        value = value.value
    return value if _INTERPRET else tl.constexpr(value)


def _tensor(value, _semantic):
    """A runtime field value. Triton hands ints equal to 1 (and literals) in as constants: make
    them tensors, or the aggregate rejects them. The interpreter needs no conversion."""
    if _semantic is None or isinstance(value, tl.tensor):
        return value
    return _semantic.to_tensor(value)


def _describe(value):
    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, tl.tensor):
        return f"a value of type {value.dtype}"
    return f"{type(value).__name__} {value!r}"


def _check_view_args(view, pointers, integers):
    """Host-side misuse a view can see when it is built (compile time; no cost in the kernel):
    a pointer argument that is no pointer (``a.data_ptr()`` or a number passed for the tensor),
    a size or stride that is no integer (a float passed from the host)."""
    for name, value in pointers:
        if not (isinstance(value, tl.tensor) and value.dtype.is_ptr()):
            raise TypeError(f"{view}: {name} must be a pointer (pass the torch tensor itself to the kernel, not "
                            f"t.data_ptr() or a number), got {_describe(value)}")
    for name, value in integers:
        raw = value.value if isinstance(value, tl.constexpr) else value
        ok = isinstance(raw, int) or (isinstance(raw, tl.tensor) and raw.dtype.is_int() and not raw.type.is_block())
        if not ok:
            raise TypeError(f"{view}: {name} must be an integer (a size or a stride in elements), "
                            f"got {_describe(value)}")


@triton.jit
def _check_k(A, B, K, block_k: tl.constexpr, even_k: tl.constexpr):
    # Promises a kernel author makes, checked where they are cheap to see: A and B agree on K, and
    # even_k=True (no masks in the K loop) really has K % block_k == 0; broken, the K tail would be
    # dropped (or, with K < block_k, C would be zero) without a word. Under the interpreter the
    # check always runs; compiled it is a device assertion, active in debug mode (TRITON_DEBUG=1 or
    # kernel[grid](..., debug=True)) and free otherwise.
    if _IN_INTERPRETER:
        tl.static_assert(B.rows == K, "stages: A has K columns but B has a different number of rows: "
                                      "build both views with the same K")
        if even_k:
            tl.static_assert(K % block_k == 0, "stages: GemmContext(even_k=True) promises K % block_k == 0, but K "
                                               "is not a multiple of block_k (the K tail would be dropped): pass "
                                               "even_k=EVEN_K, with EVEN_K = K % BLOCK_K == 0 from the host")
    else:
        tl.device_assert(B.rows == K, "stages: A has K columns but B has a different number of rows")
        if even_k:
            tl.device_assert(K % block_k == 0, "stages: GemmContext(even_k=True) but K % block_k != 0")


def _check_positive(name, value, power_of_two=False):
    value = value.value if isinstance(value, tl.constexpr) else value
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"GemmContext: {name} must be a positive integer known at compile time "
                         f"(a tl.constexpr), got {value!r}")
    if power_of_two and value & (value - 1):
        lower, upper = 1 << (value.bit_length() - 1), 1 << value.bit_length()
        raise ValueError(f"GemmContext: {name}={value} is not a power of two; Triton tiles need "
                         f"power-of-two sizes, e.g. {lower} or {upper}")


# ----------------------------------------------------------------------------------------------
# Tile
# ----------------------------------------------------------------------------------------------
@_aggregate
class Tile:
    """A ``block_m x block_n`` tile at tile coordinates ``(pid_m, pid_n)``.

    The coordinates are runtime values, the sizes compile-time constants. Tiles of A and B use
    the same class: the A tile of K step ``k`` is ``Tile(pid_m, k, BLOCK_M, BLOCK_K)``::

        out_tile = Tile(pid_m, pid_n, BLOCK_M, BLOCK_N)
        rm, rn = out_tile.indices()              # global row and column indices
        rm, rn, mask = out_tile.layout(M, N)     # wrapped indices + in-bounds mask
    """

    pid_m: tl.tensor
    pid_n: tl.tensor
    block_m: tl.constexpr
    block_n: tl.constexpr

    def __init__(self, pid_m, pid_n, block_m, block_n, _semantic=None):
        self.pid_m = _tensor(pid_m, _semantic)
        self.pid_n = _tensor(pid_n, _semantic)
        self.block_m = _const(block_m)
        self.block_n = _const(block_n)

    @triton.jit
    def indices(self):
        """Row indices ``[block_m]`` and column indices ``[block_n]`` of this tile.

        Example: ``rm, rn = tile.indices()``; they may run past the matrix (see ``layout``).
        """
        rm = self.pid_m * self.block_m + tl.arange(0, self.block_m)
        rn = self.pid_n * self.block_n + tl.arange(0, self.block_n)
        return rm, rn

    @triton.jit
    def layout(self, M, N):
        """Indices wrapped into ``[0, M) x [0, N)`` and the ``[block_m, block_n]`` in-bounds mask.

        The mask comes from the raw indices, before wrapping. Wrapped indices keep every load
        inside the matrix without a mask; what is computed from the wrapped rows and columns is
        dropped by the masked store. Example: ``rm, rn, mask = tile.layout(M, N)``.
        """
        rm, rn = self.indices()
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        return rm % M, rn % N, mask

    @triton.jit
    def scale(self, acc, A_scale_ptr, B_scale_ptr, M, N, stride_a=1, stride_b=1):
        """``acc * a_scale[row] * b_scale[col]`` in float32 (quantized GEMM epilogue).

        Example: ``acc = tile.scale(acc, A_scale_ptr, B_scale_ptr, M, N)``.
        """
        return ScaleView(A_scale_ptr, B_scale_ptr, M, N, stride_a, stride_b).apply(acc, self)

    @triton.jit
    def bias(self, acc, bias_ptr, N, stride_bias=1):
        """``acc + bias[col]``: one bias value per output column (length N).

        Example: ``acc = tile.bias(acc, bias_ptr, N)``.
        """
        return BiasView(bias_ptr, N, stride_bias).apply(acc, self)


# ----------------------------------------------------------------------------------------------
# GemmContext: compile-time configuration and the K loop
# ----------------------------------------------------------------------------------------------
@_aggregate
class GemmContext:
    """Every compile-time knob of a GEMM kernel, and the K loop that fills an accumulator.

    ``block_m/n/k``: tile sizes (powers of two). ``num_sms``: programs launched by a persistent
    kernel. ``num_xcds``, ``chunk_size``: chiplet remap (``ScheduleContext``). ``group_size_m``:
    grouped tile order. ``cache_modifier_a/b``: passed to the loads (".cg": L2 only, "" none).
    ``acc_dtype``: accumulator type (float32; int32 is forced when ``quantized``).
    ``allow_tf32``: fp32 inputs may use TF32 tensor cores (the backend default) instead of exact
    fp32 ("ieee"). ``even_k``: K is a multiple of ``block_k`` (no masks at all in the K loop).
    ``quantized``: int8 inputs, int32 accumulation. Example::

        ctx = GemmContext(block_m=128, block_n=256, block_k=64, num_sms=NUM_SMS, even_k=EVEN_K)
        acc = ctx.reduce_axis(tensorA, tensorB, out_tile)
    """

    block_m: tl.constexpr
    block_n: tl.constexpr
    block_k: tl.constexpr
    num_sms: tl.constexpr
    num_xcds: tl.constexpr
    group_size_m: tl.constexpr
    chunk_size: tl.constexpr
    cache_modifier_a: tl.constexpr
    cache_modifier_b: tl.constexpr
    acc_dtype: tl.constexpr
    allow_tf32: tl.constexpr
    even_k: tl.constexpr
    quantized: tl.constexpr

    def __init__(self, block_m, block_n, block_k, num_sms, num_xcds=1, group_size_m=8, chunk_size=1,
                 cache_modifier_a=".cg", cache_modifier_b=".cg", acc_dtype=tl.float32,
                 allow_tf32=True, even_k=True, quantized=False):
        for name, value in (("block_m", block_m), ("block_n", block_n), ("block_k", block_k)):
            _check_positive(name, value, power_of_two=True)
        for name, value in (("num_sms", num_sms), ("num_xcds", num_xcds),
                            ("group_size_m", group_size_m), ("chunk_size", chunk_size)):
            _check_positive(name, value)
        self.block_m = _const(block_m)
        self.block_n = _const(block_n)
        self.block_k = _const(block_k)
        self.num_sms = _const(num_sms)
        self.num_xcds = _const(num_xcds)
        self.group_size_m = _const(group_size_m)
        self.chunk_size = _const(chunk_size)
        self.cache_modifier_a = _const(cache_modifier_a)
        self.cache_modifier_b = _const(cache_modifier_b)
        self.acc_dtype = _const(tl.int32 if _const(quantized) else acc_dtype)
        self.allow_tf32 = _const(allow_tf32)
        self.even_k = _const(even_k)
        self.quantized = _const(quantized)

    @triton.jit
    def init_accumulator(self):
        """A ``[block_m, block_n]`` accumulator of zeros (int32 when quantized).

        Example: ``acc = ctx.init_accumulator()``.
        """
        return tl.zeros((self.block_m, self.block_n), dtype=self.acc_dtype)

    @triton.jit
    def _dot(self, a, b, acc):
        # acc += a @ b on the tensor cores. input_precision=None is the backend's default (TF32 for
        # fp32 inputs on NVIDIA); "ieee" asks for exact fp32. Integers accumulate in int32.
        tl.static_assert(self.quantized or not a.dtype.is_int(),
                         "integer (int8) inputs need GemmContext(..., quantized=True): int32 accumulation")
        if self.quantized:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        elif self.allow_tf32:
            acc = tl.dot(a, b, acc, out_dtype=self.acc_dtype)
        else:
            acc = tl.dot(a, b, acc, input_precision="ieee", out_dtype=self.acc_dtype)
        return acc

    @triton.jit
    def reduce_tile(self, A, B, out_tile, k_idx, acc, boundary: tl.constexpr = False):
        """One K step: ``acc + A[tile rows, k-block k_idx] @ B[k-block k_idx, tile cols]``.

        ``boundary=True`` masks the loads (needed for the last K step when K % block_k != 0).
        Simple, but it rebuilds pointers every step: prefer ``reduce_axis`` in real kernels::

            acc = ctx.init_accumulator()
            for k_idx in range(tl.cdiv(K, BLOCK_K)):
                acc = ctx.reduce_tile(tensorA, tensorB, out_tile, k_idx, acc, boundary=True)
        """
        a_tile = Tile(out_tile.pid_m, k_idx, self.block_m, self.block_k)
        b_tile = Tile(k_idx, out_tile.pid_n, self.block_k, self.block_n)
        a = A.load(a_tile, boundary=boundary, cache_modifier=self.cache_modifier_a)
        b = B.load(b_tile, boundary=boundary, cache_modifier=self.cache_modifier_b)
        return self._dot(a, b, acc)

    @triton.jit
    def reduce_k_range(self, A, B, out_tile, k_begin, k_end):
        """The accumulator of K-iterations ``[k_begin, k_end)`` of ``out_tile`` (the persistent loop
        and Stream-K both use it), for either kind of view.

        Descriptor views (TMA): one ``reduce_tile`` per step; the compiler pipelines the loads and
        the copy engine zero-fills past the matrix. Pointer views: pointers are built once and
        advanced by ``block_k * stride``; loads carry no mask except the ragged last K step when
        ``even_k=False``. Example (the full K range):
        ``acc = ctx.reduce_k_range(tensorA, tensorB, out_tile, 0, tl.cdiv(K, BLOCK_K))``.
        """
        if A.uses_descriptor or B.uses_descriptor:
            acc = self.init_accumulator()
            for k_idx in range(k_begin, k_end):
                acc = self.reduce_tile(A, B, out_tile, k_idx, acc, boundary=not self.even_k)
        else:
            acc = self._advance_pointers(A, B, out_tile, k_begin, k_end)
        return acc

    @triton.jit
    def _advance_pointers(self, A, B, out_tile, k_begin, k_end):
        # reduce_k_range for two pointer views
        K = A.cols
        _check_k(A, B, K, self.block_k, self.even_k)
        rm, rn, _ = out_tile.layout(A.rows, B.cols)
        rk = k_begin * self.block_k + tl.arange(0, self.block_k)
        a_ptrs = A.ptr + rm[:, None] * A.stride_row + rk[None, :] * A.stride_col
        b_ptrs = B.ptr + rk[:, None] * B.stride_row + rn[None, :] * B.stride_col
        a_step = self.block_k * A.stride_col
        b_step = self.block_k * B.stride_row
        acc = self.init_accumulator()
        if self.even_k:
            full_end = k_end
        else:
            full_end = tl.minimum(k_end, K // self.block_k)  # K steps with no ragged edge
        for _ in range(k_begin, full_end):
            a = tl.load(a_ptrs, cache_modifier=self.cache_modifier_a)
            b = tl.load(b_ptrs, cache_modifier=self.cache_modifier_b)
            acc = self._dot(a, b, acc)
            a_ptrs += a_step
            b_ptrs += b_step
        if not self.even_k:
            if full_end < k_end:  # the ragged last K step lies in the range: mask it
                k_left = K - full_end * self.block_k
                kk = tl.arange(0, self.block_k)
                a = tl.load(a_ptrs, mask=kk[None, :] < k_left, other=0.0,
                            cache_modifier=self.cache_modifier_a)
                b = tl.load(b_ptrs, mask=kk[:, None] < k_left, other=0.0,
                            cache_modifier=self.cache_modifier_b)
                acc = self._dot(a, b, acc)
        return acc

    @triton.jit
    def reduce_axis(self, A, B, out_tile):
        """The full K loop for ``out_tile``: ``A[tile rows, :] @ B[:, tile cols]`` (pointer views,
        which know K; with descriptor views call ``reduce_k_range(..., 0, tl.cdiv(K, block_k))``).

        Example: ``acc = ctx.reduce_axis(tensorA, tensorB, out_tile)``.
        """
        if self.even_k:
            num_k = A.cols // self.block_k
        else:
            num_k = tl.cdiv(A.cols, self.block_k)
        return self.reduce_k_range(A, B, out_tile, 0, num_k)


# ----------------------------------------------------------------------------------------------
# Program-id remaps for GPUs made of several chiplets (AMD XCDs)
# ----------------------------------------------------------------------------------------------
@triton.jit
def chiplet_transform(pid, num_sms, num_xcds):
    """Remap ``pid`` in ``[0, num_sms)`` so each XCD gets one contiguous run of ids.

    The hardware deals programs round-robin: program p runs on XCD ``p % num_xcds``. After the
    remap, the programs of XCD x hold ids ``[start_x, start_x + count_x)``, so neighbouring tiles
    (which share rows of A and columns of B) share that XCD's L2. A permutation of
    ``range(num_sms)`` for any ``num_sms``. Example:
    ``pid = chiplet_transform(tl.program_id(0), NUM_SMS, 8)``.
    """
    xcd = pid % num_xcds
    local = pid // num_xcds  # how many programs of this XCD come before pid
    per_xcd = num_sms // num_xcds
    extra = num_sms % num_xcds  # the first `extra` XCDs get one program more
    return xcd * per_xcd + tl.minimum(xcd, extra) + local


@triton.jit
def chiplet_transform_chunked(pid, num_sms, num_xcds, chunk_size):
    """Remap ``pid`` so ids come in chunks of ``chunk_size`` consecutive values per XCD.

    Chunk c (ids ``[c*chunk_size, (c+1)*chunk_size)``) goes to XCD ``c % num_xcds``. Programs
    past the last complete round of ``num_xcds * chunk_size`` use ``chiplet_transform``, so the
    result is a permutation of ``range(num_sms)`` for any sizes. Example:
    ``pid = chiplet_transform_chunked(tl.program_id(0), NUM_SMS, 8, 4)``.
    """
    round_size = num_xcds * chunk_size
    full = (num_sms // round_size) * round_size  # programs in complete rounds
    xcd = pid % num_xcds
    local = pid // num_xcds
    chunked = ((local // chunk_size) * num_xcds + xcd) * chunk_size + local % chunk_size
    tail = full + chiplet_transform(pid - full, num_sms - full, num_xcds)
    return tl.where(pid < full, chunked, tail)


# ----------------------------------------------------------------------------------------------
# ScheduleContext: which work a program does
# ----------------------------------------------------------------------------------------------
@_aggregate
class ScheduleContext:
    """Hands out tiles (persistent) and K-iterations (Stream-K) to the programs of a launch.

    Tiles are numbered ``0 .. num_tiles()-1`` in grouped order. The first
    ``num_tiles() - streamk_tiles`` go round-robin to the ``num_sms`` programs
    (``persistent_tile_range``); the K-iterations of the last ``streamk_tiles`` tiles are split
    into contiguous ranges (``iter_range``) over ``num_sms`` programs, or over the first
    ``streamk_programs`` when that is set (> 0). A global iteration ``g`` is K step
    ``g % iters_per_tile()`` of tile ``g // iters_per_tile()``.

    Choosing ``streamk_programs``: with ``s * streamk_tiles`` programs each gets one K-chunk of one
    tile, and the programs on the same chunk of different tiles read the same A rows and B columns
    at about the same time, so L2 serves them; spread over all ``num_sms`` programs, the ranges start
    at different K offsets (the measurement: ``notes/gemm-decisions.md``, "Stream-K"). Example::

        sched = ScheduleContext(M, N, K, ctx, streamk_tiles=STREAMK_TILES)
        start, total, stride = sched.persistent_tile_range()
        for tile_id in range(start, total, stride):
            out_tile = sched.get_tile_from_idx(tile_id)
    """

    M: tl.tensor
    N: tl.tensor
    K: tl.tensor
    ctx: GemmContext
    streamk_tiles: tl.constexpr
    streamk_programs: tl.constexpr

    def __init__(self, M, N, K, ctx, streamk_tiles=0, streamk_programs=0, _semantic=None):
        self.M = _tensor(M, _semantic)
        self.N = _tensor(N, _semantic)
        self.K = _tensor(K, _semantic)
        self.ctx = ctx
        self.streamk_tiles = _const(streamk_tiles)
        self.streamk_programs = _const(streamk_programs)

    @triton.jit
    def num_tiles(self):
        """How many output tiles the problem has. Example: ``total = sched.num_tiles()``."""
        return tl.cdiv(self.M, self.ctx.block_m) * tl.cdiv(self.N, self.ctx.block_n)

    @triton.jit
    def iters_per_tile(self):
        """K steps per tile, ``cdiv(K, block_k)``. Example: ``last = sched.iters_per_tile() - 1``."""
        return tl.cdiv(self.K, self.ctx.block_k)

    @triton.jit
    def _streamk_count(self):
        # Stream-K tiles actually present (never more than the problem has).
        return tl.minimum(self.num_tiles(), self.streamk_tiles)

    @triton.jit
    def _streamk_sharers(self):
        # Programs that share the Stream-K iterations: streamk_programs, or all num_sms (0).
        if self.streamk_programs > 0:
            return tl.minimum(self.streamk_programs, self.ctx.num_sms)
        else:
            return self.ctx.num_sms

    @triton.jit
    def persistent_tile_range(self):
        """``(start, total, stride)`` for ``for tile_id in range(start, total, stride)``.

        Covers the data-parallel tiles ``[0, num_tiles() - streamk_tiles)``: this program's
        (chiplet-remapped) id, then every ``num_sms``-th tile. Launch exactly ``num_sms``
        programs (fewer would leave tiles undone).
        """
        pid = tl.program_id(0)
        if self.ctx.num_xcds > 1:
            if self.ctx.chunk_size > 1:
                pid = chiplet_transform_chunked(pid, self.ctx.num_sms, self.ctx.num_xcds,
                                                self.ctx.chunk_size)
            else:
                pid = chiplet_transform(pid, self.ctx.num_sms, self.ctx.num_xcds)
        total = self.num_tiles() - self._streamk_count()
        return pid, total, self.ctx.num_sms

    @triton.jit
    def get_tile_from_idx(self, tile_id):
        """The Tile of linear id ``tile_id`` in grouped order: ``group_size_m`` rows of tiles are
        walked column by column, so consecutive ids reuse the same B columns and A rows.

        Example: ``out_tile = sched.get_tile_from_idx(tile_id)``.
        """
        num_pid_m = tl.cdiv(self.M, self.ctx.block_m)
        num_pid_n = tl.cdiv(self.N, self.ctx.block_n)
        tiles_per_group = self.ctx.group_size_m * num_pid_n
        first_pid_m = (tile_id // tiles_per_group) * self.ctx.group_size_m
        group_rows = tl.minimum(num_pid_m - first_pid_m, self.ctx.group_size_m)  # last group may be short
        in_group = tile_id % tiles_per_group
        pid_m = first_pid_m + in_group % group_rows
        pid_n = in_group // group_rows
        return Tile(pid_m, pid_n, self.ctx.block_m, self.ctx.block_n)

    @triton.jit
    def get_tile_from_coord(self, pid_m, pid_n):
        """The Tile at tile coordinates ``(pid_m, pid_n)`` with the context's block sizes.

        Example: ``out_tile = sched.get_tile_from_coord(tl.program_id(0), tl.program_id(1))``.
        """
        return Tile(pid_m, pid_n, self.ctx.block_m, self.ctx.block_n)

    @triton.jit
    def iter_range(self):
        """``(start_iter, end_iter)``: this program's contiguous share of the Stream-K iterations.

        The ``streamk_tiles * iters_per_tile()`` iterations are split over ``num_sms`` programs
        (or the first ``streamk_programs``; the others get an empty range), sizes differing by at
        most one, in program-id order. Iteration ids are global (see the class docstring).
        Example: ``for it in range(*sched.iter_range()): ...``.
        """
        pid = tl.program_id(0)
        iters = self.iters_per_tile()
        first = (self.num_tiles() - self._streamk_count()) * iters
        total = self._streamk_count() * iters
        sharers = self._streamk_sharers()
        base = total // sharers
        extra = total % sharers  # the first `extra` programs do one iteration more
        start = tl.minimum(pid * base + tl.minimum(pid, extra), total)
        end = tl.minimum(start + base + (pid < extra).to(tl.int32), total)
        return first + start, first + end

    @triton.jit
    def get_iter(self, global_iter):
        """``(pid_m, pid_n, k_iter)`` of global iteration ``global_iter``.

        Example: ``pid_m, pid_n, k_iter = sched.get_iter(it)``.
        """
        iters = self.iters_per_tile()
        tile = self.get_tile_from_idx(global_iter // iters)
        return tile.pid_m, tile.pid_n, global_iter % iters

    @triton.jit
    def streamk_span(self, start_iter, end_iter):
        """``(tile_id, k_begin, k_end)``: the last piece of ``[start_iter, end_iter)`` that lies in
        one tile (K-iterations ``[k_begin, k_end)`` of tile ``tile_id``). Walk a program's range
        backwards, piece by piece: the last piece of a range is the only one a program may share
        with a later program, which owns that tile and waits for it; computed first, its partial is
        published early (walked forwards, each owner would wait for the whole range before it;
        ``notes/stages.md``, "The fix-up protocol")::

            start, end = sched.iter_range()
            while end > start:
                tile_id, k_begin, k_end = sched.streamk_span(start, end)
                ...
                end -= k_end - k_begin
        """
        iters = self.iters_per_tile()
        last = end_iter - 1
        tile_id = last // iters
        k_end = last % iters + 1
        k_begin = tl.maximum(k_end - (end_iter - start_iter), 0)
        return tile_id, k_begin, k_end

    @triton.jit
    def _streamk_program_of(self, global_iter):
        # Inverse of iter_range: the program whose range holds global_iter.
        iters = self.iters_per_tile()
        g = global_iter - (self.num_tiles() - self._streamk_count()) * iters
        total = self._streamk_count() * iters
        sharers = self._streamk_sharers()
        base = total // sharers
        extra = total % sharers
        long_part = extra * (base + 1)  # iterations held by the first `extra` programs
        return tl.where(g < long_part, g // (base + 1),
                        extra + (g - long_part) // tl.maximum(base, 1))

    @triton.jit
    def streamk_fixup(self, acc, tile_id, k_begin, k_end, partials_ptr, flags_ptr):
        """Combine the pieces of a tile shared by several programs: returns ``(acc, owner)``.

        If this piece does not reach the tile's last K-iteration, the partial ``acc`` goes to
        this program's slot of ``partials_ptr`` (``num_sms * block_m * block_n`` elements of the
        accumulator type) and the program's flag in ``flags_ptr`` (``num_sms`` int32, zero at
        start) is raised with release semantics; ``owner`` is False. Otherwise this program owns
        the tile: it waits for the lower program ids that hold the tile's earlier K-iterations,
        adds their partials in increasing program-id order, clears their flags and returns the
        complete accumulator with ``owner`` True (then store it). The sum is
        ``((acc + partial[first]) + ...) + partial[pid - 1]``, the same order on every run.
        Cost: each partial is a ``block_m x block_n`` float32 tile written once and read once
        (through L2), and the owner holds two tiles at once (what that costs on an H100:
        ``notes/stages.md``, "The fix-up protocol"). Example::

            acc, owner = sched.streamk_fixup(acc, tile_id, k_begin, k_end, P, FLAGS)
            if owner:
                tensorC.store(acc, out_tile)
        """
        pid = tl.program_id(0)
        tile_size: tl.constexpr = self.ctx.block_m * self.ctx.block_n
        offs = (tl.arange(0, self.ctx.block_m)[:, None] * self.ctx.block_n
                + tl.arange(0, self.ctx.block_n)[None, :])  # one contiguous tile per slot
        owner = k_end == self.iters_per_tile()
        if owner:
            if k_begin > 0:  # earlier K-iterations were done by lower program ids
                first = self._streamk_program_of(tile_id * self.iters_per_tile())
                for q in range(first, pid):
                    # Spin until program q has published (an idempotent CAS with acquire), then
                    # clear its flag for the next launch (q publishes once per launch).
                    if _IN_INTERPRETER:  # programs run one at a time: an unset flag stays unset
                        tl.device_assert(tl.atomic_cas(flags_ptr + q, 1, 1, sem="acquire") == 1,
                                         "Stream-K fix-up: a lower program did not publish its partial tile")
                    else:
                        while tl.atomic_cas(flags_ptr + q, 1, 1, sem="acquire") != 1:
                            pass
                    tl.atomic_xchg(flags_ptr + q, 0, sem="relaxed")
                tl.debug_barrier()
                for q in range(first, pid):  # ".cg": read from L2, where the writes went
                    acc += tl.load(partials_ptr + q * tile_size + offs, cache_modifier=".cg")
        else:
            tl.store(partials_ptr + pid * tile_size + offs, acc)
            tl.debug_barrier()  # every thread's part of the tile is written before the flag
            tl.atomic_xchg(flags_ptr + pid, 1, sem="release")
        return acc, owner


# ----------------------------------------------------------------------------------------------
# Views: matrices and vectors in memory
# ----------------------------------------------------------------------------------------------
@triton.jit
def _tile_ptrs(ptr, rows, cols, stride_row, stride_col, tile):
    # Pointers to a tile of a strided matrix (indices wrapped into it) and its in-bounds mask.
    rm, rn, mask = tile.layout(rows, cols)
    return ptr + rm[:, None] * stride_row + rn[None, :] * stride_col, mask


@triton.jit
def _load_tile(ptrs, mask, boundary: tl.constexpr, cache_modifier: tl.constexpr):
    # boundary: zero-fill what lies outside the matrix; otherwise an unmasked (wrapped) load.
    if boundary:
        data = tl.load(ptrs, mask=mask, other=0.0, cache_modifier=cache_modifier)
    else:
        data = tl.load(ptrs, cache_modifier=cache_modifier)
    return data


@_aggregate
class InputView:
    """A ``rows x cols`` matrix at ``ptr``: element (i, j) is at ``ptr + i*stride_row + j*stride_col``.

    Any layout works (row-major, column-major/transposed, strided). Build it with
    ``make_input_view`` / ``make_tensor_view``::

        tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
        a = tensorA.load(Tile(pid_m, k_idx, BLOCK_M, BLOCK_K), boundary=True)
    """

    ptr: tl.tensor
    rows: tl.tensor
    cols: tl.tensor
    stride_row: tl.tensor
    stride_col: tl.tensor
    uses_descriptor: tl.constexpr  # False: GemmContext.reduce_k_range advances pointers

    def __init__(self, ptr, rows, cols, stride_row, stride_col, _semantic=None):
        _check_view_args(type(self).__name__, (("ptr", ptr),), (("rows", rows), ("cols", cols),
                                                                ("stride_row", stride_row), ("stride_col", stride_col)))
        self.ptr = _tensor(ptr, _semantic)
        self.rows = _tensor(rows, _semantic)
        self.cols = _tensor(cols, _semantic)
        self.stride_row = _tensor(stride_row, _semantic)
        self.stride_col = _tensor(stride_col, _semantic)
        self.uses_descriptor = _const(False)

    @triton.jit
    def tile_ptrs(self, tile):
        """``(ptrs, mask)``: pointers to the tile's elements (indices wrapped into the matrix)
        and the in-bounds mask. Example: ``ptrs, mask = tensorA.tile_ptrs(a_tile)``.
        """
        return _tile_ptrs(self.ptr, self.rows, self.cols, self.stride_row, self.stride_col, tile)

    @triton.jit
    def load(self, tile, boundary: tl.constexpr = False, cache_modifier: tl.constexpr = tl.constexpr(".cg")):
        """Load a tile. ``boundary=True`` zero-fills elements outside the matrix; without it,
        out-of-range rows/columns read wrapped (valid, but meaningless) data.

        Example: ``a = tensorA.load(a_tile, boundary=True)``.
        """
        ptrs, mask = self.tile_ptrs(tile)
        return _load_tile(ptrs, mask, boundary, cache_modifier)


@triton.jit
def _epilogue(acc, tile, scale, bias):
    # The output views' epilogue, in this order: dequantize, then add the bias (in the scaled units).
    if scale is not None:
        acc = scale.apply(acc, tile)
    if bias is not None:
        acc = bias.apply(acc, tile)
    return acc


@_aggregate
class OutputView:
    """A ``rows x cols`` output matrix; ``store`` runs the epilogue scale -> bias -> convert -> store.

    Example::

        tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
        tensorC.store(acc, out_tile, scale=scale_view, bias=bias_view)
    """

    ptr: tl.tensor
    rows: tl.tensor
    cols: tl.tensor
    stride_row: tl.tensor
    stride_col: tl.tensor

    def __init__(self, ptr, rows, cols, stride_row, stride_col, _semantic=None):
        _check_view_args(type(self).__name__, (("ptr", ptr),), (("rows", rows), ("cols", cols),
                                                                ("stride_row", stride_row), ("stride_col", stride_col)))
        self.ptr = _tensor(ptr, _semantic)
        self.rows = _tensor(rows, _semantic)
        self.cols = _tensor(cols, _semantic)
        self.stride_row = _tensor(stride_row, _semantic)
        self.stride_col = _tensor(stride_col, _semantic)

    @triton.jit
    def store(self, data, tile, mask=None, scale=None, bias=None):
        """Write ``data`` (a ``[block_m, block_n]`` accumulator) to ``tile``.

        In order: ``scale.apply`` (a ScaleView), ``bias.apply`` (a BiasView), conversion to the
        output's element type, then a store masked to the matrix (and to ``mask`` if given).
        Example: ``tensorC.store(acc, out_tile, bias=bias_view)``.
        """
        ptrs, in_bounds = _tile_ptrs(self.ptr, self.rows, self.cols, self.stride_row, self.stride_col, tile)
        if mask is not None:
            in_bounds = in_bounds & mask
        tl.store(ptrs, _epilogue(data, tile, scale, bias).to(self.ptr.dtype.element_ty), mask=in_bounds)

    @triton.jit
    def load(self, tile, boundary: tl.constexpr = False):
        """Read a tile of the output (read-modify-write epilogues, e.g. ``C += A @ B``).

        Example: ``c = tensorC.load(out_tile, boundary=True)``.
        """
        ptrs, mask = _tile_ptrs(self.ptr, self.rows, self.cols, self.stride_row, self.stride_col, tile)
        return _load_tile(ptrs, mask, boundary, "")


@_aggregate
class ScaleView:
    """Per-row scales of A (length M) and per-column scales of B (length N).

    ``apply`` returns ``acc * a_scale[row] * b_scale[col]`` in float32: the dequantization of an
    int8 GEMM. Example::

        scale_view = make_scale_view(A_scale, B_scale, M, N)
        acc = scale_view.apply(acc, out_tile)
    """

    a_scale_ptr: tl.tensor
    b_scale_ptr: tl.tensor
    M: tl.tensor
    N: tl.tensor
    stride_a: tl.tensor
    stride_b: tl.tensor

    def __init__(self, a_scale_ptr, b_scale_ptr, M, N, stride_a, stride_b, _semantic=None):
        _check_view_args("ScaleView", (("a_scale_ptr", a_scale_ptr), ("b_scale_ptr", b_scale_ptr)),
                         (("M", M), ("N", N), ("stride_a", stride_a), ("stride_b", stride_b)))
        self.a_scale_ptr = _tensor(a_scale_ptr, _semantic)
        self.b_scale_ptr = _tensor(b_scale_ptr, _semantic)
        self.M = _tensor(M, _semantic)
        self.N = _tensor(N, _semantic)
        self.stride_a = _tensor(stride_a, _semantic)
        self.stride_b = _tensor(stride_b, _semantic)

    @triton.jit
    def apply(self, acc, tile):
        """``acc * a_scale[rows, None] * b_scale[None, cols]`` as float32.

        Example: ``acc = scale_view.apply(acc, out_tile)``.
        """
        rm, rn = tile.indices()
        a_scale = tl.load(self.a_scale_ptr + rm * self.stride_a, mask=rm < self.M, other=0)
        b_scale = tl.load(self.b_scale_ptr + rn * self.stride_b, mask=rn < self.N, other=0)
        return acc.to(tl.float32) * a_scale.to(tl.float32)[:, None] * b_scale.to(tl.float32)[None, :]


@_aggregate
class BiasView:
    """A bias vector with one value per output column (length N), broadcast over the rows.

    Example::

        bias_view = make_bias_view(bias, N)
        acc = bias_view.apply(acc, out_tile)
    """

    ptr: tl.tensor
    N: tl.tensor
    stride: tl.tensor

    def __init__(self, ptr, N, stride, _semantic=None):
        _check_view_args("BiasView", (("ptr", ptr),), (("N", N), ("stride", stride)))
        self.ptr = _tensor(ptr, _semantic)
        self.N = _tensor(N, _semantic)
        self.stride = _tensor(stride, _semantic)

    @triton.jit
    def apply(self, acc, tile):
        """``acc + bias[None, cols]``. An integer accumulator with a float bias becomes float32.

        Example: ``acc = bias_view.apply(acc, out_tile)``.
        """
        _, rn = tile.indices()
        bias = tl.load(self.ptr + rn * self.stride, mask=rn < self.N, other=0)
        if acc.dtype.is_int() and bias.dtype.is_floating():
            acc = acc.to(tl.float32)
        return acc + bias.to(acc.dtype)[None, :]


@_aggregate
class DescriptorView:
    """An input view read through a tensor descriptor (TMA on Hopper): same ``load`` as InputView.

    The descriptor covers the matrix as stored; ``transposed`` means the matrix is kept as its
    transpose (e.g. a K-major B, stored N x K), so a tile is read as ``cols x rows`` and flipped.
    Out-of-bounds elements read as zero, so no masks and no ``even_k`` are needed. Example, with
    ``a_desc = TensorDescriptor(a, [M, K], [a.stride(0), 1], [BLOCK_M, BLOCK_K])`` built on the
    host and passed to the kernel: ``tensorA = DescriptorView(a_desc, False)``.
    """

    desc: tl.tensor_descriptor
    transposed: tl.constexpr
    uses_descriptor: tl.constexpr  # True: GemmContext.reduce_k_range takes one reduce_tile per step

    def __init__(self, desc, transposed):
        self.desc = desc
        self.transposed = _const(transposed)
        self.uses_descriptor = _const(True)

    @triton.jit
    def load(self, tile, boundary: tl.constexpr = False, cache_modifier: tl.constexpr = tl.constexpr(".cg")):
        """The ``tile`` (``block_m x block_n`` at ``(pid_m, pid_n)``) of the matrix."""
        if self.transposed:
            return self.desc.load([tile.pid_n * tile.block_n, tile.pid_m * tile.block_m]).T
        else:
            return self.desc.load([tile.pid_m * tile.block_m, tile.pid_n * tile.block_n])


@_aggregate
class DescriptorOutputView:
    """An output view written through a tensor descriptor (TMA store): same ``store`` as OutputView.

    The epilogue (scale -> bias -> convert) is OutputView's; the tile then leaves through the
    bulk copy engine, which clips rows and columns past the matrix by itself. ``halves=2`` stores
    the tile as two ``block_m x block_n/2`` pieces (half the staging shared memory). The
    descriptor's block is ``[block_m, block_n // halves]``, or ``[block_n, block_m]`` when
    ``transposed`` (C stored column-major). Example: ``tensorC = DescriptorOutputView(c_desc, False, 2)``.
    """

    desc: tl.tensor_descriptor
    transposed: tl.constexpr
    halves: tl.constexpr

    def __init__(self, desc, transposed, halves):
        self.desc = desc
        self.transposed = _const(transposed)
        self.halves = _const(halves)

    @triton.jit
    def store(self, data, tile, mask=None, scale=None, bias=None):
        """Epilogue, then a TMA store of the tile (``mask`` is not supported: the edges clip)."""
        data = _epilogue(data, tile, scale, bias).to(self.desc.dtype)
        row = tile.pid_m * tile.block_m
        col = tile.pid_n * tile.block_n
        if self.transposed:
            self.desc.store([col, row], data.T)
        elif self.halves == 2:
            left, right = tl.split(tl.permute(tl.reshape(data, (tile.block_m, 2, tile.block_n // 2)), (0, 2, 1)))
            self.desc.store([row, col], left)
            self.desc.store([row, col + tile.block_n // 2], right)
        else:
            self.desc.store([row, col], data)


# ----------------------------------------------------------------------------------------------
# Factories
# ----------------------------------------------------------------------------------------------
@triton.jit
def make_input_view(ptr, rows, cols, stride_row, stride_col):
    """An InputView of a ``rows x cols`` matrix; strides may be tensors or Python ints.

    Example: ``tensorA = make_input_view(A, M, K, stride_am, stride_ak)``.
    """
    return InputView(ptr, rows, cols, stride_row, stride_col)


make_tensor_view = make_input_view  # the reference API has both names (its examples use this one)


@triton.jit
def make_output_view(ptr, rows, cols, stride_row, stride_col):
    """An OutputView of a ``rows x cols`` matrix; strides may be tensors or Python ints.

    Example: ``tensorC = make_output_view(C, M, N, stride_cm, stride_cn)``.
    """
    return OutputView(ptr, rows, cols, stride_row, stride_col)


@triton.jit
def make_scale_view(a_scale_ptr, b_scale_ptr, M, N, stride_a=1, stride_b=1):
    """A ScaleView: per-row A scales (length M) and per-column B scales (length N).

    Example: ``scale_view = make_scale_view(A_scale, B_scale, M, N)``.
    """
    return ScaleView(a_scale_ptr, b_scale_ptr, M, N, stride_a, stride_b)


@triton.jit
def make_bias_view(bias_ptr, N, stride=1):
    """A BiasView: one bias value per output column (length N).

    Example: ``bias_view = make_bias_view(bias, N, stride_bias)``.
    """
    return BiasView(bias_ptr, N, stride)


@triton.jit
def make_descriptor_view(ptr, rows, cols, stride_row, stride_col, block_rows: tl.constexpr,
                         block_cols: tl.constexpr, transposed: tl.constexpr):
    """A DescriptorView of a ``rows x cols`` matrix read in ``block_rows x block_cols`` tiles.

    ``transposed=False`` needs ``stride_col == 1``; ``transposed=True`` needs ``stride_row == 1``.
    """
    if transposed:
        desc = tl.make_tensor_descriptor(ptr, [cols, rows], [stride_col, 1], [block_cols, block_rows])
    else:
        desc = tl.make_tensor_descriptor(ptr, [rows, cols], [stride_row, 1], [block_rows, block_cols])
    return DescriptorView(desc, transposed)


@triton.jit
def make_descriptor_output_view(ptr, rows, cols, stride_row, stride_col, block_rows: tl.constexpr,
                                block_cols: tl.constexpr, transposed: tl.constexpr, halves: tl.constexpr):
    """A DescriptorOutputView of a ``rows x cols`` output written in ``block_rows x block_cols`` tiles."""
    if transposed:
        desc = tl.make_tensor_descriptor(ptr, [cols, rows], [stride_col, 1], [block_cols, block_rows])
    else:
        desc = tl.make_tensor_descriptor(ptr, [rows, cols], [stride_row, 1], [block_rows, block_cols // halves])
    return DescriptorOutputView(desc, transposed, halves)
