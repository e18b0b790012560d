"""Notebook 04: the grouped launch order."""

from __future__ import annotations


import torch

from course.exercises.core import Failed, exercise, plural, require_jit, user_error

__all__ = ['check_grouped_tile']


# (num_pid_m, num_pid_n, GROUP_M): whole groups, a short last group, a group taller than the grid,
# a single column, and a 4096^2 product in 128^2 tiles.
_ORDER_CASES = [(4, 6, 2), (5, 7, 2), (10, 3, 4), (2, 5, 4), (9, 1, 2), (32, 32, 8)]


@exercise("grouped_tile", "Write the body of grouped_tile above: the tile (pid_m, pid_n) of program pid")
def check_grouped_tile(grouped_tile) -> str:
    """Check a ``@triton.jit`` function ``grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)`` that
    returns program ``pid``'s tile in grouped order, by running it in a kernel on several grids and
    comparing with the course's order (``course.tiled.grouped_tile``)."""
    from course import plots, tiled

    require_jit("grouped_tile", grouped_tile, ("pid", "num_pid_m", "num_pid_n", "GROUP_M"))
    for num_pid_m, num_pid_n, group_m in _ORDER_CASES:
        grid = f"{num_pid_m} x {num_pid_n} tiles with GROUP_M = {group_m}"
        try:
            mine = tiled.launch_order(num_pid_m, num_pid_n, group_m, mapping=grouped_tile)
        except Exception as err:
            raise user_error(f"on {grid}, your function", err) from None
        reference = tiled.launch_order(num_pid_m, num_pid_n, group_m)
        pid_m, pid_n = mine
        if torch.equal(pid_m, reference[1]) and torch.equal(pid_n, reference[0]):
            raise Failed(f"on {grid}: pid_m and pid_n are swapped; return pid_m, pid_n in that order")
        outside = ((pid_m < 0) | (pid_m >= num_pid_m) | (pid_n < 0) | (pid_n >= num_pid_n)).nonzero().flatten()
        if len(outside):
            p = int(outside[0])
            in_last_group = p >= (num_pid_m // group_m) * group_m * num_pid_n
            short = int(pid_m[p]) >= num_pid_m and num_pid_m % group_m and in_last_group
            if short:
                hint = (": the last group has fewer rows when num_pid_m is no multiple of GROUP_M; its height "
                        "is the rows that are left (tl.minimum)")
            else:
                hint = ": pid_m must stay below num_pid_m and pid_n below num_pid_n (integer division: //)"
            raise Failed(f"on {grid}: program {p} got tile ({int(pid_m[p])}, {int(pid_n[p])}), outside the grid{hint}")
        picture = lambda: plots.launch_orders(  # noqa: E731
            {"yours": tiled.order_map(*mine, num_pid_m, num_pid_n),
             "the grouped order": tiled.order_map(*reference, num_pid_m, num_pid_n)}, title=grid)
        tiles = pid_m.long() * num_pid_n + pid_n.long()
        counts = torch.bincount(tiles, minlength=num_pid_m * num_pid_n)
        if (counts != 1).any():
            twice, never = int((counts > 1).sum()), int((counts == 0).sum())
            if int(pid_m.max()) < group_m < num_pid_m:
                why = ("every program stays in the first GROUP_M rows: add the first row of the program's own "
                       "group to pid_m")
            else:
                why = "every program must get a tile of its own: check how pid_m and pid_n follow from the position"
            raise Failed(f"on {grid}: {plural(twice, 'tile')} taken by several programs and {never} by none: {why}",
                          picture())
        if not (torch.equal(pid_m, reference[0]) and torch.equal(pid_n, reference[1])):
            raise Failed(f"on {grid}: every tile is taken once, but not in the grouped order. "
                          f"{_order_hint(mine, reference, num_pid_m, num_pid_n, group_m)}", picture())
    return f"right on {len(_ORDER_CASES)} grids, short last groups included"


def _order_hint(mine, reference, num_pid_m: int, num_pid_n: int, group_m: int) -> str:
    """What a permutation that is not the grouped order most likely got wrong."""
    pids = torch.arange(num_pid_m * num_pid_n)
    if torch.equal(mine[0], pids // num_pid_n) and torch.equal(mine[1], pids % num_pid_n):
        return "This is row-major order: GROUP_M is not used"
    if torch.equal(mine[0], pids % num_pid_m) and torch.equal(mine[1], pids // num_pid_m):
        return "This is column-major order over the whole grid: only GROUP_M rows form a group"
    first = int(((mine[0] != reference[0]) | (mine[1] != reference[1])).nonzero()[0])
    group_rows = first // (group_m * num_pid_n) * group_m
    if num_pid_m - group_rows < group_m:
        return ("The last group has fewer rows (num_pid_m is no multiple of GROUP_M): its height is the rows that "
                "are left, and both the row and the column within it depend on that height")
    return (f"Program {first} takes tile ({int(mine[0][first])}, {int(mine[1][first])}); in grouped order, "
            "consecutive programs go down the GROUP_M rows of their group, then one column right")
