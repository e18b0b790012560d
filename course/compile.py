"""The compiler's view: build a Triton kernel for an NVIDIA GPU on any machine, and read each stage.

Triton compiles in stages: Triton IR (``ttir``, what the kernel says), Triton GPU IR (``ttgir``, the
same with layouts: which thread holds which element), LLVM IR (``llir``), PTX (NVIDIA's virtual
assembly) and a cubin, whose machine code (SASS) ``nvdisasm`` prints. None of it needs a GPU: the
target is named, not detected. Arguments are given as for a launch, and specialised the way a
launch specialises them (a pointer or an int divisible by 16 is marked so; an int equal to 1
becomes a constant), so what you read is what the GPU would run::

    h100 = build(add_kernel, x, y, out, n, BLOCK_SIZE=1024)   # sm_90, an H100
    h100.show("ptx", "ld.global")                              # the loads, with a few lines around
    h100.count("sass", r"\\bLDG")                               # how many global loads in the SASS
    h100.resources()                                           # registers per thread, spills
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
from pathlib import Path

import torch
import triton

from course import runtime  # noqa: F401  (decides GPU or interpreter first)

STAGES = ("ttir", "ttgir", "llir", "ptx", "sass")
_LOCATION = re.compile(r" loc\((?:[^()]|\([^()]*\))*\)")  # an MLIR operation's source location
H100 = 90  # compute capability 9.0: Hopper (H100, H200)

_TORCH_TO_TRITON = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
                    torch.int8: "i8", torch.uint8: "u8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
                    torch.bool: "i1"}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        _TORCH_TO_TRITON[getattr(torch, _name)] = "fp8e4nv" if "e4m3" in _name else "fp8e5"


@dataclasses.dataclass
class Build:
    """A kernel compiled for one GPU: the text of each stage, and a few ways to read it."""

    name: str
    arch: int
    asm: dict

    def text(self, stage: str) -> str:
        """The whole text of ``stage`` (one of :data:`STAGES`)."""
        if stage not in STAGES:
            raise ValueError(f"stage {stage!r}: choose one of {', '.join(STAGES)}")
        if stage == "sass" and "sass" not in self.asm:  # disassembled once, on first use
            self.asm["sass"] = self._run_tool("nvdisasm", ["-c"])
        return self.asm[stage]

    def count(self, stage: str, pattern: str) -> int:
        """How many lines of ``stage`` match the regular expression ``pattern``."""
        regex = re.compile(pattern)
        return sum(bool(regex.search(line)) for line in self.text(stage).splitlines())

    def show(self, stage: str, pattern: str | None = None, *, context: int = 2, most: int = 40,
             width: int = 150) -> None:
        """Print ``stage``: its first ``most`` lines, or the lines matching ``pattern`` with
        ``context`` lines around each (at most ``most`` lines in all, each cut at ``width``), without
        the MLIR stages' source locations (`` loc(#loc12)``)."""
        lines = self.text(stage).splitlines()
        if pattern is None:
            keep = list(range(min(most, len(lines))))
        else:
            regex = re.compile(pattern)
            hits = [i for i, line in enumerate(lines) if regex.search(line)]
            if not hits:
                print(f"({stage} of {self.name}: no line matches {pattern!r})")
                return
            keep = sorted({j for i in hits for j in range(max(0, i - context), min(len(lines), i + context + 1))})
        shown, previous = 0, None
        for i in keep:
            if shown >= most:
                print(f"  … ({len(keep) - shown} more lines)")
                break
            if previous is not None and i != previous + 1:
                print("  …")
            line = _LOCATION.sub("", lines[i])  # source locations: noise here, and they move between versions
            print(line if len(line) <= width else line[:width - 2] + " …")
            shown, previous = shown + 1, i

    def outline(self, stage: str, events: dict, *, most: int = 60) -> str:
        r"""The order in which ``stage``'s lines match ``events`` ({label: regular expression}), runs of
        one event collapsed (``"wgmma ×8 → wait 0 → exp2 ×34"``): how the kernel interleaves its
        work. A label may hold ``{0}``, filled with the expression's first group. At most ``most`` runs::

            build.outline("ptx", {"wgmma": r"wgmma\.mma_async", "wait {0}": r"wgmma\.wait_group\S* (\d+)"})
        """
        compiled = [(label, re.compile(pattern)) for label, pattern in events.items()]
        runs: list = []
        for line in self.text(stage).splitlines():
            for label, regex in compiled:
                hit = regex.search(line)
                if hit:
                    name = label.format(*hit.groups())
                    if runs and runs[-1][0] == name:
                        runs[-1][1] += 1
                    else:
                        runs.append([name, 1])
                    break
        shown = [f"{name} ×{n}" if n > 1 else name for name, n in runs[:most]]
        return " → ".join(shown) + (f" → … ({len(runs) - most} more)" if len(runs) > most else "")

    def summary(self) -> dict:
        """Counts of the instructions that tell a kernel's story, from the PTX: global loads and
        stores (and how wide), tensor-core instructions, asynchronous copies, shared memory."""
        ptx = self.text("ptx")
        patterns = {"global loads": r"\bld\.global", "global stores": r"\bst\.global",
                    "128-bit global loads": r"\bld\.global[\w.]*\.v4\.(b32|f32|u32)",
                    "tensor-core mma (sm_80 style)": r"\bmma\.sync", "tensor-core wgmma (Hopper)": r"\bwgmma\.mma_async",
                    "async copies (cp.async)": r"\bcp\.async\.(ca|cg)", "TMA copies": r"\bcp\.async\.bulk\.tensor",
                    "shared-memory loads": r"\bld\.shared|\bldmatrix"}
        counts = {name: len(re.findall(p, ptx)) for name, p in patterns.items()}
        counts["shared memory (bytes)"] = int(self.asm.get("shared", 0) or 0)
        return counts

    def resources(self) -> dict:
        """Registers per thread, and the bytes per thread spilled to local memory (the stack frame
        that holds what does not fit in registers), as the machine code records them
        (``cuobjdump --dump-resource-usage``)."""
        text = self._run_tool("cuobjdump", ["--dump-resource-usage"])
        found = {key: int(value) for key, value in re.findall(r"\b(REG|LOCAL|STACK):(\d+)", text)}
        return {"registers": found.get("REG", 0), "spilled bytes": found.get("STACK", 0) + found.get("LOCAL", 0)}

    def _run_tool(self, name: str, flags: list[str]) -> str:
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(self.asm["cubin"])
            f.flush()
            done = subprocess.run([_tool(name), *flags, f.name], capture_output=True, text=True, timeout=60)
        if done.returncode:
            raise RuntimeError(f"{name} failed on {self.name}: {done.stderr.strip()[:500]}")
        return done.stdout


def _tool(name: str) -> str:
    """CUDA's ``nvdisasm`` or ``cuobjdump``: the one inside the Triton wheel, else one on PATH."""
    shipped = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    tool = str(shipped) if shipped.exists() else shutil.which(name)
    if not tool:
        raise RuntimeError(f"no {name}: the Triton wheel ships one under triton/backends/nvidia/bin/; "
                           f"reinstall triton, or put CUDA's {name} on PATH")
    return tool


def _argument(name: str, value):
    """``(type, attributes, constant)`` of one launch argument, as a launch specialises it."""
    if isinstance(value, torch.Tensor):
        if value.dtype not in _TORCH_TO_TRITON:
            raise TypeError(f"build: argument {name} has dtype {value.dtype}, which Triton kernels do not take")
        aligned = value.data_ptr() % 16 == 0
        return "*" + _TORCH_TO_TRITON[value.dtype], aligned, None
    if isinstance(value, bool):
        return "i1", False, None
    if isinstance(value, int):
        if value == 1:
            return "constexpr", False, 1  # Triton turns an int equal to 1 into a constant
        kind = "i32" if -(2**31) <= value < 2**31 else "i64"
        return kind, value % 16 == 0, None
    if isinstance(value, float):
        return "fp32", False, None
    if value is None:
        return "constexpr", False, None
    if type(value).__name__ == "TensorDescriptor" and hasattr(value, "layout"):  # a Gluon kernel's TMA descriptor
        return f"tensordesc<{_TORCH_TO_TRITON[value.base.dtype]}{list(value.block_shape)},{value.layout!r}>", False, None
    raise TypeError(f"build: argument {name} is a {type(value).__name__}; pass what you would pass to the "
                    "kernel's launch (tensors, Gluon tensor descriptors, ints, floats, None)")


def build(kernel, *args, arch: int = H100, num_warps: int = 4, num_stages: int = 3, **constexprs) -> Build:
    """Compile ``kernel`` for an NVIDIA GPU of compute capability ``arch`` (90: H100) on this machine.

    ``args`` are the kernel's run-time arguments as you would launch it (tensors may live on the
    CPU: only their dtype and alignment matter); ``constexprs`` its ``tl.constexpr`` arguments.
    The build runs in a fresh Python process: Triton cannot compile in a process whose kernels it
    interprets, so a kernel defined in a notebook travels there as source, with the ``@triton.jit``
    functions and constants it uses. Gluon kernels (``@gluon.jit``) build the same way, their
    layouts passed as constexprs.
    """
    from triton.runtime.jit import JITFunction

    fn = getattr(kernel, "fn", None)
    if fn is None or not callable(fn):
        raise TypeError(f"build(kernel): pass a @triton.jit function, got {type(kernel).__name__}")
    jit = JITFunction(fn)  # only to read the signature: nothing is compiled here
    names = jit.arg_names
    constexpr_names = {names[i] for i in jit.constexprs}
    runtime_names = [n for n in names if n not in constexpr_names]
    if len(args) != len(runtime_names):
        raise TypeError(f"build({fn.__name__}): the kernel takes {len(runtime_names)} run-time arguments "
                        f"({', '.join(runtime_names)}), got {len(args)}")
    defaults = {p.name: p.default for p in jit.params
                if p.name in constexpr_names and p.default is not inspect.Parameter.empty}
    constexprs = {**defaults, **constexprs}
    missing = sorted(constexpr_names - set(constexprs))
    unknown = sorted(set(constexprs) - constexpr_names)
    if missing or unknown:
        raise TypeError(f"build({fn.__name__}): constexpr arguments {', '.join(missing) or '-'} missing, "
                        f"{', '.join(unknown) or '-'} unknown; its constexprs are {', '.join(sorted(constexpr_names))}")
    signature, constants, aligned = {}, {k: _encode(k, v) for k, v in constexprs.items()}, []
    for name, value in zip(runtime_names, args):
        kind, is_aligned, constant = _argument(name, value)
        signature[name] = kind
        if kind == "constexpr":
            constants[name] = constant
        elif is_aligned:
            aligned.append(names.index(name))
    signature = {n: signature.get(n, "constexpr") for n in names}
    job = {"name": fn.__name__, "signature": signature, "constexprs": constants, "aligned": aligned, "arch": arch,
           "options": {"num_warps": num_warps, "num_stages": num_stages}, **_where(kernel)}
    done = subprocess.run([sys.executable, "-c", _BUILDER, json.dumps(job)], capture_output=True, text=True,
                          timeout=600, env={**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
                                            "_COURSE_COMPILE_ONLY": "1", "PYTHONPATH": os.pathsep.join(sys.path)})
    if done.returncode:
        error = done.stderr.strip().splitlines()
        # the first exception line: with nested @jit calls, the innermost error (the reason) comes first
        start = next((i for i, line in enumerate(error)
                      if re.match(r"[\w.]*(Error|Exception|Construct)\w*(:|$)", line)), 0)
        kept = error[start:start + 30] + (["...", error[-1]] if len(error) > start + 30 else [])
        raise RuntimeError(f"building {fn.__name__} for sm_{arch} failed:\n" + "\n".join(kept))
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["cubin"] = base64.b64decode(result["cubin"])
    return Build(fn.__name__, arch, result)


def _encode(name: str, value):
    """A constexpr value as JSON: numbers, booleans, strings, None, a Triton dtype, lists of these,
    a Gluon layout (its class and fields) or a @triton.jit function (its module and name)."""
    import triton.language as tl

    value = getattr(value, "value", value) if isinstance(value, tl.constexpr) else value
    if isinstance(value, tl.dtype):
        return {"dtype": _tl_name(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_encode(name, v) for v in value]
    fn = getattr(value, "fn", None)
    if callable(fn) and getattr(fn, "__module__", None) not in (None, "__main__"):  # a @triton.jit function
        return {"function": [fn.__module__, fn.__name__]}
    if dataclasses.is_dataclass(value) and type(value).__module__.startswith("triton.experimental.gluon"):
        return {"layout": type(value).__name__,
                "fields": {f.name: _encode(name, getattr(value, f.name)) for f in dataclasses.fields(value)}}
    raise TypeError(f"build: constexpr {name}={value!r} must be a number, a bool, a string, None, a tl dtype, a "
                    "Gluon layout or a @triton.jit function of an importable module")


def _tl_name(dtype) -> str:
    import triton.language as tl

    return next(n for n in dir(tl) if getattr(tl, n) is dtype or (isinstance(getattr(tl, n), tl.dtype)
                                                                     and getattr(tl, n) == dtype))


def _where(kernel) -> dict:
    """How the build process finds ``kernel``: by import, or as source (for a notebook's kernel)."""
    module = kernel.fn.__module__
    if module not in ("__main__", None) and not module.startswith("__"):
        try:
            importlib.import_module(module)
            return {"module": module}
        except ImportError:
            pass
    return {"source": _source_with_dependencies(kernel)}


def _source_with_dependencies(kernel) -> str:
    """A module's text defining ``kernel``: its imports, the numbers and ``@triton.jit`` (or
    ``@gluon.jit``) functions it uses (recursively), then ``kernel`` itself."""
    import triton.language as tl

    header = ["import math", "import triton", "import triton.language as tl"]
    definitions: dict[str, str] = {}

    def visit(f):
        for name in _globals_read(f.__code__):
            if name in definitions or name not in f.__globals__:
                continue
            value = f.__globals__[name]
            if isinstance(value, types.ModuleType):
                if value.__name__ not in ("triton", "triton.language", "math"):
                    header.append(f"import {value.__name__} as {name}")
            elif isinstance(value, tl.constexpr) or isinstance(value, (bool, int, float)):
                inner = getattr(value, "value", value)
                text = f"tl.{_tl_name(inner)}" if isinstance(inner, tl.dtype) else repr(_encode(name, inner))
                definitions[name] = f"{name} = tl.constexpr({text})" if isinstance(value, tl.constexpr) else \
                    f"{name} = {text}"
            elif hasattr(value, "fn") and callable(value.fn) and hasattr(value, "arg_names"):
                if value.fn.__module__ in ("__main__", None):
                    definitions[name] = ""  # placeholder: breaks cycles
                    visit(value.fn)
                    definitions[name] = _jit_source(value)
                else:
                    header.append(f"from {value.fn.__module__} import {value.fn.__name__} as {name}")
            elif getattr(value, "__module__", "__main__") not in ("__main__", None, "builtins"):
                header.append(f"from {value.__module__} import {getattr(value, '__name__', name)} as {name}")
            else:
                raise TypeError(f"build: {f.__name__} uses {name}, a {type(value).__name__} defined in the "
                                "notebook; define it in a module, or pass it as an argument")

    visit(kernel.fn)
    body = [text for text in definitions.values() if text] + [_jit_source(kernel)]
    if any(text.startswith("@gluon.jit") for text in body):
        header.append("from triton.experimental import gluon")
    return "\n".join(header) + "\n\n" + "\n\n".join(body) + "\n"


def _globals_read(code) -> list[str]:
    """The global names a function reads (not the attribute names in ``co_names``: ``x.to(...)`` does
    not read a global ``to``), nested code included."""
    import dis

    names = [i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += _globals_read(const)
    return list(dict.fromkeys(names))


def source(kernel) -> str:
    """The source of a ``@triton.jit`` or ``@gluon.jit`` function (or a plain one), to read it in a
    notebook: ``print(source(gemm.gluon.producer))``."""
    return textwrap.dedent(inspect.getsource(getattr(kernel, "fn", kernel)))


def _jit_source(kernel) -> str:
    """A ``@triton.jit`` (or ``@gluon.jit``) function's source, under a plain decorator."""
    lines = source(kernel).splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def "))
    decorator = "@gluon.jit" if type(kernel).__name__ == "GluonJITFunction" else "@triton.jit"
    return decorator + "\n" + "\n".join(lines[start:])


# Runs in the build process: compile one kernel, print its stages as one line of JSON.
_BUILDER = r"""
import base64, importlib, json, sys, types
job = json.loads(sys.argv[1])
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
if "module" in job:
    kernel = getattr(importlib.import_module(job["module"]), job["name"])
else:
    module = types.ModuleType("notebook_kernels")
    module.__file__ = "<notebook>"
    import linecache
    linecache.cache["<notebook>"] = (len(job["source"]), None, job["source"].splitlines(True), "<notebook>")
    exec(compile(job["source"], "<notebook>", "exec"), module.__dict__)
    kernel = getattr(module, job["name"])
def decode(v):
    if isinstance(v, list):
        return [decode(x) for x in v]
    if isinstance(v, dict) and "dtype" in v:
        return getattr(tl, v["dtype"])
    if isinstance(v, dict) and "function" in v:
        return getattr(importlib.import_module(v["function"][0]), v["function"][1])
    if isinstance(v, dict) and "layout" in v:
        from triton.experimental.gluon import language as gl
        return getattr(gl, v["layout"])(**{k: decode(x) for k, x in v["fields"].items()})
    return v
constexprs = {k: decode(v) for k, v in job["constexprs"].items()}
attrs = {(i,): [["tt.divisibility", 16]] for i in job["aligned"]}
make_source = ASTSource
if type(kernel).__name__ == "GluonJITFunction":  # a Gluon kernel: its layouts need the module's warp count
    from triton.experimental.gluon._runtime import GluonASTSource as make_source
source = make_source(fn=kernel, signature=job["signature"], constexprs=constexprs, attrs=attrs)
compiled = triton.compile(source, target=GPUTarget("cuda", job["arch"], 32), options=job["options"])
asm = {k: v for k, v in compiled.asm.items() if isinstance(v, str)}
asm["cubin"] = base64.b64encode(compiled.asm["cubin"]).decode()
asm["shared"] = compiled.metadata.shared
print(json.dumps(asm))
"""
