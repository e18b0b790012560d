"""Notebook 02: kernel fusion."""

from __future__ import annotations

import ast
import inspect
import numbers
import operator
from typing import Callable

import torch

from course.exercises.core import (
    UNFILLED_LOADS,
    Failed,
    NotAttempted,
    exercise,
    is_stub,
    launches,
    plural,
    require_function,
    source_of,
    user_error,
)
from course.exercises.nb00 import constant_term, linear_count
from course.exercises.nb01 import ELEMENTWISE_SIZES, run_elementwise

__all__ = ['check_residual_relu_bytes', 'check_residual_relu']


# The sizes linear_count samples a count at (nb00's): each is asked for once, here, and checked for its type.
_SAMPLES = (1000, 2000, 3 * 2**20, 1)


def whole_number(value):
    """``value`` as an int when it is one in any integer form (Python's, numpy's, a 0-d integer tensor); a
    float (even a whole one, 20.0) as a float; None for anything else. A count is an int: the exercises of
    notebooks 02, 04 and 05 accept every integer form and refuse floats, with a message that says so."""
    if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dim() > 0):
        return None  # a tensor of shape (1,) is a list of one count, not a count (torch would index it)
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return float(value.item())
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return float(value)
    try:
        return operator.index(value)
    except TypeError:
        return None


def _counted(name: str, fn) -> tuple[Callable[[int], int | float], str | None]:
    """``fn``'s counts at the sizes nb00.linear_count samples, as a function of n for linear_count, and the
    ✗ to give once the counts are right if one of them was a float (None if none was)."""
    counts, floats = {}, None
    for n in _SAMPLES:
        try:
            got = fn(n)
        except Exception as err:  # the learner's function raised
            raise user_error(f"{name}({n})", err) from None
        count = whole_number(got)
        if count is None:
            tensor = isinstance(got, torch.Tensor) and got.numel() == 1
            raise Failed(f"{name}({n}) returned {got!r}: return the number of bytes, an int"
                         + (" (.item() turns a one-element tensor into a number)" if tensor else ""))
        if isinstance(count, float) and floats is None:
            floats = (f"{name}({n}) returned {got!r}: the count is right, but a float; a count of bytes is a whole "
                      "number, so return an int (4 * n, not 4.0 * n; // divides without leaving a float)")
        counts[n] = count
    return counts.__getitem__, floats


@exercise("residual_relu_bytes", "Fill in the bodies of unfused_bytes and fused_bytes above")
def check_residual_relu_bytes(unfused_bytes: Callable[[int], int], fused_bytes: Callable[[int], int]) -> str:
    """Check the byte counts of ``relu(x + residual)`` on ``n`` float32 values, as two PyTorch
    kernels (``unfused_bytes``) and as one fused kernel (``fused_bytes``). Each must return an int (any
    integer form; a float, even a whole one, gets a ✗ of its own)."""
    require_function("unfused_bytes", unfused_bytes, ("n",))
    require_function("fused_bytes", fused_bytes, ("n",))
    if is_stub(unfused_bytes):  # fused_bytes is written: check it alone
        _check_fused_bytes(fused_bytes)
        raise NotAttempted("fused_bytes is right; now fill in the body of unfused_bytes")
    counted, floats = _counted("unfused_bytes", unfused_bytes)
    unfused, offset = linear_count("unfused_bytes", counted, "unfused_bytes")
    constant_term("unfused_bytes", offset, "nothing here is a scalar; each kernel's traffic grows with n")
    hints = {12: "that is one kernel's traffic: unfused, the sum x + residual is written to memory and read back",
             16: "relu writes its output too: the first kernel reads two arrays and writes one, the second "
                 "reads one and writes one",
             8: "count both kernels, each with its reads and its writes",
             5: "that counts elements: each float32 takes 4 bytes",
             24: "the first kernel reads x and residual and writes one array; the second reads that array "
                 "and writes one: no array is read twice"}
    if unfused != 20:
        raise Failed(f"unfused_bytes grows by {unfused} per element: "
                      f"{hints.get(unfused, 'list each kernel: the arrays it reads, the array it writes')}")
    if floats:
        raise Failed(floats)
    if is_stub(fused_bytes):
        raise NotAttempted("unfused_bytes is right; now fill in the body of fused_bytes")
    _check_fused_bytes(fused_bytes)
    return "right: unfused 20n, fused 12n, so fusion moves 40% fewer bytes"


def _check_fused_bytes(fused_bytes) -> None:
    counted, floats = _counted("fused_bytes", fused_bytes)
    fused, offset = linear_count("fused_bytes", counted, "fused_bytes")
    constant_term("fused_bytes", offset, "nothing here is a scalar; the kernel's traffic grows with n")
    hints = {3: "that counts elements: each float32 takes 4 bytes",
             8: "the fused kernel reads two arrays (x and residual) and writes one",
             4: "the fused kernel reads two arrays and writes one",
             20: "that is the unfused count: fused, the sum never leaves registers",
             16: "the sum stays in registers: nothing but the inputs and the result moves"}
    if fused != 12:
        raise Failed(f"fused_bytes grows by {fused} per element: "
                      f"{hints.get(fused, 'read each input once, write the result once')}")
    if floats:
        raise Failed(floats)


# Block sizes the check calls residual_relu with besides its default (1024): one larger, one smaller.
_OTHER_BLOCK_SIZES = (4096, 128)


@exercise("residual_relu", "Write residual_relu_kernel's body and the launch in residual_relu above")
def check_residual_relu(residual_relu: Callable) -> str:
    """Check ``residual_relu(x, residual, out, block_size=1024)``, which must write ``relu(x + residual)``
    into ``out`` with one Triton kernel of ``block_size`` elements per program. Tries 1-D and 2-D shapes (a
    kernel may treat a contiguous tensor as flat memory) with the default block size, then 1-D sizes
    with a larger and a smaller one (the grid and the kernel's BLOCK_SIZE must both follow it)."""
    require_function("residual_relu", residual_relu, ("x", "residual", "out"))
    try:
        inspect.signature(residual_relu).bind(None, None, None, block_size=1024)
    except TypeError:
        raise Failed("residual_relu must keep its block_size argument (block_size=1024, as in the stub): the "
                     "check calls it with other block sizes too") from None
    except ValueError:  # no signature to read: let the calls decide
        pass
    shapes = [(n,) for n in ELEMENTWISE_SIZES] + [(3, 333), (64, 65)]
    hints = [(lambda x, r: x + r, "the ReLU is missing: tl.maximum(s, 0.0) keeps the positive part"),
             (lambda x, r: torch.relu(x), "residual was not added"),
             (lambda x, r: torch.relu(x) + r, "the ReLU comes after the add: relu(x + residual)"),
             (lambda x, r: torch.clamp(x + r, max=0.0), "that keeps the negative part: the ReLU is "
                                                        "maximum(s, 0), not minimum"),
             (lambda x, r: torch.relu(x + x), "x was loaded twice: load residual from its own pointer")]

    def run(call, shapes_):
        """Run the learner's call at ``shapes_``: the ✗ (or None) and the launches, (kernel, programs) each."""
        with launches() as seen:
            try:
                run_elementwise("residual_relu", call, lambda x, r: torch.relu(x + r), 2,
                                kernel_hint="@triton.jit residual_relu_kernel", input_names=("x", "residual"),
                                shapes=shapes_, wrong_hints=hints)
                failure = None
            except Failed as failed:
                failure = _sixteen_bits(failed, [kernel for kernel, _ in seen.launched]) or failed
        # element by element, a lane a load masks off reaches no other lane's result, and a store masked as the
        # loads are never writes it: core's hint about other= (for sums, maxima, tl.dot) does not apply here
        UNFILLED_LOADS.clear()
        return failure, seen.launched

    failure, launched = run(residual_relu, shapes)
    if failure:
        raise failure
    grid = _grid_mistake(1024, shapes, launched)
    if grid:
        raise Failed(grid)
    # An unmasked store past the end writes there what the masked loads left in their lanes, which a GPU
    # leaves undefined: read the store's mask in the source, the same on the interpreter and compiled.
    unmasked = next((k for k in {id(k): k for k, _ in launched}.values() if _unmasked_stores(k)), None)
    if unmasked is not None:
        raise Failed(f"the tl.store in {getattr(unmasked, '__name__', 'your kernel')} has no mask: the last, "
                     "partial block writes past the end of out (into memory that is not out's); mask the store "
                     "with offsets < n, as the loads")
    sizes = list(ELEMENTWISE_SIZES)
    for block_size in _OTHER_BLOCK_SIZES:
        failure, launched = run(lambda x, r, out, b=block_size: residual_relu(x, r, out, block_size=b),
                                [(n,) for n in sizes])
        if failure:
            raise Failed(f"called with block_size={block_size} (with the default, 1024, it is right): "
                         f"{_block_size_mistake(block_size, sizes, launched) or failure}", failure.picture)
        # right values from a grid that does not follow block_size (extra programs, every lane masked off)
        grid = _grid_mistake(block_size, [(n,) for n in sizes], launched)
        if grid:
            raise Failed(f"called with block_size={block_size} (with the default, 1024, it is right): "
                         f"{_block_size_mistake(block_size, sizes, launched) or grid}")
    return (f"right at all {len(shapes)} shapes tried, and with block sizes of {_OTHER_BLOCK_SIZES[0]} and "
            f"{_OTHER_BLOCK_SIZES[1]}; nothing written out of bounds")


def _grid_off(block_size: int, shapes, launched) -> tuple[int, int, int] | None:
    """The first (n, programs launched, programs asked for) where the grid is not one program per block of
    ``block_size`` elements, triton.cdiv(n, block_size); None if none. With one launch per shape, shape by
    shape; otherwise the totals (n then counts every shape's elements)."""
    sizes = [int(torch.Size(shape).numel()) for shape in shapes]
    if len(launched) == len(sizes):
        pairs = [(n, programs, -(-n // block_size)) for n, (_, programs) in zip(sizes, launched)]
    else:
        pairs = [(sum(sizes), sum(p for _, p in launched), sum(-(-n // block_size) for n in sizes))]
    return next(((n, got, wanted) for n, got, wanted in pairs if got != wanted), None)


def _grid_mistake(block_size: int, shapes, launched) -> str | None:
    """A ✗ for a grid that computes the right values but is not one program per block of ``block_size``
    elements: a few programs that loop over several blocks each, or programs beyond the last block."""
    off = _grid_off(block_size, shapes, launched)
    if off is None:
        return None
    n, got, wanted = off
    if got < wanted:
        how = ("a single program loops over all of them" if got == 1 else
               f"only {got} programs, so some loop over several blocks")
        return (f"the values are right, but with n={n} residual_relu launched {plural(got, 'program')} "
                f"for {wanted} blocks of block_size elements: {how}. The exercise asks for one program per block, "
                "so that the GPU's many cores each take a block at the same time (one program runs on one core "
                "while the others idle): launch triton.cdiv(n, block_size) programs, each with its own block")
    return (f"the values are right, but with n={n} residual_relu launched {plural(got, 'program')} for "
            f"{plural(wanted, 'block')} of block_size elements: more programs than blocks. Either the grid divides n "
            "by less than block_size, so the extra programs start past the end and do nothing (every lane masked "
            "off), or each program covers fewer than block_size elements. One program per block: the grid is "
            "triton.cdiv(n, block_size) and the kernel gets BLOCK_SIZE=block_size")


def _block_size_mistake(block_size: int, sizes, launched) -> str | None:
    """What ignores block_size, the grid or the kernel's BLOCK_SIZE, when each size launched one kernel."""
    if len(launched) != len(sizes):
        return None
    for n, (_, programs) in zip(sizes, launched):
        if programs != -(-n // block_size):
            return (f"with n={n} the grid has {programs} program{'s' if programs != 1 else ''}, as for another "
                    "block size: the grid comes from the block_size argument, triton.cdiv(n, block_size)")
    return ("the grid follows block_size, but each program covers another number of elements: launch the kernel "
            "with BLOCK_SIZE=block_size, the argument, and build its offsets from BLOCK_SIZE")


def _unmasked_stores(kernel) -> int:
    """How many ``tl.store`` calls in the kernel's source (its helpers' included) have no mask."""
    try:
        tree = ast.parse(source_of(kernel))
    except SyntaxError:
        return 0
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "store" and len(node.args) < 3 and not any(k.arg == "mask" for k in node.keywords))


def _sixteen_bits(failure: Failed, kernels) -> Failed | None:
    """A ✗ for a kernel whose values pass through a 16-bit dtype (``.to(tl.bfloat16)``), when that is what
    left elements wrong or (under the interpreter, which stores a 16-bit value's bits into float32 memory)
    unwritten; None otherwise."""
    message = str(failure)
    if not kernels or not ("unwritten" in message or "wrong values" in message):
        return None
    for kernel in {id(k): k for k in kernels}.values():
        try:
            tree = ast.parse(source_of(kernel))
        except SyntaxError:
            continue
        narrow = next((node.attr for node in ast.walk(tree)
                       if isinstance(node, ast.Attribute) and node.attr in ("bfloat16", "float16")), None)
        if narrow:
            return Failed(f"the values pass through {narrow} in {getattr(kernel, '__name__', 'your kernel')} "
                          f"(tl.{narrow}): x, residual and out are float32, and {narrow} keeps "
                          f"{'8' if narrow == 'bfloat16' else '11'} of float32's 24 bits, so the sum comes out "
                          "rounded" + (" (and the interpreter cannot compute in bfloat16: what it stores is garbage)"
                                       if narrow == "bfloat16" else "")
                          + ". Add and store in the inputs' own dtype, with no .to()")
    return None
