"""Launching one compiled Triton kernel many times without ``kernel[grid](...)``'s per-call work.

Every ``kernel[grid](*args, **constexprs)`` binds the arguments, works out their specialization
(dtypes, 16-byte alignment, which integers are 1) and looks the compiled kernel up; a tensor
descriptor is encoded into a TMA descriptor on every launch. That is 20-40 us of host time, more
than a small GEMM's GPU time. A caller that knows nothing of that can change between calls
(``course.gemm.plans`` keys its plans by shapes, strides, dtypes and alignment) binds the kernel once
and launches the compiled binary directly::

    launch = BoundLaunch(kernel, (num_programs,), dict(BLOCK=128, num_warps=4))
    launch(x, y, n)   # the first call compiles (or loads) through kernel[grid]
    launch(x, y, n)   # later calls go straight to the compiled kernel's launcher
    launch.direct(x.data_ptr(), y.data_ptr(), n)  # the same, pointers as addresses; False: not launched

The arguments of each call must match the first call's specialization: the same dtypes, the same
16-byte alignment of every pointer, the same integers equal to 1 and divisible by 16, and tensor
descriptors of the same shape, strides and block. Under the interpreter, with a launch hook
installed (a profiler) or on a Triton whose launchers look different, every call goes through
``kernel[grid]``. The direct path reads the internals of Triton's CUDA launcher
(``triton/backends/nvidia/driver.py``), which changed in Triton 3.8: :data:`LAUNCHER_ABI` is the one
place that tells the two apart, and ``tests/gemm/test_launcher.py`` checks the path on the Triton in use.
"""

import torch
import triton
from triton.runtime import driver

from course import runtime

try:
    from triton.backends.nvidia import driver as _cuda_driver
except ImportError:  # pragma: no cover - no CUDA backend
    _cuda_driver = None


def _launcher_abi(module) -> str | None:
    """Which of the two CUDA launchers this Triton has (the one place this module tells them apart):
    - "3.6": a C function compiled per kernel, its arguments spread out after the scratch pointers, the
      packed metadata, the launch metadata and the hooks; ``make_tensordesc_arg(desc, metadata)``.
    - "3.8" (Triton 3.8 and 3.9): one C function for every kernel; after the packed metadata, the launch
      metadata, the hooks, the scratch pointers and the arguments' annotations and signature, the
      kernel's arguments in one tuple; ``make_tensordesc_arg(desc, metadata, launch_args)``.
    None for any other (every call then goes through ``kernel[grid]``)."""
    if module is None or not hasattr(module, "make_tensordesc_arg"):
        return None
    if hasattr(module, "annotate_arguments") and hasattr(module, "make_kernel_signature"):
        return "3.8"
    return "3.6" if getattr(module, "_BASE_ARGS_FORMAT", None) == "iiiKKppOOOOOO" else None


LAUNCHER_ABI = _launcher_abi(_cuda_driver)

_RUNTIME_KNOBS = triton.knobs.runtime  # where Triton keeps the launch hooks (read on every launch)
_MAPS_PER_DESCRIPTOR = 16  # encoded TMA descriptors kept per descriptor argument, one per base address


class BoundLaunch:
    """``kernel[grid](*args, **options)`` for one specialization, launched directly after the first call.

    ``options``: the kernel's constexpr parameters and launch options (``num_warps``, ``num_stages``).
    The kernel's constexpr parameters must come after all of its runtime ones.
    """

    def __init__(self, kernel, grid: tuple, options: dict):
        self.kernel = kernel
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.options = options
        self.compiled = None  # the CompiledKernel, once the first call has made it
        self.device = None  # the device it was compiled for (the current one at the first call)
        self._constexprs = ()  # the values the launcher expects after the runtime arguments
        self._raw = None  # the launcher's C function, where this Triton's launcher is as expected
        self._fixed = ()  # what the launcher takes between the stream and the kernel's arguments
        self._descriptors = ()  # (position, metadata, {base address: encoded arguments}) per descriptor
        self._prepared = {}  # the arguments with their descriptors encoded, per tuple of integers (see _prepare)

    def __call__(self, *args):
        if self.direct(*args):
            return
        compiled = self.compiled
        if compiled is None or self._current_device() != self.device or _hooks_installed():
            self._first(args)
            return
        # a launcher this module does not know: its own run(), which binds nothing but encodes descriptors
        compiled.run(*self.grid, self._current_stream(self.device), compiled.function, compiled.packed_metadata,
                     None, None, None, *args, *self._constexprs)

    def direct(self, *args) -> bool:
        """Launch through the compiled kernel's C launcher and return True, or return False having
        launched nothing where ``self(*args)`` must go through Triton: before the first call, on
        another device, with a launch hook installed or with a launcher not as expected. Pointer
        arguments may be given as addresses (``t.data_ptr()``): the launcher then skips its own
        ``data_ptr()`` call and driver query for each. So may tensor descriptors, by the address of
        the tensor they describe, laid out as the first call's (see ``takes_tensors``)."""
        raw = self._raw  # set at the first call where this Triton's launcher is as expected
        device = self.device
        if raw is None or self._current_device() != device or _hooks_installed():
            return False
        if self._descriptors:
            try:
                args = self._prepared[args]
            except (KeyError, TypeError):  # not kept yet, or unhashable (a tensor descriptor): never kept
                args = self._prepare(args)
        if LAUNCHER_ABI == "3.6":
            raw(*self.grid, self._current_stream(device), *self._fixed, *args, *self._constexprs)
        else:
            raw(*self.grid, self._current_stream(device), *self._fixed, (*args, *self._constexprs))
        return True

    def _prepare(self, args) -> tuple:
        """``args`` with each tensor descriptor encoded (``_encoded``), kept for the next call with the
        same ``args`` where every one is an integer (a route's call: addresses, sizes, strides), for the
        last 16 such tuples: a call replayed on the same tensors then skips the per-descriptor work,
        up to 0.9 us a call for three descriptors (``notes/gemm-decisions.md``, "Host time"). Tuples
        that hold a tensor or a descriptor are not kept: nothing here keeps a tensor alive."""
        encoded = tuple(self._encoded(args))
        if all(type(arg) is int for arg in args):
            if len(self._prepared) >= _MAPS_PER_DESCRIPTOR:
                self._prepared.clear()
            self._prepared[args] = encoded
        return encoded

    def _encoded(self, args) -> list:
        """``args`` with each tensor descriptor (or the tensor, or the address, it describes) replaced by
        the launcher's arguments for it, encoded once per base address."""
        final = []
        start = 0
        for position, metadata, maps, template in self._descriptors:
            if position > start:
                final += args[start:position]
            arg = args[position]
            if type(arg) is int:  # the described tensor's address
                ptr, base = arg, None
            elif isinstance(arg, torch.Tensor):
                ptr, base = arg.data_ptr(), arg
            else:  # a descriptor: its tensor
                base = arg.base
                ptr = base.data_ptr()
            encoded = maps.get(ptr)
            if encoded is None:
                encoded = _encode(rebased(template, base if base is not None else _Address(ptr)), metadata)
                if len(maps) >= _MAPS_PER_DESCRIPTOR:
                    maps.clear()
                maps[ptr] = encoded
            final += encoded
            start = position + 1
        final += args[start:]
        return final

    def _first(self, args):
        compiled = self.kernel[self.grid](*args, **self.options)
        if runtime.INTERPRET or not all(hasattr(compiled, name) for name in ("run", "function", "packed_metadata")):
            return  # keep launching through kernel[grid]
        params = self.kernel.params
        later = params[len(args):]
        if any(p.is_constexpr for p in params[:len(args)]) or not all(
                p.is_constexpr and p.name in self.options for p in later):
            return  # constexprs between runtime parameters, or defaults left out: not bound
        self._constexprs = tuple(self.options[p.name] for p in later)
        # driver.active is a proxy that resolves each attribute: keep the two functions a launch needs (for
        # the device, torch's C getter: torch.cuda.current_device() adds a lazy-init check, and CUDA is up)
        self._current_device = getattr(torch._C, "_cuda_getDevice", None) or driver.active.get_current_device
        self._current_stream = driver.active.get_current_stream
        self.device = self._current_device()
        self.compiled = compiled
        self._raw, self._fixed, self._descriptors = _raw_launcher(compiled, args)
        self._prepared = {}

    @property
    def takes_tensors(self) -> bool:
        """Whether a call may pass, in place of each tensor descriptor, the tensor it describes
        (laid out as the first call's; the encoded descriptor comes from this launch's cache)."""
        return self._raw is not None


class _Address:
    """A tensor's address where a descriptor's encoding asks for its tensor (only ``data_ptr()`` is read)."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    def data_ptr(self) -> int:
        return self.ptr


def _raw_launcher(compiled, args) -> tuple:
    """``(raw, fixed, descriptors)``: the C launch function under the ``CudaLauncher`` of ``compiled``,
    the arguments it takes between the stream and the kernel's own (the function handle first), and per tensor
    descriptor argument its position, its TMA metadata, an empty cache of encodings and the first
    call's descriptor without its tensor (a template for the others). ``raw`` is None where the
    launcher is not as expected, or needs scratch memory (or a sanitizer's state) per launch."""
    launcher = compiled.run
    none = (None, (), ())
    needed = ("launch", "launch_cooperative_grid", "launch_pdl", "global_scratch_size", "profile_scratch_size")
    needed += ("arg_annotations", "kernel_signature") if LAUNCHER_ABI == "3.8" else ()
    if LAUNCHER_ABI is None or not all(hasattr(launcher, name) for name in needed):
        return none
    if launcher.global_scratch_size or launcher.profile_scratch_size or getattr(launcher, "gsan_enabled", False):
        return none
    # after the grid and stream: the function, cooperative launch, PDL, then (none: _hooks_installed is checked per
    # call) the scratch pointers, the launch metadata and the two hooks, in the order of this Triton's launcher
    coop, pdl, packed = launcher.launch_cooperative_grid, launcher.launch_pdl, compiled.packed_metadata
    if LAUNCHER_ABI == "3.6":
        fixed = (compiled.function, coop, pdl, None, None, packed, None, None, None)
    else:
        fixed = (compiled.function, coop, pdl, packed, None, None, None, None, None, launcher.arg_annotations,
                 launcher.kernel_signature)
    launch = launcher.launch
    descriptors = ()
    cells = dict(zip(getattr(getattr(launch, "__code__", None), "co_freevars", ()), launch.__closure__ or ())) \
        if hasattr(launch, "__closure__") else {}
    if cells:  # wrapped by wrap_handle_tensordesc: the kernel takes tensor descriptors
        try:
            launch = cells["launcher"].cell_contents
            metadata = cells["tensordesc_meta"].cell_contents
            if LAUNCHER_ABI == "3.6":
                positions = sorted(cells["tensordesc_indices"].cell_contents)
            else:  # {position: {}} where descriptors are plain arguments, deeper where inside a tuple
                paths = cells["relevant_paths"].cell_contents
                positions = None if any(paths.values()) else sorted(paths)
        except KeyError:
            return none
        if positions is None or len(metadata) != len(positions) or any(m is None for m in metadata):
            return none  # nested, or descriptors passed as pointer, shape and strides: not cached
        descriptors = tuple((p, m, {}, rebased(args[p], None)) for p, m in zip(positions, metadata))
    return launch, fixed, descriptors


def _encode(desc, metadata) -> list:
    """The launcher's arguments for the host tensor descriptor ``desc`` (its TMA descriptor, shape, strides)."""
    encode = _cuda_driver.make_tensordesc_arg
    return encode(desc, metadata) if LAUNCHER_ABI == "3.6" else encode(desc, metadata, ())


def _hooks_installed() -> bool:
    """Whether a launch hook (a profiler's) is installed: Triton keeps them in chains, empty by default."""
    try:  # two chains, read on every launch
        return bool(_RUNTIME_KNOBS.launch_enter_hook.calls or _RUNTIME_KNOBS.launch_exit_hook.calls)
    except AttributeError:  # a hook set in place of a chain, or None
        enter, leave = _RUNTIME_KNOBS.launch_enter_hook, _RUNTIME_KNOBS.launch_exit_hook
        return bool((enter is not None and getattr(enter, "calls", True)) or
                    (leave is not None and getattr(leave, "calls", True)))


def rebased(desc, t):
    """The tensor descriptor ``desc`` describing ``t`` instead of ``desc.base``; ``t`` must be laid
    out as that was (shape, strides, dtype, 16-byte alignment), whose checks this skips. Plans keep
    their descriptors with ``t=None``, so as not to keep tensors alive, and rebase them per call.

        >>> from triton.tools.tensor_descriptor import TensorDescriptor
        >>> d = TensorDescriptor(torch.empty(64, 32, dtype=torch.float16, device="meta"), [64, 32], [32, 1], [16, 16])
        >>> rebased(d, None).base is None, rebased(d, None).block_shape
        (True, [16, 16])
    """
    new = object.__new__(type(desc))
    new.__dict__.update(desc.__dict__)
    new.base = t
    return new
