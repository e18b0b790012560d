"""Notebook 12: the capstone."""

from __future__ import annotations

import math
import re


from course.exercises.core import Failed, exercise, require_function, user_error

__all__ = ['check_mode_choice']


_MODES = ("persistent", "streamk", "tail", "gluon")


@exercise("mode_choice", "Write choose_mode above: the course.gemm mode for an M x N x K bfloat16 product on an H100")
def check_mode_choice(choose_mode) -> str:
    """Check ``choose_mode(M, N, K, tile) -> str`` against the recorded benchmark (``gemm_h100-sxm``):
    on each of its bfloat16 rows (``tile``: the Triton kernel's ``(block_m, block_n)`` there), the mode
    chosen is scored by its recorded speed over the best recorded mode's (the persistent kernel's
    speed where the record has none for the mode: it does not apply there), within 3 % counting as a
    tie. Passes at a geometric mean of at least 0.99 and at least 0.90 on every row."""
    from course import records

    require_function("choose_mode", choose_mode, ("M", "N", "K", "tile"))
    bench = records.load("gemm_h100-sxm")
    scored = []
    for r in (r for r in bench.rows if r["dtype"] == "bf16"):
        M, N, K = r["M"], r["N"], r["K"]
        tile = tuple(int(v) for v in re.match(r"(\d+)x(\d+)", r["config"]).groups())
        try:
            mode = choose_mode(M, N, K, tile)
        except Exception as err:
            raise user_error(f"choose_mode({M}, {N}, {K}, {tile})", err) from None
        if mode not in _MODES:
            raise Failed(f"choose_mode({M}, {N}, {K}, {tile}) returned {mode!r}: return one of "
                          f"{', '.join(repr(m) for m in _MODES)}")
        speed = r.get(f"{mode}_ratio") or r["persistent_ratio"]
        best_mode = max(_MODES, key=lambda m: r.get(f"{m}_ratio") or 0)
        score = speed / r[f"{best_mode}_ratio"]
        scored.append((1.0 if score >= 0.97 else score, r, mode, speed, best_mode, tile))
    worst = min(scored, key=lambda s: s[0])
    score, r, mode, speed, best_mode, tile = worst
    where = f"{r['name']} ({r['M']} x {r['N']} x {r['K']}, Triton tiles {tile[0]} x {tile[1]})"
    if len({s[2] for s in scored}) == 1:
        why = {"gluon": "the Gluon kernel is slower than the Triton kernel where the waves are full",
               "persistent": "which shapes leave the last wave of the Triton kernel's tiles mostly empty?",
               "tail": "a tail split helps only shapes with several waves and a thin last one",
               "streamk": "Stream-K splits only the last wave, and gains little on an H100 (notebook 09)"}[mode]
        raise Failed(f"choose_mode returns {mode!r} for every shape: at {where} that runs at {score:.2f} of the best "
                      f"recorded mode. {why[0].upper() + why[1:]}")
    geomean = math.exp(sum(math.log(s[0]) for s in scored) / len(scored))
    if score < 0.90:
        raise Failed(f"at {where} your {mode!r} runs at {speed:.2f}x cuBLAS's speed, the best mode, {best_mode!r}, "
                      f"at {r[f'{best_mode}_ratio']:.2f}x (recorded): {score:.2f} of the best. Count that shape's tiles "
                      "and waves for each kernel's tiles (an idle part of the last wave costs about 1 / waves of "
                      "the run)")
    if geomean < 0.99:
        losses = ", ".join(f"{s[1]['name']} ({s[2]}: {s[0]:.2f})" for s in sorted(scored, key=lambda s: s[0])[:3])
        raise Failed(f"your choices reach {geomean:.3f} of the best recorded mode on average (geometric mean over "
                      f"{len(scored)} shapes, within 3 % counted as a tie), under 0.99; the biggest losses: {losses}")
    hits = sum(s[0] == 1.0 for s in scored)
    outside = "; ".join(f"{s[1]['name']}: {s[2]!r} at {s[0]:.2f} of {s[4]!r}" for s in sorted(scored, key=lambda s: s[0])
                        if s[0] < 1.0)
    return (f"your choices reach {geomean:.3f} of the best recorded mode on average and at least {score:.2f} on every "
            f"shape, within 3 % of the best on {hits} of {len(scored)}" + (f" (the others: {outside})" if outside else "")
            + f". {bench.banner}")
