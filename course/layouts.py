"""Layouts (notebook 10): which thread, warp and register holds each element of a tile.

    blocked = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    owner = ownership(blocked, (32, 32))          # owner["warp"][i, j], ["lane"], ["register"], ["thread"]
    bases = linear(blocked, (32, 32))             # the same layout as a linear map over the index bits
    offsets = shared_offsets((32, 64), vec=8, max_phase=8)   # a swizzled tile in shared memory
    passes = wavefronts(offsets[:, 0], 2, vector=8)          # bank conflicts of one warp's 16-byte reads

A distributed layout says where each element of a tensor lives: in which register of which lane
(thread) of which warp. Triton turns every such layout into a **linear layout**: one basis vector per
bit of the register, lane and warp index, and the element held at index ``(r, l, w)`` is the XOR of
the basis vectors of the bits set in ``r``, ``l`` and ``w``. :func:`linear` asks Triton itself for
those bases (no GPU needed), and :func:`ownership` inverts them into a map over the tensor, so the
pictures of notebook 10 are drawn from the layout objects, not from a re-implementation of them.
Shared memory is laid out by :func:`shared_offsets` (the swizzle and padding formulas of
``SwizzledSharedLayout`` and ``PaddedSharedLayout``, whose conversion Triton 3.6 does not expose on
a CPU), and :func:`wavefronts` counts the bank conflicts of one warp's access.
"""

from __future__ import annotations

import atexit
import functools
import math
import os
import sys

import torch

try:  # Gluon's layout classes; present in Triton 3.6, on any machine
    from triton.experimental.gluon import language as gl
except ImportError:  # pragma: no cover - an older Triton
    gl = None

# The layouts whose conversion Triton 3.6 performs on a CPU (others abort the process in C++).
_SUPPORTED = ("BlockedLayout", "SliceLayout", "NVMMADistributedLayout", "DotOperandLayout", "DistributedLinearLayout")


@functools.lru_cache(maxsize=1)
def _builder():
    from triton._C.libtriton import gluon_ir, ir

    context = ir.context()
    ir.load_dialects(context)
    if type(ir.context).__module__ == "nanobind":
        atexit.register(_quiet_nanobind_at_exit)
    return context, gluon_ir.GluonOpBuilder(context)


def _quiet_nanobind_at_exit():
    """Triton 3.8+ (bindings made with nanobind): ``to_linear_layout`` keeps four MLIR attributes for
    the life of the process, which nanobind lists as "leaked" on stderr as the interpreter shuts down,
    after every atexit handler; a Triton detail, not the learner's. Closes stderr for that last step."""
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


def linear(layout, shape) -> "gl.DistributedLinearLayout":
    """``layout`` for a tensor of ``shape``, as Triton's linear layout: ``reg_bases``, ``lane_bases``,
    ``warp_bases`` (one coordinate vector per bit of each index) and ``shape``.

        >>> linear(gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]), (32, 32)).reg_bases
        [[0, 1], [0, 2], [0, 16]]
    """
    if gl is None:
        raise RuntimeError("layouts needs Triton's Gluon (triton.experimental.gluon): install Triton 3.6 or later")
    name = type(layout).__name__
    if name not in _SUPPORTED:
        raise TypeError(f"linear(layout): a {name} is not a distributed layout this course converts; pass one of "
                        f"{', '.join(_SUPPORTED)}")
    shape = [int(s) for s in shape]
    if len(shape) != layout.rank or any(s < 1 or s & (s - 1) for s in shape):
        raise ValueError(f"linear(layout, shape={tuple(shape)}): a shape of rank {layout.rank} whose sizes are "
                         "powers of two (a tile's)")
    if name == "DistributedLinearLayout":
        return layout
    _, builder = _builder()
    return builder.to_linear_layout(layout._to_ir(builder), shape)


def ownership(layout, shape) -> dict:
    """Per element of a tensor of ``shape`` under ``layout``, int tensors of that shape: ``"register"``,
    ``"lane"`` (0-31), ``"warp"`` and ``"thread"`` (``warp * 32 + lane``) of the lowest thread that
    holds it, and ``"copies"``: how many (register, lane, warp) hold it, more than one where the
    layout's tile is larger than the tensor and threads hold the same element (a broadcast).

        >>> owner = ownership(gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]), (32, 32))
        >>> owner["thread"][0, :8].tolist(), owner["register"][0, :8].tolist()
        ([0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2, 3])
    """
    ll = linear(layout, shape)
    shape = tuple(ll.shape)
    bases = {"register": ll.reg_bases, "lane": ll.lane_bases, "warp": ll.warp_bases}
    if ll.block_bases:
        raise ValueError("ownership: layouts over several CTAs (block_bases) are not drawn in this course")
    def spans(vectors):  # the element (as coordinates) each value of one index reaches: XORs of its bits' vectors
        reach = torch.zeros(1, len(shape), dtype=torch.int64)
        for vector in vectors:
            reach = torch.cat([reach, reach ^ torch.tensor(vector, dtype=torch.int64)])
        return reach

    regs, lanes, warps = (spans(bases[key]) for key in ("register", "lane", "warp"))
    # every (warp, lane, register) in that order, and the element it holds, as a flat index into the tensor
    where = warps[:, None, None] ^ lanes[None, :, None] ^ regs[None, None, :]
    strides = torch.tensor([math.prod(shape[d + 1:]) for d in range(len(shape))], dtype=torch.int64)
    flat = (where * strides).sum(-1).flatten()
    size = math.prod(shape)
    copies = torch.bincount(flat, minlength=size)
    # the lowest (warp, lane, register) keeps the element
    first = torch.full((size,), flat.numel(), dtype=torch.int64).scatter_reduce(
        0, flat, torch.arange(flat.numel()), reduce="amin")
    held = first < flat.numel()
    first = first.clamp(max=flat.numel() - 1)
    reg = first % len(regs)
    lane = first // len(regs) % len(lanes)
    warp = first // (len(regs) * len(lanes))
    out = {}
    for key, value in (("register", reg), ("lane", lane), ("warp", warp), ("thread", warp * len(lanes) + lane)):
        out[key] = torch.where(held, value, -1).reshape(shape)
    out["copies"] = copies.reshape(shape)
    return out


# --- shared memory: where a tile's elements land, and the banks they fall in ---------------------------

BANKS = 32  # shared memory is 32 banks of 4-byte words, on every NVIDIA GPU since Kepler


def shared_offsets(shape, *, vec: int = 1, per_phase: int = 1, max_phase: int = 1, padding: tuple | None = None):
    """The offset, in elements, of each element ``(row, col)`` of a row-major ``shape`` tile in shared
    memory: as ``SwizzledSharedLayout(vec, per_phase, max_phase, order=[1, 0])`` places it (the group
    of ``vec`` elements at ``(row, col // vec)`` moves to group ``(col // vec) ^ phase``, with
    ``phase = (row // per_phase) % max_phase``; ``max_phase=1`` is no swizzle), or with
    ``padding=(interval, pad)``, ``pad`` unused elements after every ``interval`` (as
    ``PaddedSharedLayout``'s one interval).

        >>> shared_offsets((2, 16), vec=4, max_phase=4)[1].tolist()[:8]
        [20, 21, 22, 23, 16, 17, 18, 19]
    """
    rows, cols = shape
    row = torch.arange(rows)[:, None].expand(rows, cols)
    col = torch.arange(cols)[None, :].expand(rows, cols)
    if padding is not None:
        if vec != 1 or max_phase != 1:
            raise ValueError("shared_offsets: pass a swizzle (vec, per_phase, max_phase) or padding, not both")
        interval, pad = padding
        flat = row * cols + col
        return flat + flat // interval * pad
    if cols % vec or (cols // vec) < max_phase:
        raise ValueError(f"shared_offsets(shape={tuple(shape)}, vec={vec}, max_phase={max_phase}): each row must "
                         "hold at least max_phase groups of vec elements")
    phase = (row // per_phase) % max_phase
    return row * cols + ((col // vec) ^ phase) * vec + col % vec


def banks(offsets: torch.Tensor, element_bytes: int) -> torch.Tensor:
    """The bank of each element at ``offsets`` (elements of ``element_bytes`` each)."""
    return offsets * element_bytes // 4 % BANKS


def wavefronts(offsets: torch.Tensor, element_bytes: int, vector: int = 1) -> int:
    """How many passes shared memory needs to serve one warp's access in which lane ``l`` reads
    ``vector`` consecutive elements from ``offsets[l]`` (32 offsets). A warp's request is served 128
    bytes of lanes at a time (all 32 lanes for 4-byte reads, 8 for 16-byte ones); each such group
    takes as many passes as the most distinct 4-byte words one bank must deliver (lanes reading the
    same word share it), 1 where nothing conflicts.

        >>> wavefronts(torch.arange(32) * 64, 2)   # a column of a tile with 128-byte rows: all in bank 0
        32
    """
    offsets = offsets.flatten().tolist()
    if len(offsets) != 32:
        raise ValueError(f"wavefronts: pass one offset per lane of a warp (32), got {len(offsets)}")
    lane_bytes = vector * element_bytes
    if 128 % lane_bytes or lane_bytes % 4 and vector != 1:
        raise ValueError(f"wavefronts: a lane reads {lane_bytes} bytes; pass 1-4, 8 or 16 bytes per lane")
    group = max(1, 128 // max(lane_bytes, 4))  # lanes served together
    passes = 0
    for first in range(0, 32, group):
        words = {(offset * element_bytes + b) // 4 for offset in offsets[first:first + group]
                 for b in range(0, max(lane_bytes, 1), 4)}
        per_bank = {}
        for word in words:
            per_bank[word % BANKS] = per_bank.get(word % BANKS, 0) + 1
        passes += max(per_bank.values())
    return passes
