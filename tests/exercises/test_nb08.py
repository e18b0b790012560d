"""The catalogue of notebook 08's exercises: the reference passes, each typical wrong answer gets its own message
(without the answer), correct alternatives pass, and no check crashes."""


from course import exercises, solutions

from catalogue import assert_wrong_answers_named, quiet, variant


# --- 08: gelu -----------------------------------------------------------------------------------------

_GELU = "return 0.5 * x * (1.0 + stable_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))"
GELU_WRONG = {  # label: (edits of epilogues.gelu, words its message must contain)
    "identity": ([(_GELU, "return x")], "unchanged"),
    "no 0.5": ([(_GELU, _GELU.replace("0.5 * x", "x"))], "factor 0.5"),
    "exact erf": ([(_GELU, "return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))")], "exact GELU"),
    "no cubic term": ([(_GELU, "return 0.5 * x * (1.0 + stable_tanh(0.7978845608028654 * x))")], "cubic term"),
    "overflowing tanh": ([(_GELU, "u = 0.7978845608028654 * (x + 0.044715 * x * x * x)\n    e = tl.exp(2.0 * u)\n"
                                  "    return 0.5 * x * (1.0 + (e - 1.0) / (e + 1.0))")], "overflowed"),
    "a sign": ([(_GELU, _GELU.replace("1.0 + stable", "1.0 - stable"))], "tanh approximation gives"),
    "float16": ([(_GELU, "return (" + _GELU[len("return "):] + ").to(tl.float16)")], "rounded to 16 bits"),
    "a constant": ([(_GELU, _GELU.replace("0.044715", "0.05"))], "check the constants"),
    "overflow past 12": ([(_GELU, "u = 0.7978845608028654 * (x + 0.044715 * x * x * x)\n"
                                  "    e, f = tl.exp(u), tl.exp(-u)\n    return 0.5 * x * (1.0 + (e - f) / (e + f))")],
                         "overflowed"),
    "math.tanh": ([(_GELU, "return 0.5 * x * (1.0 + math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))"),
                   ("@triton.jit\ndef stable_tanh", "import math\n\n\n@triton.jit\ndef stable_tanh")],
                  "tl functions"),
    "sign lost": ([("@triton.jit\ndef gelu", "@triton.jit\ndef _tanh_abs(u):\n    return stable_tanh(tl.abs(u))\n\n\n"
                    "@triton.jit\ndef gelu"), (_GELU, _GELU.replace("stable_tanh(", "_tanh_abs("))], "lost its sign"),
    "x ** 3": ([(_GELU, _GELU.replace("x * x * x", "x ** 3"))], "write x * x * x"),
    "float16 maths": ([(_GELU, "x = x.to(tl.float16)\n    " + _GELU)], "keep the tile in float32"),
    "wrong signature": ([("def gelu(x):", "def gelu(x, y):")], "keep the signature"),
}


def test_gelu_reference_and_wrong_answers(tmp_path):
    from course import epilogues

    assert quiet(exercises.check_gelu, solutions.gelu).passed
    table = {label: (variant(tmp_path, f"gelu_{i}", (epilogues.stable_tanh, epilogues.gelu), *edits), words)
             for i, (label, (edits, words)) in enumerate(GELU_WRONG.items())}
    table["no @triton.jit"] = (lambda x: x, "did you forget @triton.jit")
    assert_wrong_answers_named(exercises.check_gelu, table, same_mistake=("overflowing tanh", "overflow past 12"))
