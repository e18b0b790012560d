"""Notebook 05: tuning."""

from __future__ import annotations

import numbers


from course.exercises.core import Failed, exercise, require_function, user_error

__all__ = ['check_wave_count']


# The last two fill their last wave exactly: 12 x 11 and 27 x 4 tiles.
_WAVE_CASES = [(4096, 4096, 128, 128, 132), (3072, 3072, 128, 128, 132), (1000, 1000, 128, 128, 132),
               (4096, 4096, 128, 256, 132), (300, 5000, 64, 128, 108), (1536, 1408, 128, 128, 132),
               (3456, 512, 128, 128, 108)]


@exercise("wave_count", "Fill in the body of wave_count above: return (tiles, waves, idle SMs in the last wave)")
def check_wave_count(wave_count) -> str:
    """Check ``wave_count(M, N, block_m, block_n, sms) -> (tiles, waves, idle)``: the tiles of an
    ``M x N`` output, the waves they take on ``sms`` SMs (one tile per SM at a time), and the SMs
    left idle in the last wave (0 when it is full)."""
    from course import tiled

    require_function("wave_count", wave_count, ("M", "N", "block_m", "block_n", "sms"))
    for M, N, bm, bn, sms in _WAVE_CASES:
        call = f"wave_count({M}, {N}, {bm}, {bn}, {sms})"
        try:
            got = wave_count(M, N, bm, bn, sms)
        except Exception as err:
            raise user_error(call, err) from None
        if not (isinstance(got, (tuple, list)) and len(got) == 3):
            raise Failed(f"{call} returned {got!r}: return three numbers, (tiles, waves, idle)")
        if any(isinstance(v, bool) or not isinstance(v, numbers.Real) for v in got):
            raise Failed(f"{call} returned {got!r}: return three numbers, (tiles, waves, idle)")
        tiles, count, idle = got
        want = tiled.waves(M, N, bm, bn, sms)
        if tiles != want["tiles"]:
            edge = M % bm or N % bn
            area = -(-(M * N) // (bm * bn))
            hint = ("rounding up the whole area is not enough: a tile is whole or not at all in each "
                    "dimension, so count the tiles along M and along N, each rounded up, then multiply"
                    if edge and tiles == area else
                    "a tile is whole or not at all: the tiles that hang over the edge count too, so round "
                    "up, per dimension" if edge and tiles < want["tiles"] else
                    "count the tiles along M and along N separately, then multiply")
            if isinstance(tiles, float) and not float(tiles).is_integer():
                hint = "tiles come in whole numbers: divide with rounding up, per dimension"
            raise Failed(f"{call} gives {tiles} tiles: {hint}")
        if count != want["waves"]:
            if count < want["waves"]:
                hint = "the last, partial wave still takes a whole wave's time: round up"
            elif want["tiles"] % sms == 0 and count == want["waves"] + 1:
                hint = "when the tiles fill the waves exactly there is no extra wave: round up, don't add one"
            else:
                hint = "a wave is `sms` tiles at once: divide the tiles by the SMs, rounding up"
            raise Failed(f"{call} gives {count} waves: {hint}")
        if idle != want["idle in the last wave"]:
            hint = ("when the tiles fill the last wave exactly, no SM is idle" if want["idle in the last wave"] == 0
                    else "the last wave holds the tiles left after the full waves (tiles % sms); the rest of the "
                         "SMs wait")
            raise Failed(f"{call} gives {idle} idle SMs: {hint}")
    return f"right on {len(_WAVE_CASES)} shapes"
