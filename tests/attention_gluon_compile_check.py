"""Compile course.attention_gluon's kernel for Hopper (sm_90) down to a cubin, with or without a GPU.

Gluon has no interpreter, so on a CPU this is the only check that the kernel builds on the installed
Triton. ``tests/test_attention_gluon.py`` runs it in a fresh process (one that has interpreted
kernels cannot compile Gluon). By hand, it also prints what was built:

    python tests/attention_gluon_compile_check.py
"""

import os
import sys
from pathlib import Path

os.environ["_COURSE_COMPILE_ONLY"] = "1"  # compile, not interpret: gl.max and the like are @jit functions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the course, from a checkout

from triton import compile as triton_compile  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402  (private: may move)

from course import attention_gluon  # noqa: E402

gl = attention_gluon.gl
VARIANTS = [(d, causal, lse, dtype) for d in attention_gluon.SHAPES for causal in (False, True)
            for lse, dtype in ((False, "bf16"), (True, "fp16"))]


def descriptor(rows, d, dtype):
    block = [1, 1, rows, d]
    layout = gl.NVMMASharedLayout.get_default_for(block, {"bf16": gl.bfloat16, "fp16": gl.float16}[dtype])
    return f"tensordesc<{dtype}{block},{layout!r}>"


def compile_variant(d, causal, lse, dtype):
    wgs, stages = attention_gluon.SHAPES[d]
    n = attention_gluon.BLOCK_N
    signature = {"q_desc": descriptor(64, d, dtype), "k_desc": descriptor(n, d, dtype),
                 "v_desc": descriptor(n, d, dtype), "o_desc": descriptor(64, d, dtype), "lse_ptr": "*fp32",
                 "qk_scale": "fp32", "H": "i32", "GROUP": "i32", "S_Q": "i32", "S_K": "i32", "num_tiles": "i32"}
    constants = dict(WGS=wgs, STAGES=stages, CAUSAL=causal, HAS_LSE=lse, PINGPONG=lse, OVERLAP=not (causal and not lse),
                     CONSUMER_REGS=attention_gluon.consumer_registers(wgs))
    signature.update({name: "constexpr" for name in constants})
    source = GluonASTSource(fn=attention_gluon.attention_kernel, signature=signature, constexprs=constants,
                            attrs={(4,): [["tt.divisibility", 16]]})
    return triton_compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})


if __name__ == "__main__":
    for d, causal, lse, dtype in VARIANTS[: int(sys.argv[1]) if len(sys.argv) > 1 else None]:
        kernel = compile_variant(d, causal, lse, dtype)
        ptx = kernel.asm["ptx"]
        print(f"d={d} causal={causal} lse={lse} {dtype}: {kernel.metadata.shared} B shared, "
              f"{ptx.count('wgmma.mma_async')} wgmma, {ptx.count('cp.async.bulk.tensor')} TMA copies, "
              f"cubin {len(kernel.asm['cubin'])} B, {kernel.metadata.num_warps} warps")
