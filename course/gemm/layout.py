"""How ``course.gemm`` reads and writes its operands: tensor-descriptor (TMA) eligibility, copies
into aligned rows where they pay, and 64-bit offsets where 32 bits would wrap.

    >>> tma_layout(torch.empty(64, 64, dtype=torch.float16, device="meta"))  # row-major, aligned
    'rows'
"""

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

INT32_LIMIT = 2**31  # offsets and dimensions from here on do not fit Triton's default 32-bit indices


def cdiv(a: int, b: int) -> int:
    """Ceiling division of ints: triton.cdiv is a constexpr function, about 1 us a call on the host."""
    return -(-a // b)


def tma_layout(t: torch.Tensor) -> str | None:
    """How TMA reads the 2-D ``t``: ``"rows"`` (row-major: unit stride along a row), ``"columns"``
    (stored transposed: unit stride down a column), or None where it cannot (an address or pitch
    that is no multiple of 16 bytes, or rows narrower than 16 bytes)."""
    es = t.element_size()
    if t.data_ptr() % 16:
        return None
    (rows, cols), (s0, s1) = t.shape, t.stride()
    if s1 == 1 and (s0 * es) % 16 == 0 and cols * es >= 16:
        return "rows"
    if s0 == 1 and (s1 * es) % 16 == 0 and rows * es >= 16:
        return "columns"
    return None


def host_descriptor(t, transposed, block_rows, block_cols):
    """A tensor descriptor of ``t`` as stored (of ``t.T`` when ``transposed``), moved in blocks of
    ``block_rows x block_cols`` of ``t``. Built on the host, it reaches the kernel as a parameter:
    faster than building it inside the kernel (bf16 0.92 -> 0.95 x cuBLAS; notes/gemm-decisions.md)."""
    if transposed:
        return TensorDescriptor(t, [t.shape[1], t.shape[0]], [t.stride(1), 1], [block_cols, block_rows])
    return TensorDescriptor(t, list(t.shape), [t.stride(0), 1], [block_rows, block_cols])


# Operands whose rows TMA cannot read (a row stride that is no multiple of 16 bytes) run at 0.1-0.5 x
# cuBLAS with 2-byte loads; copied into 128-byte aligned rows they run at full speed. A copy pays where
# the product does this many multiply-adds per copied element (notes/gemm-decisions.md, "Operand layout").
MACS_PER_COPIED_ELEMENT = 16


# 16-bit rows 16 bytes into a 32-byte sector read about 1.5x slower; a realigned copy of B pays from this
# many multiply-adds per element of B (M), one of A, which saves less, from REALIGNED_A_FACTOR times as many
# per element of A (N) (notes/gemm-decisions.md, "Operand layout").
MACS_PER_REALIGNED_ELEMENT = 160 * MACS_PER_COPIED_ELEMENT  # 2560
REALIGNED_A_FACTOR = 4


def rows_straddle_sectors(t: torch.Tensor) -> bool:
    """Whether TMA reads ``t`` (16-bit) but its rows (columns, where stored transposed) start 16 bytes
    into a 32-byte sector.

        >>> [rows_straddle_sectors(torch.empty(n, n, dtype=torch.bfloat16, device="meta")) for n in (2048, 2056)]
        [False, True]
    """
    layout = tma_layout(t)
    if layout is None or t.element_size() != 2:
        return False
    pitch = (t.stride(1) if layout == "columns" else t.stride(0)) * t.element_size()
    return bool(pitch % 32 or t.data_ptr() % 32)


def aligned_copies_for(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple:
    """``(copy_a, copy_b, copy_c)``: which operands ``matmul`` copies into 128-byte aligned rows
    first (``c``: computed into an aligned buffer, then copied into ``c``; on a GPU only, not under
    the interpreter): the operands that TMA cannot read as they are but can once copied, where the
    product does at least ``MACS_PER_COPIED_ELEMENT`` multiply-adds per element copied; and 16-bit
    ones that it reads slowly, their rows 16 bytes off a 32-byte sector: ``b`` where the product does
    at least ``MACS_PER_REALIGNED_ELEMENT`` multiply-adds per element of ``b`` (M), ``a`` where it
    does ``REALIGNED_A_FACTOR`` times as many per element of ``a`` (N) as well (C is written once:
    never for that reason).

        >>> a = torch.empty(4096, 4014, dtype=torch.bfloat16, device="meta")  # rows of 8028 bytes
        >>> aligned_copies_for(a, torch.empty(4785, 4014, dtype=torch.bfloat16, device="meta").T,
        ...                    torch.empty(4096, 4785, dtype=torch.bfloat16, device="meta"))
        (True, True, True)
    """
    M, K = a.shape
    N = b.shape[1]

    def worth(t, macs_per_element):  # TMA's narrowest row is 16 bytes, copied or not
        return (macs_per_element >= MACS_PER_COPIED_ELEMENT and tma_layout(t) is None
                and min(t.shape) * t.element_size() >= 16)

    copy_a, copy_b, copy_c = worth(a, N), worth(b, M), worth(c, K)
    if M < MACS_PER_REALIGNED_ELEMENT:  # the cheap question first
        return copy_a, copy_b, copy_c
    # C only once, by the TMA store: its realigned copy costs more than it saves (4104 x 3976 x 4096: 0.82 -> 0.98)
    copy_b = copy_b or rows_straddle_sectors(b)
    copy_a = copy_a or (N >= REALIGNED_A_FACTOR * MACS_PER_REALIGNED_ELEMENT and rows_straddle_sectors(a))
    return copy_a, copy_b, copy_c


def aligned_operands(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, interpret: bool = False) -> tuple:
    """``(a, b, work, copied)``: what ``matmul``'s kernels read and write: ``a`` and ``b``, or their
    realigned copies where :func:`aligned_copies_for` says they pay; ``work``, ``c`` or an aligned buffer to
    compute into and copy back; ``copied``: whether ``a`` or ``b`` was copied. ``interpret``: no copies
    (Triton's interpreter reads any row).

        >>> a = torch.empty(64, 32, dtype=torch.float16, device="meta")
        >>> aligned_operands(a, a.T, torch.empty(64, 64, dtype=torch.float16, device="meta"))[3]
        False
    """
    copy_a, copy_b, copy_c = (False,) * 3 if interpret else aligned_copies_for(a, b, c)
    return (aligned_copy(a) if copy_a else a, aligned_copy(b) if copy_b else b,
            aligned_copy(c, fill=False) if copy_c else c, copy_a or copy_b)


def stored_transposed(t: torch.Tensor) -> bool:
    """Whether ``t``'s columns, not its rows, are contiguous (``t`` is a transposed view), whatever
    the alignment: a K-major B, such as ``w.T``."""
    return t.stride(0) == 1 and t.stride(1) != 1


def aligned_copy(t: torch.Tensor, fill: bool = True) -> torch.Tensor:
    """A tensor equal to ``t`` (its values unless ``fill=False``) whose rows start every 128 bytes:
    the first columns of a wider buffer. A ``t`` stored transposed (unit stride down its columns)
    stays so, i.e. a K-major B stays K-major. Pad a weight with odd rows once, rather than have
    every ``matmul`` copy it:

        >>> w = torch.randn(48, 4095, dtype=torch.float16)  # rows of 8190 bytes
        >>> aligned_copy(w).stride()
        (4096, 1)
    """
    transposed = stored_transposed(t)
    src = t.T if transposed else t
    rows, cols = src.shape
    per_line = 128 // t.element_size()
    buf = torch.empty(rows, cdiv(cols, per_line) * per_line, device=t.device, dtype=t.dtype)[:, :cols]
    if fill:
        copy_rows(src, buf)
    return buf.T if transposed else buf


# Whole words of 16, 8 or 4 bytes, widest first, as dtypes that torch copies bit for bit
WORDS = (torch.complex128, torch.int64, torch.int32)


def copy_rows(src: torch.Tensor, dst: torch.Tensor) -> None:
    """``dst.copy_(src)`` for 2-D tensors, moved in the widest words (up to 16 bytes) that their strides,
    row lengths and addresses allow: torch copies rows that are not contiguous with each other one
    element per thread, at about half the speed for 2-byte elements (notes/gemm-decisions.md, "Operand
    layout").

        >>> src = torch.arange(24, dtype=torch.bfloat16).reshape(3, 8)
        >>> dst = torch.empty(3, 64, dtype=torch.bfloat16)[:, :8]
        >>> copy_rows(src, dst); bool((dst == src).all())
        True
    """
    row_bytes, es = src.shape[1] * src.element_size(), src.element_size()
    for word in WORDS if src.stride(1) == 1 == dst.stride(1) else ():
        n = word.itemsize
        if all(x % n == 0 for x in (row_bytes, src.stride(0) * es, dst.stride(0) * es, src.data_ptr(), dst.data_ptr())):
            dst.view(word).copy_(src.view(word))
            return
    dst.copy_(src)


WIDE_BITS = ("am", "ak", "bk", "bn", "cm", "cn", "sa", "sb", "bias")  # bit i of the kernel's WIDE


def wide_strides(M, N, K, strides: dict, block_k: int) -> int:
    """The kernel's ``WIDE``: a bit for each stride (named as in ``WIDE_BITS``) that must be
    64-bit because its operand's element offsets, ``index * stride`` summed over both dimensions,
    can reach 2^31 (e.g. rows 2^30 elements apart): in 32 bits they would wrap around and read or
    write far outside the tensor. The K index of a ragged last step runs up to ``block_k`` past
    K - 1 (masked, but its offsets are still computed), and the scale and bias indices up to a tile
    past M or N. Unit strides stay constant 1: an index below 2^31 times 1 cannot overflow. 0 for
    every tensor smaller than 2^31 elements' worth of span: the usual, fully 32-bit kernel."""
    pad = max(block_k, 1024)
    extents = {"a": ((M - 1) * strides["am"], (K - 1 + pad) * strides["ak"]),
               "b": ((K - 1 + pad) * strides["bk"], (N - 1) * strides["bn"]),
               "c": ((M - 1) * strides["cm"], (N - 1) * strides["cn"]),
               "sa": ((M - 1 + pad) * strides["sa"],), "sb": ((N - 1 + pad) * strides["sb"],),
               "bias": ((N - 1 + pad) * strides["bias"],)}
    operands = {"am": "a", "ak": "a", "bk": "b", "bn": "b", "cm": "c", "cn": "c", "sa": "sa", "sb": "sb",
                "bias": "bias"}
    wide = 0
    for bit, name in enumerate(WIDE_BITS):
        if sum(extents[operands[name]]) >= INT32_LIMIT and strides[name] != 1:
            wide |= 1 << bit
    return wide
