"""What several GEMM test files share: the GPU-only mark, the modes, random operands, the float64
reference, int8 cases with scales and bias, and shapes with a tail split. Imported as ``gemm_cases``
(``pythonpath`` in pyproject.toml's pytest section)."""

import pytest
import torch

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course.runtime import DEVICE, INTERPRET, pick

gpu = pytest.mark.skipif(INTERPRET, reason="needs a GPU (compiled kernels)")
MODES = ["persistent", "streamk", "auto"]


def reference(a, b, bias=None):
    ref = a.double().cpu() @ b.double().cpu()
    return ref if bias is None else ref + bias.double().cpu()


def randn(*shape, dtype=torch.float16):
    return torch.randn(*shape, device=DEVICE).to(dtype)


# A cut of C along rows ("m") and one along columns ("n") that tail_plan_for accepts here: on a GPU
# with the heuristic's 128 x 256 tiles (3000 rows: 22 rows of tiles fill 2 waves of 132 SMs), on
# the CPU with 16 x 16 tiles and 4 programs.
TAIL_CASES = pick(cpu={"m": (80, 64, 40), "n": (48, 80, 33)},
                  gpu={"m": (3000, 2984, 1048), "n": (512, 10232, 1048)})


def int8_case(M, N, K, k_major_b=True):
    """int8 a and b (b K-major or row-major), row and column scales, a bias, and the float64 result."""
    a = torch.randint(-127, 128, (M, K), dtype=torch.int8, device=DEVICE)
    b = (torch.randint(-127, 128, (N, K), dtype=torch.int8, device=DEVICE).T if k_major_b
         else torch.randint(-127, 128, (K, N), dtype=torch.int8, device=DEVICE))
    a_scale = torch.rand(M, device=DEVICE) / 64 + 1e-3
    b_scale = torch.rand(N, device=DEVICE) / 64 + 1e-3
    bias = torch.randn(N, device=DEVICE)
    ref = (a.cpu().long() @ b.cpu().long()).double() * a_scale.cpu().double()[:, None] \
        * b_scale.cpu().double()[None, :] + bias.cpu().double()
    return a, b, a_scale, b_scale, bias, ref
