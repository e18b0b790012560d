"""The catalogue of notebook 05's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""

import functools
import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from course import exercises, runtime, solutions, tiled
from course.tiled import waves  # a global of that name: answers whose own variable is called waves still pass

from catalogue import assert_survives, assert_wrong_answers_named, edited_source, module_from_file, quiet, stub


# --- 05 · exercise 1: waves ---------------------------------------------------------------------------

def _waves(tiles=None, waves=None, idle=None):
    """A wave_count that gets one step wrong (the others as the reference does them)."""
    def wave_count(M, N, bm, bn, sms):
        t = tiles(M, N, bm, bn) if tiles else -(-M // bm) * -(-N // bn)
        w = waves(t, sms) if waves else -(-t // sms)
        return t, w, idle(t, sms) if idle else (sms - t % sms) % sms
    return wave_count


def calls_tiled_waves(M, N, block_m, block_n, sms):
    w = tiled.waves(M, N, block_m, block_n, sms)
    return w["tiles"], w["waves"], w["idle in the last wave"]


def calls_waves_by_name(M, N, block_m, block_n, sms):
    counted = waves(M, N, block_m, block_n, sms)
    return counted["tiles"], counted["waves"], counted["idle in the last wave"]


def calls_the_solution(M, N, block_m, block_n, sms):
    return solutions.wave_count(M, N, block_m, block_n, sms)


def swapped_tuple(M, N, block_m, block_n, sms):
    tiles = math.ceil(M / block_m) * math.ceil(N / block_n)
    waves = math.ceil(tiles / sms)
    return waves, tiles, waves * sms - tiles


def forgets_return(M, N, block_m, block_n, sms):
    tiles = math.ceil(M / block_m) * math.ceil(N / block_n)  # noqa: F841


def as_a_dict(M, N, block_m, block_n, sms):
    tiles = math.ceil(M / block_m) * math.ceil(N / block_n)
    return {"tiles": tiles, "waves": math.ceil(tiles / sms), "idle": (-tiles) % sms}


def float_counts(M, N, block_m, block_n, sms):  # right, but floats
    tiles = math.ceil(M / block_m) * math.ceil(N / block_n)
    waves = math.ceil(tiles / sms)
    return float(tiles), float(waves), float(waves * sms - tiles)


def one_element_tensors(M, N, block_m, block_n, sms):
    tiles = torch.tensor([-(-M // block_m)]) * -(-N // block_n)
    waves = (tiles + sms - 1) // sms
    return tiles, waves, waves * sms - tiles


def one_element_array(M, N, block_m, block_n, sms):
    tiles = -(-M // block_m) * -(-N // block_n)
    waves = np.ceil(np.array([tiles / sms])).astype(int)
    return tiles, waves, int(waves[0]) * sms - tiles


lambda_around_waves = lambda M, N, block_m, block_n, sms: tiled.waves(M, N, block_m, block_n, sms)  # noqa: E731


WAVES_WRONG = {
    "calls tiled.waves": (calls_tiled_waves, "calls the course's tiled.waves"),
    "calls waves imported by name": (calls_waves_by_name, "calls the course's tiled.waves"),
    "calls the solution": (calls_the_solution, "calls the solution"),
    "a swapped tuple": (swapped_tuple, "the right numbers in another order"),
    "tiles rounded down": (_waves(tiles=lambda M, N, bm, bn: (M // bm) * (N // bn)), "round up"),
    "tiles as a fraction": (_waves(tiles=lambda M, N, bm, bn: M * N / (bm * bn)), "whole numbers"),
    "waves rounded down": (_waves(waves=lambda t, sms: t // sms), "takes a whole wave's time"),
    "idle when full": (_waves(idle=lambda t, sms: sms - t % sms), "no SM is idle"),
    "busy instead of idle": (_waves(idle=lambda t, sms: t % sms), "the SMs busy in the last wave"),
    "two numbers": (lambda M, N, bm, bn, sms: (1, 2), "return three numbers"),
    "the area rounded up": (_waves(tiles=lambda M, N, bm, bn: -(-(M * N) // (bm * bn))), "whole area is not enough"),
    "one wave too many": (_waves(waves=lambda t, sms: t // sms + 1), "no extra wave"),
    "block_m for both": (_waves(tiles=lambda M, N, bm, bn: -(-M // bm) * -(-N // bm)), "along N (with block_n)"),
    "the waves' idle fraction": (_waves(idle=lambda t, sms: 1 - t / (-(-t // sms) * sms)), "the rest of the SMs"),
    "no return": (forgets_return, "returned None"),
    "a dict": (as_a_dict, "return three numbers"),
    "a string": (lambda M, N, bm, bn, sms: "4, 1, 0", "return three numbers"),
    "wrong signature": (lambda M, N, block, sms: (0, 0, 0), "must take 5 arguments"),
    "raises": (_waves(tiles=lambda M, N, bm, bn: math.ceil(M / bm) * math.ceil(N / bn) + [][0]), "IndexError"),
    "M for both dimensions": (_waves(tiles=lambda M, N, bm, bn: -(-M // bm) * -(-M // bn)),
                              "M is used for both dimensions"),
    "N for both dimensions": (_waves(tiles=lambda M, N, bm, bn: -(-N // bm) * -(-N // bn)),
                              "N is used for both dimensions"),
    "x // block + 1": (_waves(tiles=lambda M, N, bm, bn: (M // bm + 1) * (N // bn + 1)),
                       "counts one tile too many"),
    "(x - 1) // block": (_waves(tiles=lambda M, N, bm, bn: ((M - 1) // bm) * ((N - 1) // bn)),
                         "one tile short"),
    "132 SMs whatever sms says": (_waves(waves=lambda t, sms: -(-t // 132), idle=lambda t, sms: (-t) % 132),
                                  "that is the count for 132 SMs"),
    # the second review
    "is tiled.waves": (tiled.waves, "wave_count is the course's own tiled.waves"),
    "a partial of tiled.waves": (functools.partial(tiled.waves), "wave_count is the course's own tiled.waves"),
    "a lambda around tiled.waves": (lambda_around_waves, "calls the course's tiled.waves"),
    "right, but floats": (float_counts, "is a float; tiles, waves and idle SMs are counts"),
    # the third review: a tensor of one element is a list of one count, not a count (0-d tensors pass)
    "one-element tensors": (one_element_tensors, "tiles is a Tensor of shape (1,), not a number"),
    "a one-element numpy array": (one_element_array, "waves is a ndarray of shape (1,), not a number"),
}


def test_wave_count_reference_passes_and_the_stub_is_not_attempted():
    assert quiet(exercises.check_wave_count, solutions.wave_count).passed
    assert quiet(exercises.check_wave_count, stub).status == "not attempted"


def test_wave_count_each_wrong_answer_gets_its_own_message():
    assert_wrong_answers_named(exercises.check_wave_count, WAVES_WRONG,
                               same_mistake=("calls tiled.waves", "calls waves imported by name",
                                             "a lambda around tiled.waves", "is tiled.waves",
                                             "a partial of tiled.waves"))


def with_math_ceil(M, N, block_m, block_n, sms):  # its variable waves is not the global tiled.waves
    tiles = math.ceil(M / block_m) * math.ceil(N / block_n)
    waves = math.ceil(tiles / sms)
    return tiles, waves, waves * sms - tiles


def with_numpy(M, N, block_m, block_n, sms):
    tiles = int(np.ceil(M / block_m) * np.ceil(N / block_n))
    return [tiles, -(-tiles // sms), (-tiles) % sms]


def test_wave_count_misdiagnoses_of_the_review_are_gone():
    for label in ("M for both dimensions", "(x - 1) // block", "x // block + 1", "132 SMs whatever sms says"):
        message = quiet(exercises.check_wave_count, WAVES_WRONG[label][0]).message
        assert "round up" not in message and "with block_m) and along N" not in message, (label, message)


def with_tensors(M, N, block_m, block_n, sms):  # 0-d integer tensors: whole numbers in another form
    tiles = torch.tensor(-(-M // block_m)) * torch.tensor(-(-N // block_n))
    waves = (tiles + sms - 1) // sms
    return tiles, waves, waves * sms - tiles


def test_wave_count_correct_alternatives_pass():
    for answer in (with_math_ceil, with_numpy, with_tensors):
        assert quiet(exercises.check_wave_count, answer).passed, answer.__name__


# --- 05 · exercise 2: the configurations worth timing --------------------------------------------------

def _pruner(*, element=lambda a, c: a.element_size(), shared=None, fits=lambda need, limit: need <= limit,
            tiles=None, fill=None, fills=lambda value, least: value >= least,
            fallback=lambda given, fit, full: full or fit):
    """A prune_configs that gets one step wrong (the others as the reference does them)."""
    def prune_configs(configs, named_args, shared_limit, sms, min_fill, **kwargs):
        size = element(named_args["a_ptr"], named_args["c_ptr"])
        M, N = named_args["M"], named_args["N"]
        fit, full = [], []
        for config in configs:
            bm, bn, bk = (config.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
            need = (shared(config, size) if shared else config.num_stages * (bm * bk + bk * bn) * size)
            t = tiles(M, N, bm, bn) if tiles else -(-M // bm) * -(-N // bn)
            f = fill(t, sms) if fill else t / (-(-t // sms) * sms)
            if fits(need, shared_limit):
                fit.append(config)
                if fills(f, min_fill):
                    full.append(config)
        return fallback(list(configs), fit, full)
    return prune_configs


def _blocks(config):
    return tuple(config.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))


def removes_from_the_list(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    for config in list(configs):
        bm, bn, bk = _blocks(config)
        if config.num_stages * (bm * bk + bk * bn) * named_args["a_ptr"].element_size() > shared_limit:
            configs.remove(config)
    return configs


def a_generator(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return (c for c in configs if c.num_stages * sum(_blocks(c)) <= shared_limit)


def the_kwargs(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return [c.kwargs for c in configs]


def one_stage_less(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return [triton.Config(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages - 1) for c in configs]


def twice(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return list(configs) + list(configs[:1])


def stages_from_kwargs(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return [c for c in configs if c.kwargs["num_stages"] * c.kwargs["BLOCK_K"] < shared_limit]


def blocks_as_attributes(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return [c for c in configs if c.BLOCK_M * c.BLOCK_K < shared_limit]


def lower_case_names(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK_M"] <= named_args["m"]]


def other_names(configs, named_args, limit, sm_count, fill, **kwargs):
    return list(configs)


def no_kwargs(configs, named_args, shared_limit, sms, min_fill):
    return list(configs)


def shared_bytes_of_two_bytes(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    """tiled.shared_bytes without element_bytes: 2 bytes whatever the dtype."""
    fit = [c for c in configs if tiled.shared_bytes(*_blocks(c), c.num_stages) <= shared_limit]
    full = [c for c in fit if tiled.waves(named_args["M"], named_args["N"], *_blocks(c)[:2], sms)["efficiency"]
            >= min_fill]
    return full or fit


def fill_only_with_tiled_waves(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return [c for c in configs if tiled.waves(named_args["M"], named_args["N"], *_blocks(c)[:2], sms)["efficiency"]
            >= min_fill]


def _pruned(configs, named_args, bound, count, least):
    size = named_args["a_ptr"].element_size()
    fit = [c for c in configs if c.num_stages * (lambda bm, bn, bk: bm * bk + bk * bn)(*_blocks(c)) * size <= bound]
    tiles = lambda c: -(-named_args["M"] // _blocks(c)[0]) * -(-named_args["N"] // _blocks(c)[1])  # noqa: E731
    full = [c for c in fit if tiles(c) / (-(-tiles(c) // count) * count) >= least]
    return full or fit


# Right for an H100 only: its numbers written in, not read from the arguments.
def h100_numbers(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return _pruned(configs, named_args, 227 * 1024, 132, 0.8)


def h100_shared_limit(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return _pruned(configs, named_args, 227 * 1024, sms, min_fill)


def h100_sms(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return _pruned(configs, named_args, shared_limit, 132, min_fill)


def fill_of_0_8(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return _pruned(configs, named_args, shared_limit, sms, 0.8)


def calls_the_prune_solution(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    return solutions.prune_configs(configs, named_args, shared_limit, sms, min_fill)


def unpacks_tiled_waves(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    size = named_args["a_ptr"].element_size()
    fit = [c for c in configs if tiled.shared_bytes(*_blocks(c), c.num_stages, element_bytes=size) <= shared_limit]
    full = []
    for c in fit:
        tiles, waves, _ = tiled.waves(named_args["M"], named_args["N"], *_blocks(c)[:2], sms)
        if tiles / (waves * sms) >= min_fill:
            full.append(c)
    return full or fit


def unpacks_its_own_wave_count(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    def wave_count(M, N, block_m, block_n, sms):
        tiles = -(-M // block_m) * -(-N // block_n)
        return tiles, -(-tiles // sms), (-tiles) % sms

    size = named_args["a_ptr"].element_size()
    fit = [c for c in configs if tiled.shared_bytes(*_blocks(c), c.num_stages, element_bytes=size) <= shared_limit]
    full = []
    for c in fit:
        tiles, waves = wave_count(named_args["M"], named_args["N"], *_blocks(c)[:2], sms)
        if tiles / (waves * sms) >= min_fill:
            full.append(c)
    return full or fit


PRUNE_WRONG = {  # label: (prune_configs, words its message must contain)
    "shared memory ignored": (_pruner(fits=lambda need, limit: True), "whatever shared memory they need"),
    "one stage only": (_pruner(shared=lambda c, size: (lambda bm, bn, bk: (bm * bk + bk * bn) * size)(*_blocks(c))),
                       "counts one stage only"),
    "num_warps for stages": (_pruner(shared=lambda c, size: (lambda bm, bn, bk: c.num_warps * (bm * bk + bk * bn)
                                                              * size)(*_blocks(c))), "counts num_warps copies"),
    "elements, not bytes": (_pruner(element=lambda a, c: 1), "counts elements, not bytes"),
    "C's element size": (_pruner(element=lambda a, c: c.element_size()), "the element size is C's"),
    "two bytes always": (_pruner(element=lambda a, c: 2), "every dtype counts as 2 bytes"),
    "a BLOCK_M x BLOCK_N tile": (_pruner(shared=lambda c, size: c.num_stages * _blocks(c)[0] * _blocks(c)[1] * size),
                                 "counts a BLOCK_M x BLOCK_N tile"),
    "strictly below the limit": (_pruner(fits=lambda need, limit: need < limit), "exactly shared_limit fits"),
    "the waves ignored": (_pruner(fills=lambda value, least: True), "less than min_fill full"),
    "tiles over SMs": (_pruner(fill=lambda t, sms: t / sms), "without counting waves"),
    "the last wave's fill": (_pruner(fill=lambda t, sms: (t - (-(-t // sms) - 1) * sms) / sms),
                             "that of the last wave alone"),
    "tiles rounded down": (_pruner(tiles=lambda M, N, bm, bn: (M // bm) * (N // bn)), "the tiles are rounded down"),
    "tiles from the area": (_pruner(tiles=lambda M, N, bm, bn: -(-(M * N) // (bm * bn))), "from the whole area"),
    "M and N swapped": (_pruner(tiles=lambda M, N, bm, bn: -(-N // bm) * -(-M // bn)), "M and N swapped"),
    "strictly above min_fill": (_pruner(fills=lambda value, least: value > least), "equal to min_fill is enough"),
    "only the fullest as the fallback": (_pruner(fallback=lambda given, fit, full: full or fit[:1]),
                                         "keep every one that fits"),
    "no fallback": (_pruner(fallback=lambda given, fit, full: full), "returned no configuration"),
    "every configuration as the fallback": (_pruner(fallback=lambda given, fit, full: full or given),
                                            "also those that do not fit"),
    "waves rounded down": (_pruner(fill=lambda t, sms: t / (t // sms * sms)), "divided by zero"),
    "removes from autotune's list": (removes_from_the_list, "changed the list of configurations"),
    "a generator": (a_generator, "a generator"),
    "the kwargs": (the_kwargs, "holding a dict"),
    "a changed configuration": (one_stage_less, "not among those given"),
    "one configuration twice": (twice, "one configuration twice"),
    "num_stages from kwargs": (stages_from_kwargs, "attributes of a Config"),
    "block sizes as attributes": (blocks_as_attributes, "config.kwargs['BLOCK_M']"),
    "lower-case names": (lower_case_names, "named_args holds the kernel's arguments by name"),
    "other parameter names": (other_names, "by these names"),
    "no **kwargs": (no_kwargs, "end the signature with **kwargs"),
    "tiled.shared_bytes without element_bytes": (shared_bytes_of_two_bytes, "pass it element_bytes"),
    "the fill alone, with tiled.waves": (fill_only_with_tiled_waves, "whatever shared memory they need"),
    "calls the solution": (calls_the_prune_solution, "calls the solution's prune_configs"),
    "an H100's three numbers": (h100_numbers, "instead of the arguments shared_limit, sms and min_fill"),
    "an H100's shared memory": (h100_shared_limit, "227 KB of shared memory instead of the argument shared_limit"),
    "an H100's SMs": (h100_sms, "132 SMs instead of the argument sms"),
    "min_fill written in": (fill_of_0_8, "min_fill = 0.8 instead of the argument min_fill"),
    "a tile of C in every stage": (_pruner(shared=lambda c, size: (lambda bm, bn, bk: c.num_stages * (bm * bk + bk * bn
                                                                                              + bm * bn) * size)(
        *_blocks(c))), "adds a BLOCK_M x BLOCK_N tile of C to every stage"),
    "a tile of C once": (_pruner(shared=lambda c, size: (lambda bm, bn, bk: (c.num_stages * (bm * bk + bk * bn)
                                                                             + bm * bn) * size)(*_blocks(c))),
                         "the shared memory adds a BLOCK_M x BLOCK_N tile of C: only"),
    "wrong signature": (lambda configs, named_args: configs, "must take 5 arguments"),
    # the second review
    "the fill rounded to one decimal": (_pruner(fill=lambda t, sms: round(t / (-(-t // sms) * sms), 1)),
                                        "the fill is rounded before it is compared with min_fill"),
    "the fill rounded to two decimals": (_pruner(fill=lambda t, sms: round(t / (-(-t // sms) * sms), 2)),
                                         "the fill is rounded before it is compared with min_fill"),
    "tiled.waves unpacked as a tuple": (unpacks_tiled_waves, "tiled.waves returns a dict"),
    "its own wave_count unpacked into two names": (unpacks_its_own_wave_count,
                                                   "the values unpacked from wave_count(...) are not as many"),
    "is tiled.waves": (tiled.waves, "prune_configs is the course's own tiled.waves"),
}


def test_prune_configs_reference_passes_and_the_stub_is_not_attempted():
    assert quiet(exercises.check_prune_configs, solutions.prune_configs).passed
    assert quiet(exercises.check_prune_configs, stub).status == "not attempted"


# Edits of the reference (the learner reviews' answers and their cousins): (edits, words its message must contain)
_ELEMENT = 'element = named_args["a_ptr"].element_size()'
PRUNE_EDITED = {
    # the third review: int8 counted as 2 bytes was told "the element size is C's"
    "element = 2": ([(_ELEMENT, "element = 2")], "every dtype counts as 2 bytes: the bytes per element come from "
                                                  "A's dtype"),
    "int8 counted as 2 bytes": ([(_ELEMENT, _ELEMENT + ' if named_args["a_ptr"].dtype != torch.int8 else 2')],
                                "it counts an int8 element as 2 bytes: the bytes per element come from A's dtype"),
    "8-bit dtypes counted as 2 bytes": ([(_ELEMENT, f"element = max({_ELEMENT[10:]}, 2)")],
                                        "an 8-bit element (int8, float8) as 2 bytes: the bytes per element come "
                                        "from A's dtype"),
    "float32 counted as 2 bytes": ([(_ELEMENT, f"element = min({_ELEMENT[10:]}, 2)")],
                                   "a float32 element as 2 bytes: the bytes per element come from A's dtype"),
    "element = 4": ([(_ELEMENT, "element = 4")], "every dtype counts as 4 bytes"),
    # the third review: B's block counted BLOCK_K x BLOCK_K was told "counts elements, not bytes"
    "B's block as bk * bk": ([("bk * bn", "bk * bk")], "B's block is counted as BLOCK_K x BLOCK_K: B's block is "
                                                       "BLOCK_K x BLOCK_N"),
    "B's block as bn * bn": ([("bk * bn", "bn * bn")], "B's block is counted as BLOCK_N x BLOCK_N: B's block is "
                                                       "BLOCK_K x BLOCK_N"),
    "B's block as bk * bm": ([("bk * bn", "bk * bm")], "B's block is counted as BLOCK_M x BLOCK_K: B's block is "
                                                       "BLOCK_K x BLOCK_N"),
    "A's block as bm * bm": ([("bm * bk", "bm * bm")], "A's block is counted as BLOCK_M x BLOCK_M: A's block is "
                                                       "BLOCK_M x BLOCK_K"),
    "A's block as bm * bn": ([("bm * bk", "bm * bn")], "A's block is counted as BLOCK_M x BLOCK_N: A's block is "
                                                       "BLOCK_M x BLOCK_K"),
    "both blocks as bk * bk": ([("bm * bk + bk * bn", "bk * bk + bk * bk")],
                               "a stage's blocks are counted as BLOCK_K x BLOCK_K and BLOCK_K x BLOCK_K"),
}


def _edited_prune(tmp_path, label, edits):
    """The reference prune_configs with ``edits`` made, in a module of its own (so that its source can be read)."""
    source = "import torch\nimport triton\n\n\n" + edited_source(solutions.prune_configs, *edits)
    return module_from_file(tmp_path / f"prune_{abs(hash(label))}.py", source).prune_configs


def test_prune_configs_each_wrong_answer_gets_its_own_message(tmp_path):
    edited = {label: (_edited_prune(tmp_path, label, edits), words) for label, (edits, words) in PRUNE_EDITED.items()}
    assert_wrong_answers_named(exercises.check_prune_configs, {**PRUNE_WRONG, **edited},
                               same_mistake=("shared memory ignored", "the fill alone, with tiled.waves",
                                             "the fill rounded to one decimal", "the fill rounded to two decimals",
                                             "element = 2"))  # "two bytes always", written as an edit


def test_no_unpacking_error_blames_the_learner_s_own_return():
    for label in ("tiled.waves unpacked as a tuple", "its own wave_count unpacked into two names"):
        message = quiet(exercises.check_prune_configs, PRUNE_WRONG[label][0]).message
        assert "return exactly two" not in message, (label, message)


def test_answers_that_are_the_reference_are_refused(monkeypatch):
    """In a notebook (REFUSE_REFERENCE on, as there), the reference solution itself is no answer."""
    monkeypatch.setattr(exercises.core, "REFUSE_REFERENCE", True)
    for check, answer in ((exercises.check_prune_configs, solutions.prune_configs),
                          (exercises.check_wave_count, solutions.wave_count)):
        verdict = quiet(check, answer)
        assert verdict.status == "failed" and "reference solution (course.solutions" in verdict.message, verdict.line
    verdict = quiet(exercises.check_prune_configs, calls_the_prune_solution)
    assert verdict.status == "failed" and "solution" in verdict.message, verdict.line


def test_prune_configs_misdiagnoses_of_the_review_are_gone():
    """Written-in H100 numbers are not blamed on the tile counted, nor a tile of C on num_warps."""
    for label in ("an H100's three numbers", "an H100's shared memory", "an H100's SMs", "min_fill written in"):
        message = quiet(exercises.check_prune_configs, PRUNE_WRONG[label][0]).message
        assert "BLOCK_M x BLOCK_N tile" not in message and "H100's" in message, (label, message)
    assert "num_warps" not in quiet(exercises.check_prune_configs, PRUNE_WRONG["a tile of C in every stage"][0]).message


def test_prune_configs_misdiagnoses_of_the_third_review_are_gone(tmp_path):
    """int8 counted as 2 bytes is not blamed on C's element size, nor B's block counted BLOCK_K x BLOCK_K on
    counting elements."""
    for label, wrong in (("element = 2", "C's"), ("int8 counted as 2 bytes", "C's"),
                         ("B's block as bk * bk", "counts elements, not bytes")):
        message = quiet(exercises.check_prune_configs, _edited_prune(tmp_path, label, PRUNE_EDITED[label][0])).message
        assert wrong not in message, (label, message)


def test_every_call_of_the_prune_check_has_a_configuration_that_fits():
    """The exercise promises it (where none fits, autotune has nothing to launch: the list is what to change),
    so what an answer returns when none fits is never checked."""
    from course.exercises import nb05

    launches = nb05._launches()
    assert len(launches) > 20
    for launch in launches:
        assert any(launch.shared(i) <= launch.limit for i in range(len(launch.blocks))), str(launch)
        assert any(launch.keep()), str(launch)


def with_own_wave_count(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    def wave_count(M, N, block_m, block_n, sms):
        tiles = math.ceil(M / block_m) * math.ceil(N / block_n)
        waves = math.ceil(tiles / sms)
        return tiles, waves, waves * sms - tiles

    size = named_args["b_ptr"].dtype.itemsize
    fit = [c for c in configs
           if c.num_stages * c.kwargs["BLOCK_K"] * (c.kwargs["BLOCK_M"] + c.kwargs["BLOCK_N"]) * size <= shared_limit]
    full = []
    for c in fit:
        tiles, waves, _ = wave_count(named_args["M"], named_args["N"], c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], sms)
        if tiles >= min_fill * waves * sms:
            full.append(c)
    return tuple(full) if full else tuple(fit)


def largest_first(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    kept = _pruner()(configs, named_args, shared_limit, sms, min_fill)
    return sorted(kept, key=lambda c: -c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])


def with_the_course_helpers(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    """tiled.shared_bytes and tiled.waves, as the notebook uses them: the counting, not the pruning."""
    size = named_args["a_ptr"].element_size()
    fit = [c for c in configs if tiled.shared_bytes(*_blocks(c), c.num_stages, element_bytes=size) <= shared_limit]
    full = [c for c in fit
            if tiled.waves(named_args["M"], named_args["N"], *_blocks(c)[:2], sms)["efficiency"] >= min_fill]
    return full or fit


def the_same_list_when_all_are_kept(configs, named_args, shared_limit, sms, min_fill, **kwargs):
    kept = _pruner()(configs, named_args, shared_limit, sms, min_fill)
    return configs if len(kept) == len(configs) else kept


ALTERNATIVES = {
    "tiled.shared_bytes with element_bytes, and tiled.waves": with_the_course_helpers,
    "the list given, unchanged, when every configuration is kept": the_same_list_when_all_are_kept,
    "own wave_count, B's size, a product instead of a quotient, a tuple": with_own_wave_count,
    "largest tiles first": largest_first,
    "tiles / waves / sms": _pruner(fill=lambda t, sms: t / -(-t // sms) / sms),
    "math.ceil": _pruner(tiles=lambda M, N, bm, bn: math.ceil(M / bm) * math.ceil(N / bn)),
    "the dtype's itemsize": _pruner(element=lambda a, c: a.dtype.itemsize),
    "torch.finfo / iinfo bits": _pruner(element=lambda a, c: (torch.finfo(a.dtype).bits if a.dtype.is_floating_point
                                                              else torch.iinfo(a.dtype).bits) // 8),
}


def test_prune_configs_correct_alternatives_pass():
    for label, answer in ALTERNATIVES.items():
        assert quiet(exercises.check_prune_configs, answer).passed, label


@triton.jit
def _probe(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pass  # the grouped kernel's signature; nothing to run


def test_prune_configs_works_in_a_real_autotune_launch():
    """The reference, given to triton.autotune through functools.partial, is called with the launch's keyword
    arguments and prunes as the notebook says (3072^3 on an H100: the 128 x 256 tiles leave the third wave
    nearly empty)."""
    timed = []

    def prune(configs, named_args, **kwargs):
        kept = solutions.prune_configs(configs, named_args, **kwargs)
        timed.extend(_blocks(c) for c in kept)
        return kept

    tuned = triton.autotune(configs=tiled.TUNING_CONFIGS, key=["M", "N", "K"],
                            do_bench=lambda call, quantiles: [1.0] * 3,  # no timing: only the pruning matters
                            prune_configs_by={"early_config_prune": functools.partial(
                                prune, shared_limit=227 * 1024, sms=132, min_fill=0.8)})(_probe)
    a = torch.empty(16, 16, dtype=torch.float16, device=runtime.DEVICE)
    tuned[(1,)](a, a, a, 3072, 3072, 3072, 16, 1, 16, 1, 16, 1)
    assert timed and (128, 256, 64) not in timed and (256, 128, 64) not in timed and (128, 128, 64) in timed


@pytest.mark.skipif(not runtime.INTERPRET, reason="the checks' time limit works under the interpreter only")
def test_prune_configs_with_an_endless_loop_ends_with_one_line():
    source = ("def prune_configs(configs, named_args, shared_limit, sms, min_fill, **kwargs):\n"
              "    kept = list(configs)\n    while kept:\n        kept.append(kept[0])\n        kept.pop()\n"
              "    return kept\n")
    assert_survives("check_prune_configs", source, "prune_configs", "gave up after", time_limit_s=3)
