"""The catalogue of notebook 09's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes or hangs."""

import inspect

import pytest

from course import exercises, runtime, solutions

from catalogue import assert_survives, assert_wrong_answers_named, edited_source, quiet, variant

interpreter_only = pytest.mark.skipif(not runtime.INTERPRET, reason="what the interpreter's programs do, one after "
                                                                    "another (on a GPU these answers race or hang)")


# --- 09: a program's Stream-K span -------------------------------------------------------------------

_START = "start = pid * base + tl.minimum(pid, extra)"
_END = "end = start + base + (pid < extra).to(tl.int32)"
SPAN_WRONG = {  # label: (edits of solutions.span, words its message must contain)
    "no remainder": ([(_START, "start = pid * base"), (_END, "end = start + base")], "left over"),
    "one more for all": ([(_END, "end = start + base + 1")], "one iteration too long"),
    "past the end": ([(_END, "end = start + base + (pid < extra).to(tl.int32) + 2 * pid")], "outside the iterations"),
    "ceil division": ([("base = total // sharers", "base = (total + sharers - 1) // sharers"),
                       (_START, "start = tl.minimum(pid * base, total)"),
                       (_END, "end = tl.minimum(start + base, total)")], "as evenly as possible"),
    "reversed": ([(_START, "start = (sharers - 1 - pid) * base + tl.minimum(sharers - 1 - pid, extra)"),
                  (_END, "end = start + base + (sharers - 1 - pid < extra).to(tl.int32)")], "program order"),
    "overlap": ([(_START, "start = pid * base")], "overlap"),
    "float division": ([("base = total // sharers", "base = total / sharers")], "divides with /"),
    "empty ranges": ([(_END, "end = tl.where(pid == 1, start, start + base + (pid < extra).to(tl.int32))")],
                     "empty or cut short"),
    "end inclusive, short": ([(_END, "end = start + base + (pid < extra).to(tl.int32) - 1")], "one iteration short"),
    "end one past": ([(_END, "end = start + base + (pid < extra).to(tl.int32) + 1")], "one iteration too long"),
    "wrong signature": ([("def span(pid, total, sharers):", "def span(pid, total):")], "keep the signature"),
    "the launch's program id": ([("base = total // sharers", "pid = tl.program_id(0)\n    base = total // sharers")],
                                "calls tl.program_id"),
    "the launch's size": ([("base = total // sharers", "sharers = tl.num_programs(0)\n    base = total // sharers")],
                          "calls tl.num_programs"),
    "returns one value": ([("return start, end", "return end")], "return both"),
    "remainder to the first program only": ([(_START, "start = pid * base + tl.minimum(pid, 1) * extra"),
                                             (_END, "end = start + base + (pid == 0).to(tl.int32) * extra")],
                                            "as evenly as possible"),
    "returns end, start": ([("return start, end", "return end, start")], "wrong way round"),
    # the review: a float division turned back into an int is right here, but a GPU divides floats approximately
    "int() of a true division": ([(_START, "start = int(pid * total / sharers)"),
                                  (_END, "end = int((pid + 1) * total / sharers)")], "divides with /"),
    "a true division cast to int32": ([(_START, "start = (pid * total / sharers).to(tl.int32)"),
                                       (_END, "end = ((pid + 1) * total / sharers).to(tl.int32)")], "divides with /"),
    # the review: a block of one value, which the check's own store refused with Triton's internal words
    "block-shaped ranges": ([("return start, end", "one = tl.zeros([1], dtype=tl.int32)\n"
                                                   "    return one + start, one + end")], "two scalars"),
    "a block-shaped end": ([("return start, end", "return start, tl.zeros([1], dtype=tl.int32) + end")],
                           "returns end as a block"),
}
# Right under the interpreter, refused by a GPU's compiler: the check builds the span for an H100 and says why
SPAN_REFUSED = {
    "int() of a value computed in the kernel": ([(_START, "start = int(pid * base + tl.minimum(pid, extra))")],
                                                "a value computed in a kernel"),
    "a while True loop left with break": ([(_START, "start = 0\n    while True:\n"
                                                     "        start = pid * total // sharers\n        break"),
                                           (_END, "end = (pid + 1) * total // sharers")], "have no break"),
}


def test_the_span_reference_passes_as_given_and_as_a_learners_cell(tmp_path):
    assert quiet(exercises.check_streamk_span, solutions.span).passed
    assert quiet(exercises.check_streamk_span, variant(tmp_path, "span_mine", solutions.span)).passed


def test_every_wrong_span_gets_its_own_message(tmp_path):
    table = {label: (variant(tmp_path, f"span_{i}", solutions.span, *edits), words)
             for i, (label, (edits, words)) in enumerate({**SPAN_WRONG, **SPAN_REFUSED}.items())}
    table["no @triton.jit"] = (lambda pid, total, sharers: (0, total), "did you forget @triton.jit")
    table["None"] = (None, "got NoneType")
    assert_wrong_answers_named(exercises.check_streamk_span, table,
                               same_mistake=("one more for all", "end one past", "ceil division",
                                             "remainder to the first program only", "int() of a true division",
                                             "a true division cast to int32"))


SPAN_RIGHT = {  # other splits that differ in length by at most one
    "the remainder to the last programs": [(_START, "start = pid * base + tl.maximum(pid - (sharers - extra), 0)"),
                                           (_END, "end = start + base + (pid >= sharers - extra).to(tl.int32)")],
    "pid * total // sharers": [(_START, "start = pid * total // sharers"),
                               (_END, "end = (pid + 1) * total // sharers")],
    "tl.where": [(_START, "start = tl.where(pid < extra, pid * (base + 1), pid * base + extra)"),
                 (_END, "end = tl.where(pid < extra, start + base + 1, start + base)")],
    "Python min and an if": [(_START, "start = pid * base + min(pid, extra)"),
                             (_END, "end = start + base\n    if pid < extra:\n        end += 1")],
    # the review's right answers: a comparison added as an int, and a while loop that sums the lower ranges
    "a comparison added as it is": [(_END, "end = start + base + (pid < extra)")],
    "a while loop over the lower programs": [(_START, "start = pid * 0\n    p = pid * 0\n    while p < pid:\n"
                                                      "        start += base + (p < extra).to(tl.int32)\n"
                                                      "        p += 1")],
}


@pytest.mark.parametrize("label", SPAN_RIGHT)
def test_a_span_that_splits_the_remainder_another_way_passes(tmp_path, label):
    span = variant(tmp_path, "span_right_" + str(list(SPAN_RIGHT).index(label)), solutions.span, *SPAN_RIGHT[label])
    verdict = quiet(exercises.check_streamk_span, span)
    assert verdict.passed, verdict.line


def test_a_span_the_gpu_refuses_is_told_the_compilers_reason(tmp_path):
    span = variant(tmp_path, "span_break", solutions.span, *SPAN_REFUSED["a while True loop left with break"][0])
    verdict = quiet(exercises.check_streamk_span, span)
    assert "unsupported AST node type: Break" in verdict.message and "at: break" in verdict.message, verdict.line


def test_a_span_with_huge_ranges_is_told_without_drawing_them(tmp_path):
    span = variant(tmp_path, "span_huge", solutions.span, (_END, "end = start + 1000000000"))
    verdict = quiet(exercises.check_streamk_span, span)
    assert verdict.status == "failed" and "outside the iterations" in verdict.message, verdict.line


@interpreter_only
def test_a_span_that_never_returns_ends_with_one_line():
    source = edited_source(solutions.span, ("return start, end", "while start >= 0:\n        start += 0\n"
                                                                 "    return start, end"))
    assert_survives("check_streamk_span", source, "span", "gave up", time_limit_s=5)


# --- 09: the Stream-K loop and its fix-up ---------------------------------------------------------------

_HEADER = "from course.stages import GemmContext, ScheduleContext, make_output_view, make_tensor_view\n"
_SOURCE = inspect.getsource(solutions.streamk_kernel.fn)
_HAND_OVER = _SOURCE[_SOURCE.index("        if k_end < sched.iters_per_tile():"):_SOURCE.index("        end -= k_end")]
_OWNER = _SOURCE[_SOURCE.index("        else:  # this program owns the tile"):_SOURCE.index("        end -= k_end")]
_RAISE = 'tl.atomic_xchg(FLAGS + pid, k_begin + 1, sem="release")'
_STORE_P = "tl.store(P + pid * BLOCK_M * BLOCK_N + in_slot, acc)"
_PUBLISH = (f"            {_STORE_P}\n            tl.debug_barrier()  # all of the partial is written before the "
            f"flag goes up\n            {_RAISE}")
_ADD = "acc += tl.load(P + q * BLOCK_M * BLOCK_N + in_slot)"
_CLEAR = 'tl.atomic_xchg(FLAGS + q, 0, sem="relaxed")'
_WAIT = 'flag = tl.atomic_cas(FLAGS + q, 0, 0, sem="acquire")'
_FIRST_WAIT = _WAIT + "  # reads the flag, changes nothing"
_SPIN = "                    " + _WAIT
_REDUCE = "acc = ctx.reduce_k_range(tensorA, tensorB, out_tile, k_begin, k_end)"
_STORE_C = "            tensorC.store(acc, out_tile)"
_STEP = "end -= k_end - k_begin"
_NEXT = "k = flag - 1  # where program q's piece starts"

# The owner as course.stages does it: the program holding the tile's first K-iteration, from the split, then
# every program up to pid - 1, in increasing order; flags are 1 when up.
_COURSE_OWNER = '''        else:  # the owner: wait for the lower programs with earlier K-iterations, in order
            if k_begin > 0:
                iters = sched.iters_per_tile()
                total = TILES * iters
                base = total // PROGRAMS
                extra = total % PROGRAMS
                g = tile_id * iters  # the tile's first K-iteration, and the program holding it
                first = tl.where(g < extra * (base + 1), g // (base + 1),
                                 extra + (g - extra * (base + 1)) // tl.maximum(base, 1))
                for q in range(first, pid):
                    while tl.atomic_cas(FLAGS + q, 1, 1, sem="acquire") != 1:
                        pass
                    tl.atomic_xchg(FLAGS + q, 0, sem="relaxed")
                for q in range(first, pid):
                    acc += tl.load(P + q * BLOCK_M * BLOCK_N + in_slot)
            tensorC.store(acc, out_tile)
'''
_COURSE = [(_OWNER, _COURSE_OWNER), (_RAISE, 'tl.atomic_xchg(FLAGS + pid, 1, sem="release")')]
_COURSE_WAIT = ('                    while tl.atomic_cas(FLAGS + q, 1, 1, sem="acquire") != 1:\n'
                '                        pass\n'
                '                    tl.atomic_xchg(FLAGS + q, 0, sem="relaxed")\n')
_LOOP = '                while flag == 0:\n                    flag = tl.atomic_cas(FLAGS + q, 0, 0, sem="acquire")\n'
_TRIES_FOR = ('                    up = tl.atomic_cas(FLAGS + q, 1, 1, sem="acquire")\n'
              "                    for _ in range(1000):\n"
              "                        if up != 1:\n"
              '                            up = tl.atomic_cas(FLAGS + q, 1, 1, sem="acquire")\n'
              '                    tl.atomic_xchg(FLAGS + q, 0, sem="relaxed")\n')
_TRIES_FORCED = ('                    up = tl.atomic_cas(FLAGS + q, 1, 1, sem="acquire")\n'
                 "                    tries = 0\n"
                 "                    while up != 1:\n"
                 '                        up = tl.atomic_cas(FLAGS + q, 1, 1, sem="acquire")\n'
                 "                        tries += 1\n"
                 "                        up = tl.where(tries > 1000, 1, up)\n"
                 '                    tl.atomic_xchg(FLAGS + q, 0, sem="relaxed")\n')
_VOLATILE_WAIT = ("                    up = tl.load(FLAGS + q, volatile=True)\n"
                  "                    while up == 0:\n"
                  "                        up = tl.load(FLAGS + q, volatile=True)\n"
                  "                    tl.atomic_xchg(FLAGS + q, 0)\n")
_BARRIER = "            tl.debug_barrier()  # all of the partial is written before the flag goes up\n"
_FORWARD = [("    while end > start:  # the pieces of the range, the last one first\n"
             "        tile_id, k_begin, k_end = sched.streamk_span(start, end)",
             "    iters = sched.iters_per_tile()\n    while start < end:  # first piece first\n"
             "        tile_id = start // iters\n        k_begin = start % iters\n"
             "        k_end = tl.minimum(iters, k_begin + end - start)"),
            (_STEP, "start += k_end - k_begin")]
_CHAINED = '''        if k_begin > 0:  # the running sum of the tile's earlier K-iterations, from the program below
            up = tl.atomic_add(FLAGS + pid - 1, 0, sem="acquire")
            while up == 0:
                up = tl.atomic_add(FLAGS + pid - 1, 0, sem="acquire")
            tl.atomic_xchg(FLAGS + pid - 1, 0, sem="relaxed")
            acc += tl.load(P + (pid - 1) * BLOCK_M * BLOCK_N + in_slot)
        if k_end < sched.iters_per_tile():  # hand the running sum over
            tl.store(P + pid * BLOCK_M * BLOCK_N + in_slot, acc)
            tl.debug_barrier()
            tl.atomic_xchg(FLAGS + pid, 1, sem="release")
        else:
            tensorC.store(acc, out_tile)
'''
_HELPERS = '''@triton.jit
def wait_for(flag_ptr):
    flag = tl.atomic_cas(flag_ptr, 0, 0, sem="acquire")
    while flag == 0:
        flag = tl.atomic_cas(flag_ptr, 0, 0, sem="acquire")
    return flag


@triton.jit
def hand_over(slot_ptr, flag_ptr, acc, in_slot, value):
    tl.store(slot_ptr + in_slot, acc)
    tl.debug_barrier()
    tl.atomic_xchg(flag_ptr, value, sem="release")
'''


def _importing(line):
    """An edit that puts ``line`` (an import) at the top of the variant's module."""
    return ("@triton.jit\ndef streamk_kernel", line + "\n\n\n@triton.jit\ndef streamk_kernel")


# Wrong answers whose message is the same compiled on a GPU and under the interpreter.
KERNEL_WRONG = {  # label: (edits of solutions.streamk_kernel, words its message must contain)
    "the owner adds no partial": ([(_ADD, "pass")], "only its owner's own K-iterations"),
    "only the nearest lower partial": ([(_NEXT, "k = 0")], "are missing"),
    "a partial handed over in float16": ([(_STORE_P, _STORE_P.replace("acc)", "acc.to(tl.float16))"))],
                                         "lost precision"),
    "the owner's own acc twice": ([(_STORE_C, "            tensorC.store(acc + acc, out_tile)")], "counted twice"),
    "flags never lowered": ([(_CLEAR, "pass")], "left raised"),
    "calls streamk_fixup": ([("        if k_end < sched.iters_per_tile():",
                              "        acc, owner = sched.streamk_fixup(acc, tile_id, k_begin, k_end, P, FLAGS)\n"
                              "        if k_end < sched.iters_per_tile():")], "course's own fix-up"),
    "calls the course's GEMM kernel": ([("    pid = tl.program_id(0)\n", "    pid = tl.program_id(0)\n    if pid < 0:\n"
                                         "        matmul_kernel(A, B, C)\n"),
                                        _importing("from course.gemm.kernel import matmul_kernel")],
                                       "the course's own GEMM"),
    "calls the solution": ([("    pid = tl.program_id(0)\n", "    pid = tl.program_id(0)\n    if pid < 0:\n"
                             "        solutions.streamk_kernel(A, B, C)\n"),
                            _importing("from course import solutions")], "reference solution"),
    "uses torch": ([(_STORE_C, "            tensorC.store(torch.relu(acc), out_tile)"), _importing("import torch")],
                   "uses torch"),
    "wrong signature": ([("PROGRAMS: tl.constexpr,\n                   TILES: tl.constexpr)",
                          "PROGRAMS: tl.constexpr)"),
                         ("streamk_tiles=TILES", "streamk_tiles=PROGRAMS")], "keep the signature"),
    "the K range from 0": ([(_REDUCE, _REDUCE.replace("k_begin, k_end)", "0, k_end)"))], None),  # words below
    # the owner never waits: one acquiring atomic, where a GPU needs a loop (under the interpreter the lower
    # programs ran first, so the flag was up: the check makes each first read see it down)
    "no wait loop: the flag read once": ([(_LOOP, "")], "until it sees the flag up"),
    "no wait loop: one atomic_cas that lowers the flag": (
        _COURSE + [(_COURSE_WAIT, '                    tl.atomic_cas(FLAGS + q, 1, 0, sem="acquire")\n')],
        "until it sees the flag up"),
    "no wait loop: one atomic_xchg that lowers the flag": (
        _COURSE + [(_COURSE_WAIT, '                    tl.atomic_xchg(FLAGS + q, 0, sem="acquire")\n')],
        "until it sees the flag up"),
    "no wait loop: a device_assert on the flag": (_COURSE + [(_COURSE_WAIT, '                    tl.device_assert('
                                                              'tl.atomic_cas(FLAGS + q, 1, 0, sem="acquire") == 1, '
                                                              '"flag down")\n')], "until it sees the flag up"),
    "no wait loop: the flag read twice": ([(_LOOP, '                flag = tl.atomic_cas(FLAGS + q, 0, 0, '
                                                   'sem="acquire")\n')], "until it sees the flag up"),
    "a wait loop that never reads again": ([(_LOOP, "                while flag == 0:\n                    pass\n")],
                                           "never reads the flag again"),
    "no barrier before the flag goes up": ([(_BARRIER, "")], "tl.debug_barrier() between"),
    "the owner replaces its acc by a partial": ([(_ADD, _ADD.replace("acc +=", "acc ="))], "owner's own K-iterations"),
    "a private helper of the course": (_COURSE + [('''                base = total // PROGRAMS
                extra = total % PROGRAMS
                g = tile_id * iters  # the tile's first K-iteration, and the program holding it
                first = tl.where(g < extra * (base + 1), g // (base + 1),
                                 extra + (g - extra * (base + 1)) // tl.maximum(base, 1))
''', "                first = sched._streamk_program_of(tile_id * iters)\n")], "private helper of the course"),
    "a break in the walk": ([("    while end > start:  # the pieces of the range, the last one first\n",
                              "    while True:\n        if end <= start:\n            break\n")],
                            "have no break"),
    # the review: a wait that gives up after 1000 tries (read from the source, before any launch)
    "a wait that gives up after 1000 tries": ([(_LOOP, "                tries = 0\n"
                                                       "                while (flag == 0) & (tries < 1000):\n"
                                                       '                    flag = tl.atomic_cas(FLAGS + q, 0, 0, '
                                                       'sem="acquire")\n'
                                                       "                    tries += 1\n")], "gives up"),
    # the review: a volatile load is no atomic that acquires (it was told its last read "saw it down")
    "waits with tl.load": ([(_FIRST_WAIT, "flag = tl.load(FLAGS + q, volatile=True)"),
                            (_SPIN, "                    flag = tl.load(FLAGS + q, volatile=True)")],
                           "not an atomic that acquires"),
    "waits with tl.load, lowers with a default atomic": (_COURSE + [(_COURSE_WAIT, _VOLATILE_WAIT)],
                                                         "not an atomic that acquires"),
}
# the same mistake, found by the watch or read from the source: one message for several of them
_NO_WAIT = ("no wait loop: the flag read once", "no wait loop: one atomic_cas that lowers the flag",
            "no wait loop: one atomic_xchg that lowers the flag", "no wait loop: a device_assert on the flag",
            "no wait loop: the flag read twice")
# Wrong answers that only the interpreter's watch sees (on a GPU they race, or pass by luck).
KERNEL_WRONG_WATCHED = {
    "no fix-up: every piece stored": ([(_HAND_OVER, "        tensorC.store(acc, out_tile)\n")], "is stored by"),
    "a tile stored twice by its owner": ([(_STORE_C, _STORE_C + "\n" + _STORE_C)], "2 times"),
    "flag raised before the partial": ([(_PUBLISH, f"            {_RAISE}\n            {_STORE_P}")],
                                       "before writing its partial"),
    "flag raised with tl.store": ([(_RAISE, "tl.store(FLAGS + pid, k_begin + 1)")], "raises its flag with tl.store"),
    "flag raised relaxed": ([(_RAISE, _RAISE.replace("release", "relaxed"))], "raises its flag with sem=\"relaxed\""),
    "waits with a relaxed atomic": ([(_FIRST_WAIT, _WAIT.replace("acquire", "relaxed")),
                                     (_SPIN, _SPIN.replace("acquire", "relaxed"))],
                                    'with sem="relaxed", which does not acquire'),
    "the course's wait loop, relaxed": (_COURSE + [(_COURSE_WAIT, _COURSE_WAIT.replace("acquire", "relaxed"))],
                                        'with sem="relaxed", which does not acquire'),
    "the range walked forward": (_FORWARD, "last piece first"),
    "an assert instead of a wait": (_COURSE + [(_COURSE_WAIT, '                    assert tl.atomic_cas(FLAGS + q, 1, '
                                                              '0, sem="acquire") == 1, "flag down"\n')], "and stopped"),
    "stores C without a mask": ([(_STORE_C, "            rm = out_tile.pid_m * BLOCK_M + tl.arange(0, BLOCK_M)\n"
                                            "            rn = out_tile.pid_n * BLOCK_N + tl.arange(0, BLOCK_N)\n"
                                            "            tl.store(C + rm[:, None] * stride_cm + rn[None, :] * "
                                            "stride_cn, acc)")], "without masking it"),
    "no wait at all": (_COURSE + [('                    while tl.atomic_cas(FLAGS + q, 1, 1, sem="acquire") != 1:\n'
                                   '                        pass\n', "")], "without first waiting"),
    "slots by tile id": ([(_STORE_P, _STORE_P.replace("pid *", "tile_id *")),
                          (_ADD, "acc += tl.load(P + (tile_id + 0 * q) * BLOCK_M * BLOCK_N + in_slot)")],
                         "not its own"),
    "slots BLOCK_M apart": ([(_STORE_P, _STORE_P.replace("BLOCK_M * BLOCK_N", "BLOCK_M")),
                             (_ADD, _ADD.replace("BLOCK_M * BLOCK_N", "BLOCK_M"))], "spreads over"),
    "the owner recomputes the tile": ([(_REDUCE, _REDUCE.replace(
        "k_begin, k_end)", "tl.where(k_end == sched.iters_per_tile(), 0, k_begin), k_end)")),
        ("            while k > 0:", "            while k < 0:")], "instead of redoing"),
    "adds into C with atomics": ([(_STORE_C, "            tl.atomic_add(C + tl.arange(0, BLOCK_M)[:, None] * stride_cm "
                                             "+ tl.arange(0, BLOCK_N)[None, :] * stride_cn, acc)")],
                                 "with an atomic"),
    "data-parallel, no Stream-K": ([(_SOURCE[_SOURCE.index("    start, end = sched.iter_range()"):],
                                     "    for tile_id in range(pid, TILES, PROGRAMS):\n"
                                     "        out_tile = sched.get_tile_from_idx(tile_id)\n"
                                     "        tensorC.store(ctx.reduce_axis(tensorA, tensorB, out_tile), out_tile)\n")],
                                   "its range (sched.iter_range()) holds"),
    "only the range's last piece": ([("    while end > start:  # the pieces of the range, the last one first",
                                      "    if end > start:  # only the last piece")], "never stored"),
    "stores C ignoring stride_cn": ([(_STORE_C, "            rm = out_tile.pid_m * BLOCK_M + tl.arange(0, BLOCK_M)\n"
                                                "            rn = out_tile.pid_n * BLOCK_N + tl.arange(0, BLOCK_N)\n"
                                                "            tl.store(C + rm[:, None] * stride_cm + rn[None, :], acc, "
                                                "mask=(rm[:, None] < M) & (rn[None, :] < N))")],
                                    "not part of C"),
    # the review: block sizes that differ between products (BLOCK_N != BLOCK_K in some) catch slips between them
    "slot rows BLOCK_K apart": ([("in_slot = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N",
                                  "in_slot = tl.arange(0, BLOCK_M)[:, None] * BLOCK_K")], "overwrite each other"),
    "slots BLOCK_M * BLOCK_K apart": ([(_STORE_P, _STORE_P.replace("BLOCK_N", "BLOCK_K")),
                                       (_ADD, _ADD.replace("BLOCK_N", "BLOCK_K"))], "not its own (slot 1)"),
    "slots of a hard-coded 512": ([(_STORE_P, "tl.store(P + pid * 512 + in_slot, acc)"),
                                   (_ADD, "acc += tl.load(P + q * 512 + in_slot)")], "spreads over"),
    # the review: waits that give up without a counter in their condition (the first wait sees its flag down for
    # over a thousand reads)
    "a for loop of 1000 tries": (_COURSE + [(_COURSE_WAIT, _TRIES_FOR)], "gave up"),
    "a wait that forces the flag up after 1000 tries": (_COURSE + [(_COURSE_WAIT, _TRIES_FORCED)], "gave up"),
}


def _kernel_variant(tmp_path, name, *edits):
    return variant(tmp_path, name, solutions.streamk_kernel, ("@triton.jit", _HEADER + "\n\n@triton.jit"), *edits)


def test_the_streamk_kernel_reference_passes_as_given_and_as_a_learners_cell(tmp_path):
    assert quiet(exercises.check_streamk_kernel, solutions.streamk_kernel).passed
    verdict = quiet(exercises.check_streamk_kernel, _kernel_variant(tmp_path, "streamk_mine"))
    assert verdict.passed, verdict.line


def test_every_wrong_streamk_kernel_gets_its_own_message(tmp_path):
    table = dict(KERNEL_WRONG)
    # computing K-iterations outside the range: the watch counts them; a GPU sees the tile's sum
    table["the K range from 0"] = (table["the K range from 0"][0],
                                   "instead of redoing" if runtime.INTERPRET else "counted twice")
    if runtime.INTERPRET:
        table.update(KERNEL_WRONG_WATCHED)
    table = {label: (_kernel_variant(tmp_path, f"streamk_{i}", *edits), words)
             for i, (label, (edits, words)) in enumerate(table.items())}
    table["no @triton.jit"] = (solutions.streamk_kernel.fn, "did you forget @triton.jit")
    table["None"] = (None, "got NoneType")
    assert_wrong_answers_named(exercises.check_streamk_kernel, table,
                               same_mistake=("the K range from 0", "the owner recomputes the tile",
                                             "waits with a relaxed atomic", "the course's wait loop, relaxed",
                                             "waits with tl.load", "waits with tl.load, lowers with a default atomic",
                                             "slots BLOCK_M * BLOCK_K apart", "slots of a hard-coded 512")
                               + _NO_WAIT)


KERNEL_RIGHT = {  # other correct designs
    "the course's protocol: the first sharer from the split, flags of 1": _COURSE,
    "a wait with Triton's default sem (acq_rel, which acquires)": [(_FIRST_WAIT, _WAIT.replace(', sem="acquire"', "")),
                                                                  (_SPIN, _SPIN.replace(', sem="acquire"', ""))],
    "the wait and the hand-over in helpers of one's own": [
        ("@triton.jit\ndef streamk_kernel", _HELPERS + "\n\n@triton.jit\ndef streamk_kernel"),
        (_PUBLISH, "            hand_over(P + pid * BLOCK_M * BLOCK_N, FLAGS + pid, acc, in_slot, k_begin + 1)"),
        (_FIRST_WAIT + "\n" + _LOOP, "flag = wait_for(FLAGS + q)\n")],
    "reduce_tile steps and an atomic_add wait": [(_REDUCE, "acc = ctx.init_accumulator()\n"
                                                           "        for kk in range(k_begin, k_end):\n"
                                                           "            acc = ctx.reduce_tile(tensorA, tensorB, "
                                                           "out_tile, kk, acc, boundary=True)"),
                                                 (_FIRST_WAIT, 'flag = tl.atomic_add(FLAGS + q, 0, sem="acquire")'),
                                                 (_SPIN, '                    flag = tl.atomic_add(FLAGS + q, 0, '
                                                         'sem="acquire")')],
    "a wait that lowers the flag as it reads it": [(_FIRST_WAIT, 'flag = tl.atomic_xchg(FLAGS + q, 0, sem="acquire")'),
                                                   (_SPIN, '                    flag = tl.atomic_xchg(FLAGS + q, 0, '
                                                           'sem="acquire")'),
                                                   (_CLEAR, "pass")],
    # the review: partials added upwards or downwards (any order fixed by the program ids), and a chained sum
    "the course's protocol, partials added downwards": _COURSE + [("                for q in range(first, pid):\n"
                                                                  "                    acc += tl.load",
                                                                  "                for q in range(pid - 1, first - 1, "
                                                                  "-1):\n                    acc += tl.load")],
    "a chained running sum: each piece adds the partial of pid - 1 only": [(_HAND_OVER, _CHAINED)],
}


@pytest.mark.parametrize("label", KERNEL_RIGHT)
def test_a_streamk_kernel_of_another_correct_design_passes(tmp_path, label):
    kernel = _kernel_variant(tmp_path, "streamk_right_" + str(list(KERNEL_RIGHT).index(label)), *KERNEL_RIGHT[label])
    verdict = quiet(exercises.check_streamk_kernel, kernel)
    assert verdict.passed, verdict.line


_STUB = '''
from course.stages import GemmContext, ScheduleContext, make_output_view, make_tensor_view


@triton.jit
def streamk_kernel(A, B, C, P, FLAGS, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PROGRAMS: tl.constexpr,
                   TILES: tl.constexpr):
    tensorA = make_tensor_view(A, M, K, stride_am, stride_ak)
    tensorB = make_tensor_view(B, K, N, stride_bk, stride_bn)
    tensorC = make_output_view(C, M, N, stride_cm, stride_cn)
    ctx = GemmContext(BLOCK_M, BLOCK_N, BLOCK_K, PROGRAMS, even_k=False)
    sched = ScheduleContext(M, N, K, ctx, streamk_tiles=TILES)  # every tile is shared
    ...  # your code
'''


def test_the_streamk_kernel_stub_is_not_attempted(tmp_path):
    import importlib.util

    path = tmp_path / "streamk_stub.py"  # a file: compiled Triton reads a kernel's source
    path.write_text("import triton\nimport triton.language as tl\n" + _STUB)
    spec = importlib.util.spec_from_file_location("streamk_stub", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    verdict = quiet(exercises.check_streamk_kernel, module.streamk_kernel)
    assert verdict.status == "not attempted", verdict.line


_IN_A_CELL = _HEADER + "\n\n"
KERNEL_HANGS = {  # label: (edits, words): answers that never finish under the interpreter, or reach far memory
    "waits for a higher program": ([("q -= 1  # the program", "q += 1  # the program")], "a higher program id"),
    "the flag is never raised": ([(_RAISE, "pass")], "never raised"),
    "waits while the flag is up": ([("while flag == 0:", "while flag != 0:")], "until it sees the flag up"),
    "the owner test one short": ([("if k_end < sched.iters_per_tile():", "if k_end < sched.iters_per_tile() - 1:")],
                                 "took itself for the owner"),
    "K-iterations counted without the ragged one": ([("if k_end < sched.iters_per_tile():",
                                                      "if k_end < K // BLOCK_K:")], "took itself for the owner"),
    "a flag lowered by its own program": ([(_PUBLISH, _PUBLISH + '\n            tl.atomic_xchg(FLAGS + pid, 0)')],
                                          "lowered already"),
    "the range never moves": ([(_STEP, "end -= 0")], "does your loop over the pieces end"),
    "walks down past program 0": ([(_NEXT, "k = 1")], "outside every tensor"),
    "a loop that only counts": ([(_STEP, "while end > start:\n            k_end += 0")], "gave up"),
    # the review: a tile's K-iterations counted with BLOCK_N (equal to BLOCK_K in every product, once)
    "K-iterations counted with BLOCK_N": ([("if k_end < sched.iters_per_tile():", "if k_end < tl.cdiv(K, BLOCK_N):")],
                                          "took itself for the owner"),
    # the review: a flag raised with where the piece starts, 0 for a tile's first piece (it was told "never raised")
    "a flag raised with k_begin": ([(_RAISE, 'tl.atomic_xchg(FLAGS + pid, k_begin, sem="release")')],
                                   "raised with the value 0"),
    # the third review: the owner waits on its own flag too (it was told its loop over the pieces never ends)
    "the owner waits for its own flag too": (_COURSE + [("                for q in range(first, pid):\n"
                                                         "                    while",
                                                         "                for q in range(first, pid + 1):\n"
                                                         "                    while")],
                                             "waits for its own flag (FLAGS + "),
}


@interpreter_only
@pytest.mark.parametrize("label", KERNEL_HANGS)
def test_a_streamk_kernel_that_would_hang_or_stray_ends_with_one_line(label):
    edits, words = KERNEL_HANGS[label]
    source = _IN_A_CELL + edited_source(solutions.streamk_kernel, *edits)
    assert_survives("check_streamk_kernel", source, "streamk_kernel", words, time_limit_s=10)


_REFUSED = '''
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from course import exercises


@triton.jit
def tile(x_ptr):
    acc = 0.0  # a scalar accumulator: its type changes in the loop
    for k in range(0, 4):
        acc += tl.load(x_ptr + tl.arange(0, 16))
    tl.store(x_ptr + tl.arange(0, 16), acc)


@triton.jit
def scalar_accumulator(x_ptr):
    tile(x_ptr)


@triton.jit
def one(pid):
    return pid


@triton.jit
def one_value_returned(x_ptr):
    a, b = one(tl.program_id(0))
    tl.store(x_ptr + a, b)


for kernel in (scalar_accumulator, one_value_returned):
    try:
        triton.compile(ASTSource(kernel, {"x_ptr": "*fp32"}, {}), target=GPUTarget("cuda", 90, 32))
    except Exception as err:
        print(exercises.core.user_error("your kernel", err))
        print("--")
'''


def test_compile_refusals_name_the_reason_and_the_line(tmp_path):
    # What a learner sees on a GPU, where Triton refuses the kernel at launch; built here for an H100
    # without one (the front end refuses before any GPU is needed). A helper's error is found inside.
    import os
    import subprocess
    import sys

    script = tmp_path / "refused.py"
    script.write_text(_REFUSED)
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "COURSE_DEVICE")}
    env["_COURSE_COMPILE_ONLY"] = "1"
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert proc.returncode == 0, proc.stderr[-2000:]
    scalar, one_value = proc.stdout.split("--")[:2]
    assert "your kernel was refused: Triton cannot compile it for a GPU" in scalar
    assert "Loop-carried variable acc" in scalar and "at: for k in range(0, 4):" in scalar
    assert "a float32 block of its tile's shape" in scalar
    assert "at: a, b = one(tl.program_id(0))" in one_value and "return both" in one_value


def test_on_a_gpu_the_source_alone_refuses_a_wait_that_gives_up_or_loads_the_flag_plainly(tmp_path):
    # What the check reads before launching on a GPU, where it cannot watch the programs (run here on the CPU).
    from course.exercises import nb09

    def source_verdicts(label):
        trees = nb09._learner_sources(_kernel_variant(tmp_path, "gpu_" + str(list(KERNEL_WRONG).index(label)),
                                                      *KERNEL_WRONG[label][0]))
        return nb09._endless_wait(trees) or nb09._bounded_wait(trees) or nb09._hand_over_in_source(trees)

    assert "gives up" in source_verdicts("a wait that gives up after 1000 tries")
    for label in ("waits with tl.load", "waits with tl.load, lowers with a default atomic"):
        assert "not an atomic that acquires" in source_verdicts(label), label
    for label, edits in KERNEL_RIGHT.items():  # and nothing right is refused
        trees = nb09._learner_sources(_kernel_variant(tmp_path, "gpu_right_" + str(list(KERNEL_RIGHT).index(label)),
                                                      *edits))
        assert not (nb09._endless_wait(trees) or nb09._bounded_wait(trees) or nb09._hand_over_in_source(trees)), label
