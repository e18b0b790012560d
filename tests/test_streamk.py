"""Tests of course.streamk (notebook 09): the Stream-K assignment read from ScheduleContext, and its pictures."""

import matplotlib
import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course import plots, streamk

matplotlib.use("Agg")


@pytest.mark.parametrize("num_pid_m,num_pid_n,iters,programs,shared",
                         [(6, 5, 8, 4, 6), (2, 3, 7, 4, 6), (3, 3, 3, 8, 1), (4, 4, 5, 3, 0), (1, 2, 4, 5, 9)])
def test_every_iteration_once_whole_tiles_round_robin_shared_ones_split(num_pid_m, num_pid_n, iters, programs,
                                                                       shared):
    log = streamk.assignment(num_pid_m, num_pid_n, iters, num_programs=programs, streamk_tiles=shared)
    tiles = num_pid_m * num_pid_n
    shared = min(shared, tiles)
    assert (log["count"] == 1).all() and log["outside"] == 0
    whole = log["owner"][:tiles - shared]
    assert torch.equal(whole, (torch.arange(tiles - shared) % programs)[:, None].expand_as(whole).int())
    split = log["owner"][tiles - shared:].flatten()
    assert (split[1:] >= split[:-1]).all(), "ranges in program order"
    sizes = torch.bincount(split.long(), minlength=programs)
    assert int(sizes.max() - sizes.min()) <= 1, "balanced to one iteration"


def test_program_spans_run_whole_tiles_then_shared_pieces_backwards():
    log = streamk.assignment(6, 5, 8, num_programs=4, streamk_tiles=6)
    spans = streamk.program_spans(log)
    assert spans[0][-2:] == [(25, 0, 4), (24, 0, 8)] and spans[1][-2:] == [(26, 0, 8), (25, 4, 8)]
    assert sum(end - begin for pieces in spans.values() for _, begin, end in pieces) == 30 * 8


def test_pictures():
    log = streamk.assignment(3, 2, 4, num_programs=3, streamk_tiles=2)
    assert len(plots.streamk_map(log).axes) == 1
    twice = dict(log, count=log["count"] * 2)
    assert len(plots.streamk_map(twice).axes[0].texts) == 24
    fig = plots.timeline(streamk.program_spans(log))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["program 0", "program 1", "program 2"]
    with pytest.raises(ValueError):
        streamk.assignment(0, 1, 1, num_programs=1, streamk_tiles=0)
