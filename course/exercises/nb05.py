"""Notebook 05: tuning: the waves a shape takes, and which configurations are worth timing."""

from __future__ import annotations

import dataclasses
import numbers
import random

import torch

from course.exercises.core import Failed, exercise, plural, require_function, user_error
from course.exercises.nb02 import whole_number
from course.exercises.nb04 import course_helper, forbidden_call, uses

__all__ = ['check_wave_count', 'check_prune_configs']


# --- 05 · exercise 1: tiles and waves -----------------------------------------------------------------

# The last two fill their last wave exactly: 12 x 11 and 27 x 4 tiles.
_WAVE_CASES = [(4096, 4096, 128, 128, 132), (3072, 3072, 128, 128, 132), (1000, 1000, 128, 128, 132),
               (4096, 4096, 128, 256, 132), (300, 5000, 64, 128, 108), (1536, 1408, 128, 128, 132),
               (3456, 512, 128, 128, 108)]


def _waves(M, N, bm, bn, sms) -> tuple[int, int, int]:
    tiles = -(-M // bm) * -(-N // bn)
    count = -(-tiles // sms)
    return tiles, count, count * sms - tiles


# Ways to count the tiles along one dimension, right and wrong: (x, block) -> count.
_ALONG = {"rounded up": lambda x, b: -(-x // b), "rounded down": lambda x, b: x // b,
          "plus one": lambda x, b: x // b + 1, "minus one": lambda x, b: (x - 1) // b}


def _tiles_hint(tiles, M, N, bm, bn) -> str | None:
    """What a wrong count of tiles most likely got wrong, from the usual ways to get it wrong; None if none."""
    up = _ALONG["rounded up"]
    if M != N and tiles == up(M, bm) * up(M, bn):
        return "M is used for both dimensions: the tiles along N come from N (with block_n)"
    if M != N and tiles == up(N, bm) * up(N, bn):
        return "N is used for both dimensions: the tiles along M come from M (with block_m)"
    ways = [(a, b) for a in _ALONG for b in _ALONG
            if (a, b) != ("rounded up", "rounded up") and _ALONG[a](M, bm) * _ALONG[b](N, bn) == tiles]
    used = {way for pair in ways for way in pair}
    if any(set(pair) <= {"rounded up", "rounded down"} for pair in ways):
        return None  # rounded down: the edge hints below say it
    if ways and "plus one" in used:
        return ("x // block + 1 rounds up only where block does not divide x; where it does (here "
                f"{'M = ' + str(M) if M % bm == 0 else 'N = ' + str(N)}), it counts one tile too many")
    if ways and "minus one" in used:
        return ("(x − 1) // block is one tile short: it is the index of the last tile along that dimension, not the "
                "number of tiles")
    return None


@exercise("wave_count", "Fill in the body of wave_count above: return (tiles, waves, idle SMs in the last wave)")
def check_wave_count(wave_count) -> str:
    """Check ``wave_count(M, N, block_m, block_n, sms) -> (tiles, waves, idle)``: the tiles of an
    ``M x N`` output, the waves they take on ``sms`` SMs (one tile per SM at a time), and the SMs
    left idle in the last wave (0 when it is full)."""
    from course import solutions, tiled

    require_function("wave_count", wave_count, ("M", "N", "block_m", "block_n", "sms"))
    own = course_helper(wave_count)
    if own:
        raise Failed(f"wave_count is the course's own {own}: write a function of your own that counts the tiles "
                     "and waves")
    helper = forbidden_call(wave_count, [(tiled.waves, "the course's tiled.waves"),
                                         (solutions.wave_count, "the solution")])
    if helper:
        raise Failed(f"wave_count calls {helper}, which counts for you: count the tiles and waves yourself")
    right_but_floats = None
    for M, N, bm, bn, sms in _WAVE_CASES:
        call = f"wave_count({M}, {N}, {bm}, {bn}, {sms})"
        try:
            got = wave_count(M, N, bm, bn, sms)
        except Exception as err:
            raise user_error(call, err) from None
        if not (isinstance(got, (tuple, list)) and len(got) == 3):
            raise Failed(f"{call} returned {got!r}: return three numbers, (tiles, waves, idle)")
        returned = got
        shaped = next(((name, v) for name, v in zip(("tiles", "waves", "idle"), got) if getattr(v, "ndim", 0)), None)
        if shaped:  # a tensor or array of one element or more: a list of counts, not a count (0-d ones are fine)
            name, value = shaped
            raise Failed(f"{call} returned {returned!r}: {name} is a {type(value).__name__} of shape "
                         f"{tuple(value.shape)}, not a number: return three numbers (ints; .item() turns a one-element "
                         "tensor into one)")
        got = tuple(whole_number(v) for v in got)  # ints in any integer form (a 0-d tensor, numpy's) are ints
        if any(v is None for v in got):
            raise Failed(f"{call} returned {returned!r}: return three numbers, (tiles, waves, idle)")
        tiles, count, idle = got
        want = _waves(M, N, bm, bn, sms)
        if tuple(got) != want and sorted(got) == sorted(want) and len(set(want)) == 3:
            raise Failed(f"{call} returned the right numbers in another order: return (tiles, waves, idle)")
        if tiles != want[0]:
            named = isinstance(tiles, numbers.Integral) and _tiles_hint(tiles, M, N, bm, bn)
            if named:
                raise Failed(f"{call} gives {tiles} tiles: {named}")
            edge = M % bm or N % bn
            area = -(-(M * N) // (bm * bn))
            hint = ("rounding up the whole area is not enough: a tile is whole or not at all in each "
                    "dimension, so count the tiles along M and along N, each rounded up, then multiply"
                    if edge and tiles == area else
                    "a tile is whole or not at all: the tiles that hang over the edge count too, so round "
                    "up, per dimension" if edge and tiles < want[0] else
                    "count the tiles along M (with block_m) and along N (with block_n), then multiply")
            if isinstance(tiles, float) and not float(tiles).is_integer():
                hint = "tiles come in whole numbers: divide with rounding up, per dimension"
            raise Failed(f"{call} gives {tiles} tiles: {hint}")
        other_sms = _fixed_sms(want[0], count, idle, sms)
        if other_sms and (count, idle) != want[1:]:
            raise Failed(f"{call} gives {count} waves and {plural(idle, 'idle SM')}: that is the count for {other_sms} SMs, "
                         f"whatever sms says (here {sms}): use the argument sms, the check tries GPUs with other SM "
                         "counts")
        if count != want[1]:
            if count < want[1]:
                hint = "the last, partial wave still takes a whole wave's time: round up"
            elif want[0] % sms == 0 and count == want[1] + 1:
                hint = "when the tiles fill the waves exactly there is no extra wave: round up, don't add one"
            else:
                hint = "a wave is `sms` tiles at once: divide the tiles by the SMs, rounding up"
            raise Failed(f"{call} gives {count} waves: {hint}")
        if idle != want[2]:
            if want[2] == 0:
                hint = "when the tiles fill the last wave exactly, no SM is idle"
            elif idle == want[0] - (want[1] - 1) * sms:
                hint = "that is the SMs busy in the last wave; idle ones are the rest of the SMs"
            else:
                hint = ("the last wave holds the tiles left after the full waves; the rest of the SMs in it "
                        "wait")
            raise Failed(f"{call} gives {plural(idle, 'idle SM')}: {hint}")
        floats = [v for v in got if isinstance(v, float)]
        if floats and right_but_floats is None:  # said once every shape is right: a wrong count says more
            right_but_floats = (f"{call} returned {returned!r}: the numbers are right, but {floats[0]!r} is a float; "
                                "tiles, waves and idle SMs are counts, so return ints (// and math.ceil give ints, / a "
                                "float)")
    if right_but_floats:
        raise Failed(right_but_floats)
    return f"right on {len(_WAVE_CASES)} shapes"


def _fixed_sms(tiles: int, count, idle, sms: int) -> int | None:
    """The number of SMs other than ``sms`` (an H100's 132, or an A100's 108) that the learner's waves and
    idle SMs are right for, if any."""
    for other in (132, 108):
        waves = -(-tiles // other)
        if other != sms and count == waves and idle == waves * other - tiles:
            return other
    return None


# --- 05 · exercise 2: which configurations are worth timing -------------------------------------------

# Shared memory one program may take (bytes) and SMs, per GPU.
_GPUS = {"H100": (227 * 1024, 132), "A100": (163 * 1024, 108), "RTX 4090": (99 * 1024, 128),
         "V100": (96 * 1024, 80), "T4": (64 * 1024, 40), "MI300X": (64 * 1024, 304)}

_DTYPES = {torch.float16: "float16", torch.float32: "float32", torch.int8: "int8", torch.int32: "int32",
           torch.float8_e4m3fn: "float8"}


def _config(bm, bn, bk, warps, stages):
    import triton

    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=warps,
                         num_stages=stages)


@dataclasses.dataclass
class _Launch:
    """One call of the pruning function, as autotune makes it: a GPU, a product, the configurations."""

    gpu: str
    M: int
    N: int
    K: int
    dtype: torch.dtype  # A's and B's
    out: torch.dtype  # C's
    min_fill: float
    blocks: list  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) of each configuration

    @property
    def limit(self) -> int:
        return _GPUS[self.gpu][0]

    @property
    def sms(self) -> int:
        return _GPUS[self.gpu][1]

    def configs(self) -> list:
        return [_config(*b) for b in self.blocks]

    def named_args(self) -> dict:
        """The kernel's arguments by name (``tiled.matmul_kernel``'s), as autotune passes them: tensors
        on the meta device (a shape and a dtype, no memory); B stored K-major, as 8-bit tensor cores want."""
        a = torch.empty((self.M, self.K), dtype=self.dtype, device="meta")
        b = torch.empty((self.N, self.K), dtype=self.dtype, device="meta").T
        c = torch.empty((self.M, self.N), dtype=self.out, device="meta")
        return dict(a_ptr=a, b_ptr=b, c_ptr=c, M=self.M, N=self.N, K=self.K, stride_am=a.stride(0),
                    stride_ak=a.stride(1), stride_bk=b.stride(0), stride_bn=b.stride(1), stride_cm=c.stride(0),
                    stride_cn=c.stride(1))

    def __str__(self) -> str:
        out = "" if self.out == self.dtype else f" into {_DTYPES[self.out]}"
        return (f"for a {self.M} x {self.N} x {self.K} {_DTYPES[self.dtype]} product{out} on an {self.gpu} "
                f"({self.limit // 1024} KB, {self.sms} SMs) with min_fill = {self.min_fill}")

    def keep(self, **mistake) -> list[bool]:
        """Which configurations the rule keeps, or (with ``mistake``) a rule with one step wrong."""
        element = mistake.get("element", "a")
        if isinstance(element, tuple):  # (dtypes, size): those dtypes counted as size bytes, the others right
            element = element[1] if self.dtype in element[0] else self.dtype.itemsize
        else:
            element = {"a": self.dtype.itemsize, "c": self.out.itemsize, "two": 2, "four": 4, "one": 1}[element]
        stages = mistake.get("stages", "num_stages")
        limit = _GPUS["H100"][0] if mistake.get("fixed_limit") else self.limit  # an H100's, whatever the GPU
        sms = _GPUS["H100"][1] if mistake.get("fixed_sms") else self.sms
        min_fill = 0.8 if mistake.get("fixed_fill") else self.min_fill
        fits, fill = [], []
        for bm, bn, bk, warps, num_stages in self.blocks:
            block = mistake.get("block")
            if isinstance(block, tuple):  # the shapes counted for A's and B's blocks: ("mk", "kk"), ...
                side = {"m": bm, "n": bn, "k": bk}
                per_stage = sum(side[shape[0]] * side[shape[1]] for shape in block)
            else:
                per_stage = bm * bn if block == "tile" else bm * bk + bk * bn + (bm * bn if block == "C per stage"
                                                                                 else 0)
            count = {"num_stages": num_stages, "none": 1, "num_warps": warps}[stages]
            need = count * per_stage * element + (bm * bn * element if block == "C once" else 0)
            fits.append(need < limit if mistake.get("strict_limit") else need <= limit)
            along_m, along_n = (self.M, self.N) if mistake.get("dims") != "swapped" else (self.N, self.M)
            if mistake.get("tiles") == "floor":
                tiles = max(along_m // bm, 0) * max(along_n // bn, 0)
            elif mistake.get("tiles") == "area":
                tiles = -(-(self.M * self.N) // (bm * bn))
            else:
                tiles = -(-along_m // bm) * -(-along_n // bn)
            waves = -(-tiles // sms)
            if mistake.get("fill") == "no waves":
                value = tiles / sms
            elif mistake.get("fill") == "last wave":
                value = (tiles - (waves - 1) * sms) / sms
            else:
                value = tiles / (waves * sms) if waves else 0.0  # no tile at all (tiles rounded down)
            if "rounded" in mistake:  # the fill rounded to that many decimals before the comparison
                value = round(value, mistake["rounded"])
            fill.append(value > min_fill if mistake.get("strict_fill") else value >= min_fill)
        if mistake.get("ignore") == "shared":
            fits = [True] * len(fits)
        if mistake.get("ignore") == "fill":
            fill = [True] * len(fill)
        full = [f and w for f, w in zip(fits, fill)]
        if any(full):
            return full
        fallback = mistake.get("fallback", "fits")
        if fallback == "none":
            return full
        if fallback == "all":
            return [True] * len(fits)
        return fits

    def shared(self, i: int) -> int:
        bm, bn, bk, _, stages = self.blocks[i]
        return stages * (bm * bk + bk * bn) * self.dtype.itemsize

    def describe(self, i: int) -> str:
        bm, bn, bk, warps, stages = self.blocks[i]
        return f"{bm} x {bn} x {bk} ({stages} stages)"


# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): 16-bit configurations like tiled.TUNING_CONFIGS,
# some too large for every GPU here, and 8-bit ones with a longer BLOCK_K.
_C = dict(c1=(128, 256, 64, 8, 3), c2=(256, 128, 64, 8, 3), c3=(128, 128, 64, 8, 4), c4=(128, 64, 64, 4, 4),
          c5=(64, 128, 64, 4, 4), c6=(64, 64, 64, 4, 5), c7=(64, 256, 32, 4, 4), c8=(256, 256, 64, 8, 4),
          c9=(128, 128, 64, 8, 3), c10=(128, 128, 32, 4, 2), x1=(256, 128, 128, 8, 5), x2=(256, 256, 256, 8, 2),
          d1=(128, 256, 128, 8, 3), d2=(128, 128, 128, 8, 3), d3=(128, 128, 128, 8, 4), d4=(64, 128, 128, 4, 4),
          d5=(256, 128, 128, 8, 4))


def _launches() -> list[_Launch]:
    """The check's calls, the simplest first: shared memory alone, then waves, dtypes of 4 and 1 bytes,
    exact limits, the fallback, non-square shapes; then seeded random ones."""
    f16, f32, i8, i32, f8 = torch.float16, torch.float32, torch.int8, torch.int32, torch.float8_e4m3fn
    pick = lambda *names: [_C[n] for n in names]  # noqa: E731
    fixed = [
        _Launch("H100", 4096, 4096, 4096, f16, f16, 0.8, pick("c1", "c3", "c6", "c8", "x1", "x2")),
        _Launch("H100", 1536, 1536, 1536, f16, f16, 0.8, pick("c1", "c3", "c6", "c5")),
        _Launch("H100", 3072, 3072, 3072, f16, f16, 0.8, pick("c1", "c2", "c3", "c4", "c6")),
        _Launch("H100", 4096, 4096, 4096, f32, f32, 0.8, pick("c1", "c3", "c4", "c6", "c10")),
        _Launch("RTX 4090", 4096, 4096, 4096, i8, i32, 0.8, pick("d1", "d2", "d3", "d4", "c10")),
        _Launch("V100", 2048, 2048, 2048, f16, f32, 0.75, pick("c3", "c9", "c4", "c6")),
        _Launch("H100", 1152, 1408, 4096, f16, f16, 0.75, pick("c1", "c3", "c6", "c7")),
        # fills of 0.7955 (105 tiles on 132 SMs) and 0.7765 (205 on 264) next to min_fill = 0.8: rounded to one or
        # two decimals, they pass
        _Launch("H100", 320, 2624, 4096, f16, f16, 0.8, pick("c3", "c4", "c5", "c6", "c1")),
        _Launch("H100", 16, 8192, 8192, f16, f16, 0.8, pick("c1", "c3", "c5", "c7", "c8")),
        _Launch("A100", 1000, 5000, 1024, f16, f16, 0.9, pick("c1", "c2", "c3", "c4", "c5", "c7")),
        _Launch("H100", 8192, 8192, 8192, f8, f16, 0.8, pick("d1", "d2", "d5", "x1", "c8")),
        _Launch("T4", 2000, 3000, 1000, f16, f16, 0.8, pick("c9", "c10", "c6", "c4", "c5")),
        _Launch("MI300X", 6000, 1000, 1000, f32, f32, 0.85, pick("c4", "c5", "c6", "c10", "c7")),
    ]
    rng = random.Random(5)
    dtypes = [(f16, f16), (f16, f32), (f32, f32), (i8, i32), (f8, f16)]
    for _ in range(40):
        dtype, out = rng.choice(dtypes)
        blocks = rng.sample(list(_C.values()), rng.randint(2, 7))
        launch = _Launch(rng.choice(list(_GPUS)), rng.choice([16, 64, 300, 1000, 2048, 3072, 5000, 8192]),
                         rng.choice([64, 512, 1024, 1536, 4096, 6000, 14336]), 4096, dtype, out,
                         rng.choice([0.5, 0.7, 0.8, 0.9]), blocks)
        fills = [_fill(launch.M, launch.N, bm, bn, launch.sms) for bm, bn, *_ in blocks]
        # at least one configuration fits (autotune needs one), and no fill so close to min_fill that
        # rounding decides (the fixed calls have one, exactly 3/4)
        if any(launch.keep(ignore="fill")) and all(abs(f - launch.min_fill) > 1e-6 for f in fills):
            fixed.append(launch)
    return fixed


def _fill(M, N, bm, bn, sms) -> float:
    tiles = -(-M // bm) * -(-N // bn)
    return tiles / (-(-tiles // sms) * sms)


# The arguments that carry a GPU's numbers, and an H100's values of them, which a learner may write instead.
_FIXED = {"fixed_limit": ("shared_limit", "227 KB of shared memory"), "fixed_sms": ("sms", "132 SMs"),
          "fixed_fill": ("min_fill", "min_fill = 0.8")}


def _fixed_mistakes() -> list:
    """Rules that take one or more of an H100's numbers instead of the arguments, fewest first."""
    import itertools

    found = []
    for k in (1, 2, 3):
        for keys in itertools.combinations(_FIXED, k):
            arguments = " and ".join(", ".join(_FIXED[key][0] for key in keys).rsplit(", ", 1))
            numbers_ = " and ".join(", ".join(_FIXED[key][1] for key in keys).rsplit(", ", 1))
            found.append((dict.fromkeys(keys, True),
                          f"it uses an H100's {numbers_} instead of the argument{'s' if k > 1 else ''} {arguments}: "
                          "take the GPU's numbers from the arguments, the check tries several GPUs and fills"))
    return found


_ROUNDED = ("the fill is rounded before it is compared with min_fill: waves 0.795 full round to 0.8, but they are "
            "not 0.8 full; compare tiles / (waves x sms) as it is, unrounded")

# Mistakes of one step each, the hint for each; of those that explain every call the learner's function
# answered, the one that explains the most later calls too gets its hint (the first in the list at a tie).
_MISTAKES = [
    (dict(ignore="shared"), "it keeps configurations whatever shared memory they need: drop those that need "
                            "more than shared_limit"),
    (dict(stages="none"), "the shared memory counts one stage only: each of the num_stages stages holds a block "
                          "of A and one of B"),
    (dict(stages="num_warps"), "the shared memory counts num_warps copies: the copies in flight are the "
                               "num_stages stages"),
    (dict(element="one"), "the shared memory counts elements, not bytes: multiply by the bytes per element"),
    (dict(element="c"), "the element size is C's: shared memory holds blocks of A and B, so it is their "
                        "element size that counts (C's dtype can differ, e.g. int8 into int32)"),
    (dict(element="two"), "every dtype counts as 2 bytes: the bytes per element come from A's dtype "
                          "(named_args['a_ptr'].element_size())"),
    (dict(element="four"), "every dtype counts as 4 bytes: the bytes per element come from A's dtype "
                           "(named_args['a_ptr'].element_size()), whatever it is"),
    (dict(block="tile"), "the shared memory counts a BLOCK_M x BLOCK_N tile: a stage holds a BLOCK_M x BLOCK_K "
                         "block of A and a BLOCK_K x BLOCK_N block of B"),
    (dict(block="C per stage"), "the shared memory adds a BLOCK_M x BLOCK_N tile of C to every stage: the stages "
                                "hold blocks of A and B only (C's tile is the accumulator, kept in registers)"),
    (dict(block="C once"), "the shared memory adds a BLOCK_M x BLOCK_N tile of C: only the stages of A and B sit in "
                           "shared memory (C's tile is the accumulator, kept in registers)"),
    (dict(strict_limit=True), "a configuration that needs exactly shared_limit fits: keep it (at most the "
                              "limit, not below it)"),
    (dict(ignore="fill"), "it keeps configurations whose waves are less than min_fill full: drop those, "
                          "unless none that fits reaches min_fill (and count a partial last wave as a whole one)"),
    (dict(fill="no waves"), "the fill divides the tiles by the SMs without counting waves: a partial last wave "
                            "takes a whole wave's time, so divide by waves x sms"),
    (dict(fill="last wave"), "the fill is that of the last wave alone: it is the tiles over the SM time of "
                             "all the waves (tiles / (waves x sms))"),
    (dict(tiles="floor"), "the tiles are rounded down: a tile that hangs over the edge is still a whole tile"),
    (dict(tiles="area"), "the tiles come from the whole area: count them along M and along N, each rounded up"),
    (dict(dims="swapped"), "the tiles are counted with M and N swapped: BLOCK_M tiles M, BLOCK_N tiles N"),
    (dict(strict_fill=True), "a fill equal to min_fill is enough: keep it (at least min_fill)"),
    (dict(fallback="all"), "when no configuration reaches min_fill it keeps all of them, also those that do "
                           "not fit: keep those that fit"),
    (dict(rounded=1), _ROUNDED),
    (dict(rounded=2), _ROUNDED),
]


def _element_mistakes() -> list:
    """Rules that count the elements of some dtypes (int8, float8, both, float32, float16) with a wrong size,
    the others right: a size written in for the dtypes the learner had in mind (``element = 2``, or 2 unless
    float32)."""
    f8 = torch.float8_e4m3fn
    groups = [((torch.int8,), "an int8 element"), ((f8,), "a float8 element"),
              ((torch.int8, f8), "an 8-bit element (int8, float8)"), ((torch.float32,), "a float32 element"),
              ((torch.float16,), "a float16 element")]
    return [(dict(element=(dtypes, size)),
             f"it counts {what} as {plural(size, 'byte')}: the bytes per element come from A's dtype "
             "(named_args['a_ptr'].element_size()), whatever it is; the check tries dtypes of 1, 2 and 4 bytes")
            for dtypes, what in groups for size in (1, 2, 4) if size != dtypes[0].itemsize]


_SIDES = {"m": "BLOCK_M", "n": "BLOCK_N", "k": "BLOCK_K"}
_STAGE = "a stage holds a BLOCK_M x BLOCK_K block of A and a BLOCK_K x BLOCK_N block of B"


def _block_mistakes() -> list:
    """Rules that count a stage's blocks of A and B with other shapes (``bk * bk`` for B's, ``bm * bm`` for A's,
    ...): each pair of shapes once, the right one left out."""
    import itertools

    shape = lambda s: f"{_SIDES[s[0]]} x {_SIDES[s[1]]}"  # noqa: E731
    found = []
    for a, b in itertools.combinations_with_replacement(("mk", "kn", "kk", "mm", "nn", "mn"), 2):
        if {a, b} == {"mk", "kn"}:
            continue
        if "mk" in (a, b):
            hint = f"B's block is counted as {shape(b if a == 'mk' else a)}: B's block is BLOCK_K x BLOCK_N ({_STAGE})"
        elif "kn" in (a, b):
            hint = f"A's block is counted as {shape(b if a == 'kn' else a)}: A's block is BLOCK_M x BLOCK_K ({_STAGE})"
        else:
            hint = f"a stage's blocks are counted as {shape(a)} and {shape(b)}: {_STAGE}"
        found.append((dict(block=(a, b)), f"the shared memory is counted from the wrong blocks: {hint}"))
    return found


_MISTAKES += _element_mistakes() + _block_mistakes()


# What autotune adds to each call of early_config_prune: the launch's keyword arguments.
_LAUNCH_KWARGS = dict(grid=lambda meta: (1,), warmup=False)


def _config_key(config):
    return (tuple(sorted(getattr(config, "kwargs", {}).items())), getattr(config, "num_warps", None),
            getattr(config, "num_stages", None))


def _unpack_hint(fn) -> str | None:
    """For an unpacking that failed (``t, w, i = tiled.waves(...)``): what the unpacked call returns, read from
    ``fn``'s source (a call's result unpacked into several names); None where no call's result is unpacked."""
    import ast

    from course import tiled
    from course.exercises.nb04 import read_sources, resolve_name

    for tree, namespace, local in read_sources(fn):
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.For, ast.comprehension)):
                targets, value = [node.target], node.iter
            else:
                continue
            if not (isinstance(value, ast.Call) and any(isinstance(t, (ast.Tuple, ast.List)) for t in targets)):
                continue
            if resolve_name(value.func, namespace, local) is tiled.waves:
                keys = ", ".join(repr(k) for k in tiled.waves(1, 1, 1, 1, 1))
                return (f"tiled.waves returns a dict ({keys}), not a tuple: unpacking a dict gives its keys; "
                        "take a value by its key, as tiled.waves(...)['tiles']")
            name = ast.unparse(value.func)
            return (f"the values unpacked from {name}(...) are not as many as the names they go to: check what "
                    f"{name} returns (a dict unpacks into its keys)")
    return None


def _learner_error(call: str, err: Exception, fn=None) -> Failed:
    """A ✗ for an error of the learner's pruning function ``fn``, with a hint where the error says little."""
    text = str(err)
    if fn is not None and ((isinstance(err, ValueError) and "values to unpack" in text) or
                           (isinstance(err, TypeError) and "cannot unpack" in text)):
        hint = _unpack_hint(fn)
        if hint:  # not core's hint, which blames the learner's own return
            return Failed(f"{call} raised {type(err).__name__}: {text}\n  hint: {hint}")
    if isinstance(err, ZeroDivisionError):
        return Failed(f"{call} divided by zero: with fewer tiles than SMs there is one wave, a partial one "
                      "(round the waves up)")
    if isinstance(err, KeyError) and err.args and err.args[0] in ("num_stages", "num_warps"):
        return Failed(f"{call} raised KeyError: {err.args[0]!r}: num_stages and num_warps are attributes of a "
                      "Config (config.num_stages); config.kwargs holds the kernel's own parameters (BLOCK_M, ...)")
    if isinstance(err, KeyError):
        return Failed(f"{call} raised KeyError: {err.args[0]!r}: named_args holds the kernel's arguments by "
                      "name (a_ptr, b_ptr, c_ptr, M, N, K, stride_am, ...) and config.kwargs the block sizes "
                      "(BLOCK_M, BLOCK_N, BLOCK_K)")
    if isinstance(err, AttributeError) and "Config" in str(err):
        return Failed(f"{call} raised AttributeError: {err}: a Config keeps the block sizes in its dict "
                      "config.kwargs (config.kwargs['BLOCK_M']) and num_stages, num_warps as attributes")
    return user_error(call, err)


def _kept(result, given: list, call: str) -> list[bool]:
    """Which of ``given`` the learner's ``result`` keeps, or a ✗ that says what to return."""
    if isinstance(result, (list, tuple)):
        items = list(result)
    else:
        what = type(result).__name__
        raise Failed(f"{call} returned {'None' if result is None else 'a ' + what}: return a list of the "
                     "triton.Config objects worth timing")
    keys = [_config_key(c) for c in given]
    kept = [False] * len(given)
    for item in items:
        if not hasattr(item, "kwargs") or not hasattr(item, "num_stages"):
            raise Failed(f"{call} returned a list holding a {type(item).__name__}: return the triton.Config "
                         "objects themselves (autotune launches with them)")
        match = next((i for i, c in enumerate(given) if c is item), None)
        if match is None:
            match = next((i for i, k in enumerate(keys) if k == _config_key(item)), None)
        if match is None:
            raise Failed(f"{call} returned a configuration that was not among those given: keep or drop "
                         "them, don't change them")
        if kept[match]:
            raise Failed(f"{call} returned one configuration twice: autotune would time it twice")
        kept[match] = True
    return kept


@exercise("prune_configs", "Fill in the body of prune_configs above: the configurations worth timing")
def check_prune_configs(prune_configs) -> str:
    """Check ``prune_configs(configs, named_args, shared_limit, sms, min_fill, **kwargs)``, an
    ``early_config_prune`` for ``triton.autotune`` (``kwargs``: the launch's own, which autotune passes
    on): it keeps the configurations whose shared memory
    (``num_stages × (BLOCK_M·BLOCK_K + BLOCK_K·BLOCK_N) ×`` A's element size) is at most
    ``shared_limit`` and, of those, the ones whose waves are at least ``min_fill`` full (tiles /
    (waves × sms)); all that fit when none is. Tried on several GPUs, dtypes of 1, 2 and 4 bytes,
    exact limits, and seeded random shapes. Every call has at least one configuration that fits (a test
    asserts it): on a GPU where none fits, autotune has nothing to launch and the list of configurations is
    what to change, so what a pruning returns then is not checked. The course's counting helpers
    (``tiled.shared_bytes``, ``tiled.waves``) may be used: the exercise is the pruning, and only the
    solution's is refused."""
    import inspect

    from course import solutions

    require_function("prune_configs", prune_configs, ("configs", "named_args", "shared_limit", "sms", "min_fill"))
    own = course_helper(prune_configs)
    if own:
        raise Failed(f"prune_configs is the course's own {own}: write a function of your own that drops the "
                     "configurations")
    try:
        signature = inspect.signature(prune_configs)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind([], {}, shared_limit=0, sms=1, min_fill=0.5)
        except TypeError:
            raise Failed("prune_configs must take its last three arguments by these names (shared_limit, sms, "
                         "min_fill): autotune's call goes through functools.partial(prune_configs, shared_limit=..., "
                         "sms=..., min_fill=...)") from None
        try:
            signature.bind([], {}, shared_limit=0, sms=1, min_fill=0.5, **_LAUNCH_KWARGS)
        except TypeError:
            raise Failed("prune_configs takes no other keyword arguments, but autotune passes it the launch's too "
                         "(grid=..., warmup=...): end the signature with **kwargs") from None
    if forbidden_call(prune_configs, [(solutions.prune_configs, "the solution")]):
        raise Failed("prune_configs calls the solution's prune_configs, which is the answer: write the pruning "
                     "yourself (tiled.shared_bytes, tiled.waves or your wave_count may do the counting)")
    launches = _launches()
    answered = []  # (launch, what the learner kept) for each call, until the first that is wrong
    for launch in launches:
        call = f"{launch}, prune_configs"
        configs = launch.configs()
        given, keys = list(configs), [_config_key(c) for c in configs]
        try:
            result = prune_configs(configs, launch.named_args(), shared_limit=launch.limit, sms=launch.sms,
                                   min_fill=launch.min_fill, **_LAUNCH_KWARGS)
        except Exception as err:
            raise _learner_error(call, err, prune_configs) from None
        if len(configs) != len(given) or any(c is not g for c, g in zip(configs, given)) or \
                [_config_key(c) for c in given] != keys:
            raise Failed(f"{call} changed the list of configurations it was given: autotune keeps that list for "
                         "every later shape, so build a new list and leave it as it is")
        if isinstance(result, (list, tuple)) and not result:
            raise Failed(f"{call} returned no configuration: autotune needs at least one to time; when none "
                         "that fits reaches min_fill, keep all that fit (the timing decides)")
        kept = _kept(result, given, call)
        answered.append((launch, kept))
        want = launch.keep()
        if kept != want:
            evidence = answered + _more_answers(prune_configs, launches[len(answered):])
            raise Failed(f"{launch}: {_prune_hint(answered, evidence, prune_configs)}")
    return (f"right on {len(launches)} calls: {len(_GPUS)} GPUs' limits, 1-, 2- and 4-byte dtypes, exact limits, "
            "and shapes no configuration fills")


def _reads(fn, name: str) -> bool | None:
    """Whether ``fn``'s source reads the variable ``name`` (None: no source to read)."""
    import ast

    return uses(fn, lambda n: isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))


def _more_answers(prune_configs, launches) -> list:
    """(launch, what the learner kept) for the calls after the first wrong one, as far as the learner's
    function answers them properly: more evidence to tell its mistake from others that agree so far."""
    more = []
    for launch in launches:
        configs = launch.configs()
        try:
            result = prune_configs(configs, launch.named_args(), shared_limit=launch.limit, sms=launch.sms,
                                   min_fill=launch.min_fill, **_LAUNCH_KWARGS)
            more.append((launch, _kept(result, list(configs), "")))
        except Exception:  # Failed included: a malformed answer ends the evidence
            break
    return more


def _prune_hint(answered, evidence=None, prune_configs=None) -> str:
    """What a wrong pruning most likely got wrong: of the one-step mistakes (and an H100's numbers written in
    place of arguments the function never reads) that explain every answer up to the wrong one (else the
    wrong one), the one that explains the most of ``evidence`` (those answers and the later calls'), the
    first in the list at a tie; else the first configuration kept or dropped wrongly."""
    import ast

    launch, kept = answered[-1]
    evidence = evidence or answered
    reads = {key: None if prune_configs is None else _reads(prune_configs, name) for key, (name, _) in _FIXED.items()}
    fixed = [(mistake, hint) for mistake, hint in _fixed_mistakes() if all(reads[key] is not True for key in mistake)]

    def explained(mistake, calls) -> int:
        return sum(launch_.keep(**mistake) == kept_ for launch_, kept_ in calls)

    for calls in (answered, answered[-1:]):
        # of the mistakes that explain these calls, the one that explains the most of all the evidence (the
        # first such in the list): several may agree with the first calls (int8 counted as 2 bytes, and C's
        # element size, agree on an int8 product into int32), the later ones tell them apart
        agree = [(mistake, hint) for mistake, hint in fixed + _MISTAKES if explained(mistake, calls) == len(calls)]
        if agree:
            mistake, hint = max(agree, key=lambda pair: explained(pair[0], evidence))
            if mistake.get("element") == "two" and prune_configs is not None and uses(
                    prune_configs, lambda n: isinstance(n, ast.Attribute) and n.attr == "shared_bytes"):
                hint += " (tiled.shared_bytes counts 2 unless told otherwise: pass it element_bytes)"
            return hint
    unread = [name for key, (name, _) in _FIXED.items() if reads[key] is False]
    if unread:
        return (f"it never reads {' and '.join(', '.join(unread).rsplit(', ', 1))}: the GPU's numbers reach the "
                "function through its arguments, and the check tries several GPUs and fills")
    want = launch.keep()
    i = next(i for i, (k, w) in enumerate(zip(kept, want)) if k != w)
    fits = launch.shared(i) <= launch.limit
    if kept[i] and not fits:
        return f"it keeps {launch.describe(i)}, which needs more shared memory than shared_limit"
    if kept[i]:
        return f"it keeps {launch.describe(i)}, whose waves are less than min_fill full while others' are not"
    if not any(launch.keep(fallback="none")):  # nothing that fits fills the waves: the fallback applies
        return (f"it drops {launch.describe(i)}, which fits; no configuration reaches min_fill here, so the waves "
                "cannot choose: keep every one that fits")
    return f"it drops {launch.describe(i)}, which fits in shared memory and fills at least min_fill of the waves"
