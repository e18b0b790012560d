"""The catalogue of notebook 12's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""


from course import exercises, solutions

from catalogue import assert_wrong_answers_named, quiet


# --- 12: which mode for which shape, against the records ------------------------------------------------

MODE_WRONG = {
    "always persistent": (lambda M, N, K, tile: "persistent", "mostly empty"),
    "always Gluon": (lambda M, N, K, tile: "gluon", "where the waves are full"),
    "Gluon on small squares": (lambda M, N, K, tile: "gluon" if M < 2000 else "persistent", "square 1024"),
    "one shape by heart": (lambda M, N, K, tile: "gluon" if M == 1536 else "tail", "8B qkv M=512"),
    "always tail": (lambda M, N, K, tile: "tail" if M > 0 else "persistent", "thin last one"),
    "not a mode": (lambda M, N, K, tile: "fast", "return one of"),
    "raises": (lambda M, N, K, tile: 1 / 0, "raised ZeroDivisionError"),
    "wrong arguments": (lambda M, N, K: "persistent", "must take"),
}


def test_mode_choice_reference_and_wrong_answers():
    verdict = quiet(exercises.check_mode_choice, solutions.choose_mode)
    assert verdict.passed and "recorded on" in verdict.message
    assert_wrong_answers_named(exercises.check_mode_choice, MODE_WRONG)
