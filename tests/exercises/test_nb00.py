"""The catalogue of notebook 00's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""


from course import exercises

from catalogue import assert_wrong_answers_named, quiet


# --- 00: saxpy cost ----------------------------------------------------------------------------------

SAXPY_WRONG = {  # a typical wrong answer -> words its message must contain
    "forgot the write of y": (lambda n: (2 * n, 8 * n), "also written back"),
    "one op per element": (lambda n: (n, 12 * n), "a multiply and an add"),
    "elements, not bytes": (lambda n: (2 * n, 3 * n), "counts elements"),
    "the scalar a as 4 bytes": (lambda n: (2 * n, 12 * n + 4), "does not grow with n"),
    "y read twice": (lambda n: (2 * n, 16 * n), "read once and written once"),
    "float64 sizes": (lambda n: (2 * n, 24 * n), "4 bytes, not 8"),
    "the pair swapped": (lambda n: (12 * n, 2 * n), "(flops, bytes_moved), in that order"),
    "a float answer": (lambda n: (2.0 * n, 8.0 * n), "also written back"),
    "not linear": (lambda n: (2 * n, n * n), "in proportion to n"),
    "one number": (lambda n: 12 * n, "return a pair"),
    "a string": (lambda n: (2 * n, "lots"), "return a number"),
    "raises": (lambda n: 1 / 0, "raised ZeroDivisionError"),
    "gigabytes": (lambda n: (2 * n, 12 * n / 1e9), "not GB, MB or thousands"),
}


def test_saxpy_cost_wrong_answers_get_their_own_messages():
    assert_wrong_answers_named(exercises.check_saxpy_cost, SAXPY_WRONG, same_mistake={"a float answer"})


def test_messages_never_give_the_answer_away():
    for fn, _ in SAXPY_WRONG.values():
        message = quiet(exercises.check_saxpy_cost, fn).message
        assert "12n" not in message and "expected" not in message
