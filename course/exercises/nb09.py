"""Notebook 09: Stream-K."""

from __future__ import annotations


import torch

from course.exercises.core import Failed, exercise, plural, require_jit, user_error

__all__ = ['check_streamk_span']


# (num_pid_m, num_pid_n, iters per tile, programs, Stream-K tiles): an even split, a remainder, fewer
# iterations than programs
_SPAN_CASES = [(6, 5, 8, 4, 6), (2, 3, 7, 4, 6), (3, 3, 3, 8, 1)]


@exercise("streamk_span", "Write the body of span above: program pid's (start, end) of the total iterations")
def check_streamk_span(span) -> str:
    """Check a ``@triton.jit`` function ``span(pid, total, sharers) -> (start, end)``: run in place of
    ``ScheduleContext.iter_range`` (``streamk.assignment``), the ranges must cover every shared
    iteration once, lie in program order and differ in length by at most one."""
    from course import plots, streamk

    require_jit("span", span, ("pid", "total", "sharers"))
    try:
        floats = streamk.span_returns_floats(span)
    except Exception as err:
        raise user_error("your span", err) from None
    if any(floats):
        raise Failed("span returns floats: ranges of iterations are counted in whole numbers, and a GPU refuses "
                      "float loop bounds; divide with // (integer division)")
    for num_pid_m, num_pid_n, iters, programs, shared in _SPAN_CASES:
        total = shared * iters
        case = f"{total} iterations ({shared} tiles of {iters}) over {programs} programs"
        try:
            log = streamk.assignment(num_pid_m, num_pid_n, iters, num_programs=programs, streamk_tiles=shared,
                                     span=span)
        except Exception as err:
            raise user_error(f"on {case}, your span", err) from None
        picture = lambda: plots.streamk_map(log, title=f"yours: {case}")  # noqa: E731
        owner, count = log["owner"][-shared:].flatten(), log["count"][-shared:].flatten()
        never, twice = int((count == 0).sum()), int((count > 1).sum())
        one_past = "end is one past the last iteration, as in range(start, end): the next program's start"
        if log["outside"]:
            if int(log["outside"]) == 1 and twice == programs - 1 and not never:
                raise Failed(f"on {case}: every range is one iteration too long: {one_past}", picture())
            raise Failed(f"on {case}: ranges run outside the iterations ({plural(log['outside'], 'iteration')} "
                          "below 0 or from total on): they must stay within 0 .. total - 1", picture())
        if never or twice:
            sizes = torch.bincount(owner[count > 0].long(), minlength=programs)
            if twice:
                why = "ranges overlap: each program's range must start where the previous one's ends"
            elif total % programs and int(sizes.sum()) == (total // programs) * programs:
                why = ("some iterations are left over: the total does not split evenly, and the remainder must go "
                       "to some of the programs")
            elif never == min(programs, total):
                why = f"every range stops one iteration short: {one_past}"
            else:
                why = ("some ranges are empty or cut short: each one starts where the previous one ends, and "
                       "together they run from 0 to total")
            raise Failed(f"on {case}: {plural(twice, 'iteration')} computed more than once and {never} never: {why}",
                          picture())
        if (owner[1:] < owner[:-1]).any():
            raise Failed(f"on {case}: every iteration is taken once, but not in program order: program 0's range "
                          "comes first, then program 1's, and so on", picture())
        sizes = torch.bincount(owner.long(), minlength=programs)
        if int(sizes.max() - sizes.min()) > 1:
            raise Failed(f"on {case}: the ranges hold {sizes.tolist()} iterations: split as evenly as possible, "
                          "lengths differing by at most one (the slowest program sets the time)", picture())
    return f"right on {len(_SPAN_CASES)} splits: even, with a remainder, and fewer iterations than programs"
