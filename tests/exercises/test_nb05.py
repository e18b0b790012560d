"""The catalogue of notebook 05's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""


from course import exercises, solutions

from catalogue import assert_wrong_answers_named, quiet


# --- 05: waves ----------------------------------------------------------------------------------------

def _waves(tiles=None, waves=None, idle=None):
    """A wave_count that gets one step wrong (the others as the reference does them)."""
    def wave_count(M, N, bm, bn, sms):
        t = tiles(M, N, bm, bn) if tiles else -(-M // bm) * -(-N // bn)
        w = waves(t, sms) if waves else -(-t // sms)
        return t, w, idle(t, sms) if idle else (sms - t % sms) % sms
    return wave_count


WAVES_WRONG = {
    "tiles rounded down": (_waves(tiles=lambda M, N, bm, bn: (M // bm) * (N // bn)), "round up"),
    "tiles as a fraction": (_waves(tiles=lambda M, N, bm, bn: M * N / (bm * bn)), "whole numbers"),
    "waves rounded down": (_waves(waves=lambda t, sms: t // sms), "takes a whole wave's time"),
    "idle when full": (_waves(idle=lambda t, sms: sms - t % sms), "no SM is idle"),
    "busy instead of idle": (_waves(idle=lambda t, sms: t % sms), "the rest of the SMs wait"),
    "two numbers": (lambda M, N, bm, bn, sms: (1, 2), "return three numbers"),
    "the area rounded up": (_waves(tiles=lambda M, N, bm, bn: -(-(M * N) // (bm * bn))), "whole area is not enough"),
    "one wave too many": (_waves(waves=lambda t, sms: t // sms + 1), "no extra wave"),
}


def test_wave_count_reference_and_wrong_answers():
    assert quiet(exercises.check_wave_count, solutions.wave_count).passed
    assert_wrong_answers_named(exercises.check_wave_count, WAVES_WRONG)
