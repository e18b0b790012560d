"""Compile course.gemm.gluon's kernel for Hopper (sm_90) down to a cubin, with or without a GPU.

Gluon has no interpreter, so on a CPU this is the only way to see that the kernel still builds
(Triton releases rename Gluon's functions; 3.9 did the TMA copies). ``tests/gemm/test_gluon.py`` runs it
in a fresh process: a process that has interpreted kernels cannot compile this one (the interpreter
leaves parts of ``triton.language`` in its own form). By hand, it also prints what was built:

    python tests/gemm/gluon_compile_check.py
    192x128 rows_along_M bf16 B row-major + bias: 229620 B shared, 12 wgmma, 11 TMA copies, cubin 129424 B, 16 warps
    ...
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the course, from a checkout

from triton import compile as triton_compile  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402  (private: may move)

from course.gemm import gluon as gluon_gemm  # noqa: E402

gl = gluon_gemm.gl
VARIANTS = [  # (name, tile, swap, b K-major, bias, dtype, CTAs): both tiles, orientations and B layouts
    ("192x128 rows_along_M bf16 B row-major + bias", (192, 128), False, False, True, "bf16", 1),
    ("192x128 rows_along_N fp16 B K-major", (192, 128), True, True, False, "fp16", 1),
    ("128x144 rows_along_M fp16 B row-major", (128, 144), False, False, False, "fp16", 1),
    ("128x144 rows_along_N bf16 B K-major + bias", (128, 144), True, True, True, "bf16", 1),
    ("128x320 rows_along_M bf16 B K-major + bias", (128, 320), False, True, True, "bf16", 1),
    ("128x320 rows_along_N fp16 B K-major", (128, 320), True, True, False, "fp16", 1),
]
if gluon_gemm.clusters_here():  # pairs of CTAs sharing B's tiles (Triton 3.9)
    VARIANTS += [
        ("pair 128x144 rows_along_M bf16 B K-major + bias", (128, 144), False, True, True, "bf16", 2),
        ("pair 128x144 rows_along_N bf16 B K-major", (128, 144), True, True, False, "bf16", 2),
        ("pair 128x320 rows_along_M fp16 B row-major", (128, 320), False, False, False, "fp16", 2),
        ("pair 192x128 rows_along_M bf16 B row-major + bias", (192, 128), False, False, True, "bf16", 2),
    ]


def descriptor(block, cga, dtype):
    layout = gluon_gemm.shared_layout(block, cga, dtype == "bf16")
    return f"tensordesc<{dtype}{block},{layout!r}>"


def compile_variant(tile, swap, y_kmajor, has_bias, dtype, ctas):
    blocks, constexprs = gluon_gemm.launch_shapes(tile, swap, y_kmajor, ctas)  # as matmul_wide launches it
    signature = {f"{name}_desc": descriptor(block, cga, dtype) for name, (block, cga) in blocks.items()}
    signature.update({"bias_ptr": "*fp32", "R": "i32", "Q": "i32", "K": "i32"})
    constants = {"NUM_SMS": 132 // ctas, "GROUP": 8, "HAS_BIAS": has_bias, **constexprs}
    signature.update({name: "constexpr" for name in constants})
    source = GluonASTSource(fn=gluon_gemm.wide_kernel, signature=signature, constexprs=constants,
                            attrs={(5,): [["tt.divisibility", 16]]})  # bias_ptr 16-byte aligned, as torch gives
    return triton_compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_ctas": ctas})


if __name__ == "__main__":
    for name, *variant in VARIANTS:
        kernel = compile_variant(*variant)
        ptx = kernel.asm["ptx"]
        print(f"{name}: {kernel.metadata.shared} B shared, {ptx.count('wgmma.mma_async')} wgmma, "
              f"{ptx.count('cp.async.bulk.tensor')} TMA copies, cubin {len(kernel.asm['cubin'])} B, "
              f"{kernel.metadata.num_warps} warps, {kernel.metadata.num_ctas} CTAs")
