"""Notebook 08: epilogues and quantized GEMM."""

from __future__ import annotations


import torch

from course import runtime
from course.exercises.core import Failed, close, exercise, require_jit, user_error

__all__ = ['check_gelu']


@exercise("gelu", "Write the body of gelu above: the tanh approximation of GELU for a float32 tile x")
def check_gelu(gelu) -> str:
    """Check a ``@triton.jit`` function ``gelu(x)``, the tanh approximation of GELU, on values from -12 to 12
    and far out to +-10^4 (each, in a kernel), then as the epilogue of ``epilogues.fused_linear_kernel``."""
    from course import epilogues

    require_jit("gelu", gelu, ("x",))
    far = torch.tensor([50.0, 100.0, 1e3, 1e4])
    x = torch.cat([torch.linspace(-12, 12, 481), far, -far]).to(runtime.DEVICE)
    try:
        got = epilogues.apply(gelu, x).cpu().double()
    except Exception as err:
        raise user_error("applied to a tile, your gelu", err) from None
    xs = x.cpu().double()
    want = torch.nn.functional.gelu(xs, approximate="tanh")

    bad = ~torch.isfinite(got)
    if bad.any():
        at = float(xs[bad][0])
        raise Failed(f"gelu({at:g}) is {float(got[bad][0])}: for large |x| an exp overflowed (to inf, and inf / inf "
                      "or inf - inf is nan). Build tanh from an exp that cannot overflow, and mind the sign")
    core = slice(0, 481)  # -12 .. 12, where the forms of GELU differ; past it every GELU is x or 0
    far_wrong = ((got[481:] - want[481:]).abs() > 1e-5 * want[481:].abs() + 1e-6).any()
    if close(got[core], want[core], 1e-5) and far_wrong:
        worst = 481 + int(torch.argmax((got[481:] - want[481:]).abs()))
        raise Failed(f"gelu({float(xs[worst]):g}) is {float(got[worst]):.6g}, GELU gives {float(want[worst]):.6g}: "
                      "right from -12 to 12, wrong far out")
    got, want, xs = got[core], want[core], xs[core]
    if not close(got, want, 1e-5):
        if close(got, xs, 1e-5):
            raise Failed("gelu returned its input unchanged: the epilogue must transform the tile")
        if close(got, 2 * want, 1e-5):
            raise Failed("gelu is twice too large: GELU has a factor 0.5 in front")
        if close(got, torch.nn.functional.gelu(xs), 5e-6):
            raise Failed("this is the exact GELU, with erf; write the tanh approximation given above")
        if close(got, want.half().double(), 1e-5):
            raise Failed("the values are rounded to 16 bits: keep the tile in float32 (the store converts it)")
        if close(got, 0.5 * xs * (1 + torch.tanh(0.7978845608028654 * xs)), 1e-3):
            raise Failed("the cubic term is missing: tanh's argument is sqrt(2 / pi) (x + 0.044715 x^3)")
        u = 0.7978845608028654 * (xs + 0.044715 * xs ** 3)
        if close(got, 0.5 * xs * (1 + torch.tanh(u.abs())), 1e-5):
            raise Failed("wrong for negative x: your tanh lost its sign. tanh is odd, tanh(-u) = -tanh(u): compute "
                          "it for |u| and restore the sign with tl.where")
        if close(got, want, 1e-2):
            raise Failed("close, but not GELU's tanh approximation: check the constants (0.5, sqrt(2 / pi) = "
                          "0.7978845608..., 0.044715)")
        worst = int(torch.argmax((got - want).abs()))
        raise Failed(f"gelu({float(xs[worst]):g}) is {float(got[worst]):.6g}, GELU's tanh approximation gives "
                      f"{float(want[worst]):.6g}")
    torch.manual_seed(0)
    a = (30 * torch.randn(50, 70)).half().to(runtime.DEVICE)  # a wide range of accumulator values
    w = torch.randn(40, 70).half().to(runtime.DEVICE)
    bias = torch.randn(40).to(runtime.DEVICE)
    try:
        y = epilogues.linear(a, w, bias, activation=gelu, out_dtype=torch.float32, num_programs=3, block_m=32,
                             block_n=32, block_k=32, num_warps=4, num_stages=2)
    except Exception as err:
        raise user_error("as the epilogue of fused_linear_kernel, your gelu", err) from None
    if not torch.isfinite(y).all():
        raise Failed("as an epilogue, gelu gave inf or nan on some accumulator values: an exp overflowed. Build "
                      "tanh from an exp that cannot overflow")
    if not close(y, epilogues.reference(a, w, bias, "gelu"), 1e-4):
        raise Failed("right value by value, but wrong as an epilogue: gelu must work on a whole tile at once "
                      "(tl functions, no Python math on single values)")
    return "right from -10^4 to 10^4 and as the epilogue of a fused linear layer"
