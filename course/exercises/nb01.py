"""Notebook 01: element-wise kernels, and the machinery that checks them (run at odd sizes, poisoned
outputs, a picture of the elements written)."""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch

from course import runtime
from course.elementwise import (
    describe_runs,
    guarded,
    overwritten_guard,
    runs,
    unwritten,
)
from course.exercises import core
from course.exercises.core import (
    Failed,
    NotAttempted,
    constexpr_names,
    exercise,
    launches,
    plural,
    require_function,
    unmasked_loads,
    user_error,
)

__all__ = ['check_axpy']


# Odd sizes on purpose: not multiples of any power-of-two block, below one block, one element.
ELEMENTWISE_SIZES = (1000, 4099, 1025, 100, 1)


@dataclasses.dataclass
class Run:
    """What one call of the learner's function did at one size."""

    n: int
    shape: tuple
    programs: int
    launched: list
    returned_other: bool
    missed: list
    past: list
    wrong: torch.Tensor  # bool per element: written but wrong
    inputs_changed: int | None
    inputs_unread: list  # the inputs no kernel was given (torch computed with them instead)


def run_once(call: Callable, reference: Callable, n_inputs: int, shape, dtype) -> Run:
    n = int(torch.Size(shape).numel())
    inputs = [guarded(n, dtype=dtype, fill=torch.randn)[0].view(shape) for _ in range(n_inputs)]
    before = [t.clone() for t in inputs]
    out_flat, buffer = guarded(n, dtype=dtype)
    out = out_flat.view(shape)
    with launches() as seen:
        result = call(*inputs, out)
        if runtime.DEVICE == "cuda":
            torch.cuda.synchronize()
    if seen.stubs:
        raise NotAttempted
    returned_other = isinstance(result, torch.Tensor) and result.data_ptr() != out.data_ptr()
    changed = next((i for i, (t, b) in enumerate(zip(inputs, before)) if not torch.equal(t, b)), None)
    ref = reference(*[b.double() for b in before]).reshape(-1).cpu()
    got = out.reshape(-1).detach().cpu().double()
    written = ~torch.isnan(got)
    tol = 1e-5 * (1 + ref.abs())
    wrong = written & ((got - ref).abs() > tol)
    unread = [i for i, x in enumerate(inputs) if seen.launched and x.untyped_storage().data_ptr() not in seen.storages]
    return Run(n, tuple(shape), seen.programs, [k for k, _ in seen.launched], returned_other, unwritten(out),
               overwritten_guard(buffer, n), wrong, changed, unread)


def element_picture(run: Run, title: str):
    """A strip of the output's elements: right, wrong, never written, and written past the end."""
    from course import plots

    tail = max([b for _, b in run.past] + [run.n - 1]) + 1
    tail = min(max(tail + max(8, run.n // 8), run.n + 8), run.n + 4096)
    return plots.element_map(run.n, tail, missed=run.missed, past=run.past,
                             wrong=runs(run.wrong), title=title)


def _elements(pairs) -> str:
    """``[(5, 5)]`` -> "element 5", ``[(1000, 1023)]`` -> "elements 1000..1023"."""
    single = len(pairs) == 1 and pairs[0][0] == pairs[0][1]
    return f"{'element' if single else 'elements'} {describe_runs(pairs)}"


def run_elementwise(fn_name: str, call: Callable, reference: Callable, n_inputs: int, *,
                       kernel_hint: str, input_names: tuple, dtype=torch.float32, shapes=None, wrong_hints=(),
                       runtime_args=()) -> str:
    """Run ``call(*inputs, out)`` at every shape, then name the most telling failure.

    ``out`` is poisoned (NaN) and followed by NaN guard elements, so never-written elements,
    elements written past the end and wrong values are told apart. All sizes run before any
    verdict, so a grid that rounds down is caught at the sizes it launches nothing for.
    ``wrong_hints`` are ``(alternative_reference, hint)`` pairs: when the output matches a
    typical mistake, its hint is given. ``runtime_args`` names kernel parameters that must not be
    ``tl.constexpr``.
    """
    shapes = shapes or [(n,) for n in ELEMENTWISE_SIZES]
    runs_ = []
    for shape in shapes:
        try:
            runs_.append(run_once(call, reference, n_inputs, shape, dtype))
        except (Failed, NotAttempted):
            raise
        except Exception as err:
            raise user_error(f"{fn_name} (with an input of shape {tuple(shape)})", err) from None
    # element by element, a lane a load masks off reaches no other lane: core's hint about loads without
    # other= (whose lanes reach a sum, a maximum or a tl.dot) does not apply
    core.UNFILLED_LOADS.clear()

    if all(r.programs == 0 for r in runs_):
        complete = all(not r.missed and not r.wrong.any() and not r.past for r in runs_)
        if complete:
            raise Failed(f"the output is right, but no Triton kernel ran: write it as a Triton kernel "
                          f"({kernel_hint}) and launch it from {fn_name}")
        raise Failed(f"{fn_name} launched no Triton kernel: launch it as kernel[grid](...) with a grid of "
                      "triton.cdiv(n, BLOCK_SIZE) programs")
    idle = [r for r in runs_ if r.programs == 0]
    if idle:
        busy = next(r for r in runs_ if r.programs)
        raise Failed(f"{_with(idle[0])} {fn_name} launched no programs at all ({_with(busy)} it launched "
                      f"{busy.programs}): does the grid round up? n // BLOCK_SIZE is 0 when n < BLOCK_SIZE; "
                      "triton.cdiv(n, BLOCK_SIZE) rounds up", element_picture(idle[0], f"n = {idle[0].n}"))
    crowded = next((r for r in runs_ if r.n >= 100 and r.programs >= r.n), None)
    if crowded:
        raise Failed(f"{_with(crowded)} {fn_name} launched {crowded.programs} programs, one per element or more: each "
                      "program handles a whole block, so launch triton.cdiv(n, BLOCK_SIZE) of them")
    changed = next((r for r in runs_ if r.inputs_changed is not None), None)
    if changed:
        which = input_names[changed.inputs_changed]
        raise Failed(f"{which} was modified: a kernel must only write its output. Does a tl.store go to "
                      f"{which}'s pointer instead of out's?")
    other = next((r for r in runs_ if r.returned_other), None)
    if other:
        raise Failed(f"{fn_name} returned a new tensor: write the result into the `out` argument it is given "
                      "(and return out, or nothing)")
    unread = next((r for r in runs_ if r.inputs_unread), None)
    if unread:
        names = " and ".join(input_names[i] for i in unread.inputs_unread)
        raise Failed(f"{names} never reached a Triton kernel: {fn_name} computed with {names} in torch and gave "
                      "the kernel the result. Pass the inputs themselves to the kernel and do all the arithmetic "
                      "there: one kernel, one pass over memory, is the point")
    past = next((r for r in runs_ if r.past), None)
    if past:
        count = sum(b - a + 1 for a, b in past.past)
        raise Failed(f"{_with(past)}, your kernel wrote {plural(count, 'element')} past the end of out (positions "
                      f"{describe_runs(past.past)}): the last block runs past n; mask the stores (and loads) "
                      "with offsets < n", element_picture(past, f"n = {past.n}: writes past the end"))
    # Gaps inside the tensor say more about the offsets than a missing tail does: report those first.
    holes = next((r for r in runs_ if len(r.missed) > 1 or (r.missed and r.missed[-1][1] != r.n - 1)),
                 next((r for r in runs_ if r.missed), None))
    if holes:
        raise Failed(f"{_with(holes)}, your kernel left {_elements(holes.missed)} of out unwritten: "
                      f"{_why_missed(holes)}", element_picture(holes, f"n = {holes.n}: elements never written"))
    bad = next((r for r in runs_ if r.wrong.any()), None)
    if bad:
        where = _elements(runs(bad.wrong))
        hint = _wrong_value_hint(call, reference, n_inputs, dtype, wrong_hints)
        raise Failed(f"{_with(bad)}, every element was written but {where} hold wrong values: {hint}",
                      element_picture(bad, f"n = {bad.n}: wrong values"))
    kernels = {id(k): k for r in runs_ for k in r.launched}.values()
    for kernel in kernels:
        constant = sorted(constexpr_names(kernel) & set(runtime_args))
        if constant:
            raise Failed(f"the output is right, but {constant[0]} is a tl.constexpr in {kernel.__name__}: Triton then "
                          f"compiles the kernel again for every value of {constant[0]}; make it a plain argument")
        if unmasked_loads(kernel):
            raise Failed(f"the output is right, but {kernel.__name__} has a tl.load without a mask: the last block "
                          "reads past the end of its input, which can fault on a GPU; mask the loads as the store")
    return f"right at all {len(shapes)} sizes tried, nothing written out of bounds"


def _with(run: Run) -> str:
    """"with n=1000", or "with an input of shape (3, 333)" for more than one dimension."""
    return f"with n={run.n}" if len(run.shape) == 1 else f"with inputs of shape {run.shape} ({run.n} elements)"


def _why_missed(run: Run) -> str:
    """Why elements were left unwritten, judged from what was written and how many programs ran."""
    missed = sum(b - a + 1 for a, b in run.missed)
    written = run.n - missed
    tail = len(run.missed) == 1 and run.missed[0][1] == run.n - 1
    if tail and len(run.shape) > 1 and written in run.shape:
        return (f"only {written} elements were written, one dimension of the shape: the kernel must cover all "
                "x.numel() elements, not x.shape[0] or len(x)")
    if tail and missed * run.programs < max(written, 1):  # less than one program's share is missing
        return ("the last, partial block was not written: does the grid cover it (triton.cdiv) and does the "
                "mask let its elements through (offsets < n, not offsets < n - 1)?")
    per_program = written // run.programs if written % run.programs == 0 else 0
    if tail and per_program and math.ceil(run.n / per_program) > run.programs:  # each wrote a whole block
        each = f", {per_program} each," if run.programs > 1 else ""
        return (f"{plural(run.programs, 'program')} wrote the first {written} elements{each} and then stopped: "
                "the grid has too few programs; launch triton.cdiv(n, BLOCK_SIZE) of them")
    return ("stretches of the tensor were skipped while programs overlapped: does each program start at "
            "pid * BLOCK_SIZE, with the BLOCK_SIZE the grid was computed with, and cover a whole block "
            "(tl.arange(0, BLOCK_SIZE))?")


def _wrong_value_hint(call, reference, n_inputs, dtype, wrong_hints) -> str:
    """Match the learner's output against typical mistakes, on one more fresh input."""
    shape = (777,)
    inputs = [torch.randn(shape, dtype=dtype, device=runtime.DEVICE) for _ in range(n_inputs)]
    out = torch.full(shape, float("nan"), dtype=dtype, device=runtime.DEVICE)
    try:
        call(*inputs, out)
    except Exception:  # it ran at every size before; a failure here only costs the hint
        return "the loads, the offsets of each input, or the arithmetic between load and store are off"
    got = out.double().cpu()
    args = [t.double().cpu() for t in inputs]
    for alternative, hint in wrong_hints:
        if torch.allclose(got, alternative(*args), rtol=1e-5, atol=1e-5, equal_nan=False):
            return hint
    return "the loads, the offsets of each input, or the arithmetic between load and store are off"


@exercise("axpy", "Write axpy_kernel's body and the launch in axpy above")
def check_axpy(axpy: Callable) -> str:
    """Check ``axpy(alpha, x, y, out)``, which must write ``alpha * x + y`` into ``out`` with a
    Triton kernel. Tries several values of ``alpha`` (a run-time argument, not a constant of the
    kernel) and odd sizes."""
    require_function("axpy", axpy, ("alpha", "x", "y", "out"))
    for alpha in (2.5, -0.75):
        hints = [(lambda x, y, a=alpha: x + y, "alpha was not applied: multiply x by alpha"),
                 (lambda x, y, a=alpha: x + a * y, "alpha multiplies y here; it should multiply x"),
                 (lambda x, y, a=alpha: a * x, "y was not added"),
                 (lambda x, y, a=alpha: a * (x + y), "alpha multiplies the sum; it should multiply x alone"),
                 (lambda x, y, a=alpha: a * x + x, "x was loaded twice: load y from y_ptr")]
        shapes = [(n,) for n in ELEMENTWISE_SIZES] + [(3, 333)]
        run_elementwise("axpy", lambda x, y, out, a=alpha: axpy(a, x, y, out),
                        lambda x, y, a=alpha: a * x + y, 2, kernel_hint="@triton.jit axpy_kernel",
                        input_names=("x", "y"), wrong_hints=hints, runtime_args=("alpha",), shapes=shapes)
    return (f"right for two values of alpha at {len(shapes)} sizes no block divides (one of them 2-D), nothing "
            "written out of bounds")
