"""Loads a generated module and launches its kernels: compiled by Triton for CUDA
tensors, run by Triton's interpreter for CPU tensors (no environment variable needed)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import linecache
import os
import tempfile
import threading
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, TypeAlias

from ..bounded import LRU, TableInfo
from .codegen import CHECKED_VALUES, Artifact

if TYPE_CHECKING:  # (torch is imported when first needed: loading a module needs no torch)
    import torch

# a device as torch.device() takes it: a device, "cuda:1", or a CUDA device index
DeviceLike: TypeAlias = "torch.device | str | int"

# entries per table of a launcher when its function gives no size (croqtile.runtime.lru's default)
DEFAULT_SIZE = 256

# Held while Triton's interpreter runs a kernel (see Launcher._on_cpu): the interpreter
# changes process-wide state for the duration of a launch -- it patches the members of
# ``triton.language`` for the kernel, replaces its builder's options, and croqtile swaps
# ``JITFunction.__call__`` (see ``_interpreting``) -- so two interpreted launches in
# different threads would see each other's patches. Reentrant: an interpreted kernel may
# call a jitted helper, which goes through the same path.
_LOCK = threading.RLock()


class KernelError(RuntimeError):
    """Triton could not compile or run a generated kernel; the message names the kernel
    and the Croqtile source it came from."""


class DeviceAssertionError(KernelError):
    """A run-time check of a kernel compiled with ``debug=True`` failed (on CPU tensors,
    where Triton's interpreter runs it): the message names the Croqtile file:line, the
    access and, where the check has them, the offending values."""


def load_module(artifact: Artifact, cache_dir: Path) -> ModuleType:
    """Write the artifact's source to the cache (content-addressed) and import it.

    Triton reads kernel source through ``inspect``, so the module must live in a file.
    Threads and processes sharing the cache may load the same artifact at once: the file
    is published whole (``publish``), so the import reads a complete module."""
    digest = hashlib.sha256(artifact.source.encode()).hexdigest()[:20]
    path = cache_dir / f"{artifact.function}_{digest}.py"
    if not _holds(path, artifact.source):
        publish(path, artifact.source)
    spec = importlib.util.spec_from_file_location(f"croqtile_gen_{digest}", path)
    if spec is None or spec.loader is None:  # pragma: no cover - file just written
        raise ImportError(f"cannot load generated module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def publish(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: into a temporary file of a name no other
    thread or process uses, then renamed over ``path``. A reader sees the old file or
    the new one, never a part; concurrent writers of the same text all succeed."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _holds(path: Path, text: str) -> bool:
    """Whether ``path`` exists with ``text`` (one left incomplete by an older croqtile,
    whose concurrent writers could publish a part, is written again)."""
    try:
        return path.read_text() == text
    except (OSError, UnicodeDecodeError):
        return False


class _KernelState:
    """What a launcher remembers of one kernel: the kernel itself, its interpreted form
    (CPU), the stage count and options a GPU launch settled on, and the compiled kernel
    of each specialisation launched (see ``_specialisation``), launched without Triton's
    per-call argument binding."""

    __slots__ = ("kernel", "interpreted", "plan", "compiled")

    def __init__(self, kernel: Any, compiled: LRU[tuple[Any, ...], Any]) -> None:
        self.kernel = kernel
        self.interpreted: Any = None
        self.plan: tuple[int, dict[str, Any]] | None = None
        self.compiled = compiled


def _globals_of(kernel: Any) -> Any:
    return getattr(getattr(kernel, "fn", None), "__globals__", None)


def forget_module(module: ModuleType) -> None:
    """Drop the process-wide records of a generated module's functions: Triton's
    interpreter keeps every function it rewrote in a class-level table (never emptied),
    and ``linecache`` the module's source lines."""
    names = vars(module)
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - Triton is a dependency
        table: dict[Any, Any] = {}
    else:
        table = InterpretedFunction.rewritten_fn
    for fn in [f for f in list(table) if getattr(f, "__globals__", None) is names]:
        table.pop(fn, None)
    path = getattr(module, "__file__", None)
    if path:
        linecache.cache.pop(path, None)


class Launcher:
    """Callable handed to the generated host function as ``launch``.

    A GPU launch is one ``kernel[grid](...)`` call with the kernel's remembered stage
    count: no per-call imports, dictionaries or retry loop. Failures cost more: shared
    memory overflow retries with fewer stages, anything else becomes a ``KernelError``."""

    def __init__(self, cache_size: int = DEFAULT_SIZE) -> None:
        # by id of a kernel: what its launches remember (the entry holds the kernel, so
        # its id is not reused while the entry lives)
        self._kernels: LRU[int, _KernelState] = LRU(cache_size)
        self.cache_size = cache_size
        self.launches = 0

    def _state(self, kernel: Any) -> _KernelState:
        state = self._kernels.get(id(kernel))
        if state is None or state.kernel is not kernel:
            state = _KernelState(kernel, LRU(self.cache_size))
            self._kernels[id(kernel)] = state
        return state

    def forget(self, module: ModuleType) -> None:
        """Drop what was remembered for the kernels of a generated module that is no
        longer used (evicted from its function's table): the launch plans here, the
        interpreter's rewritten functions and the source lines ``inspect`` read."""
        names = vars(module)
        self._kernels.drop_if(lambda _, state: _globals_of(state.kernel) is names)
        forget_module(module)

    def info(self) -> TableInfo:
        """The statistics of the table of kernels."""
        return self._kernels.info()

    def __call__(self, kernel: Any, grid: tuple[int, ...], args: tuple[Any, ...], *,
                 num_warps: int, num_stages: int, device: Any) -> None:
        self.launches += 1
        if grid and min(grid) <= 0:
            return  # an empty grid launches nothing (zero-sized dimension)
        if getattr(device, "type", None) != "cuda":
            self._on_cpu(kernel, grid, args)
            return
        state = self._state(kernel)
        if not _ALLOCATOR_SET.get():  # (a thread's first launch)
            _ensure_allocator()
        current = _current_device()
        index = device.index
        if index is not None and index != current:
            # the tensors' device, not the current one: Triton compiles and launches for
            # the current device, on its current stream
            with _select_device(index):
                self._on_gpu(state, grid, args, num_warps, num_stages, index)
            return
        self._on_gpu(state, grid, args, num_warps, num_stages, current)

    def _on_gpu(self, state: _KernelState, grid: tuple[int, ...], args: tuple[Any, ...],
                num_warps: int, num_stages: int, device_index: int) -> None:
        """A launch on the current device, ``device_index``, and its current stream."""
        kernel = state.kernel
        key = (device_index,) + _specialisation(args)
        compiled = state.compiled.get(key)
        if compiled is not None:
            try:
                _launch_compiled(compiled, grid, args, device_index)
            except Exception as exc:
                raise _kernel_error(kernel, exc) from exc
            return
        if state.plan is None:
            compiled = self._first_gpu_launch(state, grid, args, num_warps, num_stages)
        else:
            stages, extra = state.plan
            try:
                compiled = kernel[grid](*args, num_warps=num_warps, num_stages=stages, **extra)
            except Exception as exc:
                compiled = self._recover(state, grid, args, num_warps, stages, extra, exc)
        if compiled is not None and hasattr(compiled, "run"):
            state.compiled[key] = compiled

    def compiled_for(self, kernel: Any, args: tuple[Any, ...], device_index: int) -> Any:
        """The compiled kernel a GPU launch of ``kernel`` with ``args`` on device
        ``device_index`` ran (None before one did)."""
        state = self._kernels.peek(id(kernel))
        if state is None or state.kernel is not kernel:
            return None
        return state.compiled.peek((device_index,) + _specialisation(args))

    def stages(self, kernel: Any, num_stages: int) -> int:
        """The stage count ``kernel`` launches with: the one a GPU launch settled on (fewer
        than the codegen's when its pipeline did not fit in shared memory), else
        ``num_stages``."""
        state = self._kernels.peek(id(kernel))
        plan = state.plan if state is not None and state.kernel is kernel else None
        return plan[0] if plan is not None else num_stages

    def sm_count(self, device: DeviceLike) -> int:
        """Streaming multiprocessors of ``device`` (persistent grids size themselves by
        it); 4 for a CPU device, where Triton's interpreter runs the programs."""
        return sm_count(device)

    def stream_k_buffers(self, device: DeviceLike, floats: int,
                         counters: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The f32 workspace and zeroed int32 counters of a stream-K launch (see
        ``stream_k_buffers`` below)."""
        return stream_k_buffers(device, floats, counters)

    def descriptor(self, tensor: Any, shape: tuple[int, ...], strides: tuple[int, ...],
                   block: tuple[int, ...]) -> Any:
        """A tensor descriptor made on the host (compile option ``descriptors="host"``):
        passed as an argument, it saves each program building its own. For a CUDA tensor
        it is remembered by address, type, shape, strides and block (all a descriptor
        holds), so a warm call makes none."""
        if not tensor.is_cuda:  # the interpreter reads the tensor itself
            return _tensor_descriptor()(tensor, list(shape), list(strides), list(block))
        key = (tensor.data_ptr(), tensor.dtype, shape, strides, block)
        desc = _DESCRIPTORS.get(key)
        if desc is None:
            desc = _tensor_descriptor()(_Address(key[0], tensor.dtype), list(shape),
                                        list(strides), list(block))
            desc.specialisation = ("desc", tensor.dtype, tuple(block), desc.padding)
            _DESCRIPTORS[key] = desc
        return desc

    def _first_gpu_launch(self, state: _KernelState, grid: tuple[int, ...], args: tuple[Any, ...],
                          num_warps: int, num_stages: int) -> Any:
        """The first launch of a kernel: work out the launch options once, launch with
        the codegen's stage count and remember what worked."""
        kernel = state.kernel
        # a kernel in debug mode (it checks assertions) would also trap on integer
        # overflow, which wraps in Croqtile as in C
        debug = bool(getattr(kernel, "debug", False))
        extra: dict[str, Any] = {"sanitize_overflow": False} if debug else {}
        try:
            compiled = kernel[grid](*args, num_warps=num_warps, num_stages=num_stages, **extra)
        except Exception as exc:
            return self._recover(state, grid, args, num_warps, num_stages, extra, exc)
        state.plan = (num_stages, extra)
        return compiled

    def _recover(self, state: _KernelState, grid: tuple[int, ...], args: tuple[Any, ...],
                 num_warps: int, stages: int, extra: dict[str, Any], exc: Exception) -> Any:
        """After a failed launch: when the pipeline's buffers did not fit in shared
        memory, retry with fewer stages and remember the number that fits; otherwise (or
        when one stage does not fit either) raise ``KernelError``."""
        from triton.runtime.errors import OutOfResources

        kernel = state.kernel
        while isinstance(exc, OutOfResources) and stages > 1:
            stages -= 1
            try:
                compiled = kernel[grid](*args, num_warps=num_warps, num_stages=stages, **extra)
            except Exception as again:
                exc = again
                continue
            state.plan = (stages, extra)
            return compiled
        raise _kernel_error(kernel, exc) from exc

    def _on_cpu(self, kernel: Any, grid: tuple[int, ...], args: tuple[Any, ...]) -> None:
        """Run the kernel's programs in Triton's interpreter."""
        try:
            _check_interpreter_numpy()
            # one interpreted launch at a time in the process (see _LOCK)
            with _LOCK, _interpreting(debug=bool(getattr(kernel, "debug", False))):
                state = self._state(kernel)
                if state.interpreted is None:
                    from triton.runtime.interpreter import InterpretedFunction

                    state.interpreted = InterpretedFunction(kernel.fn)
                state.interpreted[grid](*args)
        except Exception as exc:
            failed = _failed_assertion(kernel, exc)
            if failed is not None:
                raise failed from None
            raise _kernel_error(kernel, exc) from exc


class PlannedLauncher:
    """The launcher of one warm call signature's host function (``croqtile.runtime``'s
    launch plans): it remembers the compiled kernel of each GPU launch the host makes and
    launches it directly the next time, without working out Triton's specialisation of
    the arguments. Valid only for calls whose arguments have the signature (types,
    shapes, strides, device) and 16-byte alignment of the call that made the plan: the
    holder of the plan keys it on them. A launch is known by its place among the call's
    launches and its kernel (a host that launches one kernel twice, with arguments of
    other kinds, has a compiled kernel for each). Anything else (the first launch of a
    kernel, a CPU launch, another current device) goes through ``base``."""

    __slots__ = ("base", "compiled", "position")

    def __init__(self, base: Launcher) -> None:
        self.base = base
        # by (place among the call's launches, kernel): (device index, compiled kernel)
        self.compiled: dict[tuple[int, Any], tuple[int, Any]] = {}
        self.position = 0

    def begin(self) -> PlannedLauncher:
        """Start a call of the plan's host function (its launches counted from 0)."""
        self.position = 0
        return self

    def __call__(self, kernel: Any, grid: tuple[int, ...], args: tuple[Any, ...], *,
                 num_warps: int, num_stages: int, device: Any) -> None:
        place = (self.position, kernel)
        self.position += 1
        known = self.compiled.get(place)
        if known is not None and grid and min(grid) > 0 and known[0] == _current_device():
            self.base.launches += 1
            try:
                _launch_compiled(known[1], grid, args, known[0])
            except Exception as exc:
                raise _kernel_error(kernel, exc) from exc
            return
        self.base(kernel, grid, args, num_warps=num_warps, num_stages=num_stages,
                  device=device)
        index = getattr(device, "index", None)
        if getattr(device, "type", None) == "cuda" and grid and min(grid) > 0:
            index = _current_device() if index is None else index
            if index == _current_device():
                compiled = self.base.compiled_for(kernel, args, index)
                if compiled is not None:
                    self.compiled[place] = (index, compiled)

    def sm_count(self, device: DeviceLike) -> int:
        return self.base.sm_count(device)

    def stream_k_buffers(self, device: DeviceLike, floats: int,
                         counters: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.base.stream_k_buffers(device, floats, counters)

    def descriptor(self, tensor: Any, shape: tuple[int, ...], strides: tuple[int, ...],
                   block: tuple[int, ...]) -> Any:
        return self.base.descriptor(tensor, shape, strides, block)


def _failed_assertion(kernel: Any, exc: BaseException) -> DeviceAssertionError | None:
    """The error of a debug check that failed in the interpreter (which wraps the
    assertion in errors of its own), or None when ``exc`` is something else."""
    checked = getattr(getattr(kernel, "fn", None), "__globals__", {}).get(CHECKED_VALUES)
    cause: BaseException | None = exc
    while checked is not None and cause is not None:
        if isinstance(cause, AssertionError) and str(cause) in checked:
            return DeviceAssertionError(_failed_check(str(cause), checked[str(cause)],
                                                      cause.__traceback__))
        cause = cause.__cause__
    return None


def _failed_check(message: str, names: tuple[str, ...], tb: Any) -> str:
    """The message of a failed debug check, with the values the kernel's checked
    variables hold at the failing lanes (read from the interpreted kernel's frame)."""
    import numpy as np

    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    # the failing lanes: the condition Triton's interpreter asserted (its builder's frame)
    failing = None
    for frame in reversed(frames):
        condition = frame.f_locals.get("condition")
        if condition is not None and hasattr(condition, "data"):
            failing = ~np.asarray(condition.data, dtype=bool)
            break
    found: list[str] = []
    kernel_frame = next((f for f in reversed(frames) if any(n in f.f_locals for n in names)), None)
    if kernel_frame is not None and failing is not None:
        for name in names:
            value = kernel_frame.f_locals.get(name)
            handle = getattr(value, "handle", value)
            data = np.asarray(getattr(handle, "data", handle))
            try:
                bad = np.broadcast_to(data, failing.shape)[failing] if failing.ndim else data
            except ValueError:  # (a variable over fewer axes than the condition)
                continue
            found.extend(str(v) for v in np.unique(bad.ravel())[:8])
    if not found:
        return message
    return f"{message}; offending value(s): {', '.join(dict.fromkeys(found))}"


def _kernel_error(kernel: Any, exc: Exception) -> KernelError:
    name = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None),
                                                        "__name__", "kernel")
    return KernelError(f"croqtile: Triton failed on generated kernel '{name}' "
                       f"({type(exc).__name__}: {str(exc).strip()[:2000]}); the kernel's "
                       "source is in the function's .triton_source, with # file:line "
                       "comments pointing at the Croqtile statements")


_SM_COUNTS: dict[int, int] = {}
_CPU_SM_COUNT = 4  # programs the interpreter's "device" is treated as running at once


def sm_count(device: DeviceLike) -> int:
    """Streaming multiprocessors of a CUDA device, asked of the driver once per device
    index; ``_CPU_SM_COUNT`` for anything else."""
    import torch

    device = device if isinstance(device, torch.device) else torch.device(device)
    if device.type != "cuda":
        return _CPU_SM_COUNT
    given: int | None = device.index  # (torch's type information omits None: "cuda")
    index = given if given is not None else torch.cuda.current_device()
    count = _SM_COUNTS.get(index)
    if count is None:
        count = int(torch.cuda.get_device_properties(index).multi_processor_count)
        _SM_COUNTS[index] = count
    return count


def _specialisation(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """What Triton compiles a kernel variant for, per argument: a tensor's element type and
    16-byte alignment; an integer's equality to 1, divisibility by 16 and width (32 or 64
    bits, signed or not); constexpr values (bools, None) themselves; only the type of a
    float; a tensor descriptor's element type and block shape. Arguments with the same
    key run the same compiled kernel, so a launch whose key was seen skips Triton's
    binding of the arguments (most of a launch's Python cost)."""
    key: list[Any] = []
    desc = _tensor_descriptor()
    for arg in args:
        kind = type(arg)  # (the common kinds first: this runs on every launch)
        if kind is bool or arg is None:
            key.append(arg)
        elif kind is int:
            key.append(_int_key(arg))
        elif kind is desc:  # (not its shape and strides)
            known = getattr(arg, "specialisation", None)  # (set by Launcher.descriptor)
            key.append(known or ("desc", arg.base.dtype, tuple(arg.block_shape), arg.padding))
        elif hasattr(arg, "data_ptr"):
            key.append((arg.dtype, arg.data_ptr() % 16 == 0))
        elif isinstance(arg, int):
            key.append(_int_key(arg))
        elif isinstance(arg, float):
            key.append(float)
        else:  # anything else (never passed by generated code): by value
            key.append((type(arg), arg))
    return tuple(key)


def _int_key(arg: int) -> tuple[bool, ...]:
    """What Triton specialises an integer argument on: == 1, % 16, 32 or 64 bits, sign."""
    return (arg == 1, arg % 16 == 0, -2**31 <= arg < 2**31, arg >= 2**63)


class _Address:
    """What Triton reads of a descriptor's tensor: its address and element type. (A
    remembered descriptor then does not keep the tensor alive.)"""

    __slots__ = ("address", "dtype")

    def __init__(self, address: int, dtype: Any) -> None:
        self.address, self.dtype = address, dtype

    def data_ptr(self) -> int:
        return self.address


# host descriptors of CUDA tensors by (address, dtype, shape, strides, block)
_MAX_DESCRIPTORS = 4096
_DESCRIPTORS: LRU[tuple[Any, ...], Any] = LRU(_MAX_DESCRIPTORS)


@functools.cache
def _tensor_descriptor() -> type:
    from triton.tools.tensor_descriptor import TensorDescriptor

    descriptor: type = TensorDescriptor  # (Triton has no type information)
    return descriptor


@functools.cache
def _runtime() -> tuple[Any, Any]:
    """Triton's ``knobs`` and ``driver`` modules, imported once (a warm launch runs no
    import statement)."""
    from triton import knobs
    from triton.runtime import driver

    return knobs, driver


def _current_device() -> int:
    device: int = _runtime()[1].active.get_current_device()  # (Triton is untyped)
    return device


def _select_device(index: int) -> contextlib.AbstractContextManager[object]:
    """``torch.cuda.device(index)``: the block runs with that device current."""
    import torch

    return torch.cuda.device(index)


def device_scope(device: object) -> contextlib.AbstractContextManager[object]:
    """A context in which the CUDA device of ``device`` is current (Triton compiles,
    launches and times kernels there, on its current stream); nothing to do for another
    device type, an unindexed device or the current device."""
    index = getattr(device, "index", None)
    if getattr(device, "type", None) != "cuda" or index is None or index == _current_device():
        return contextlib.nullcontext()
    return _select_device(index)


def _launch_compiled(compiled: Any, grid: tuple[int, ...], args: tuple[Any, ...],
                     device_index: int) -> None:
    """Launch a compiled Triton kernel as ``JITFunction.run`` does once it has found it:
    on the current stream, with Triton's launch hooks (profilers) honoured."""
    knobs, driver = _runtime()
    stream = driver.active.get_current_stream(device_index)
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    enter = knobs.runtime.launch_enter_hook
    metadata = compiled.launch_metadata(grid3, stream, *args) if enter is not None else None
    run = compiled.run
    described = _DESCRIBED.get(id(run))
    if described is None or described[0] is not run:
        described = (run, _Described.of(run))
        _DESCRIBED[id(run)] = described
    if described[1] is not None:
        described[1].launch(run, grid3, stream, compiled, metadata, enter,
                            knobs.runtime.launch_exit_hook, args)
        return
    run(grid3[0], grid3[1], grid3[2], stream, compiled.function, compiled.packed_metadata,
        metadata, enter, knobs.runtime.launch_exit_hook, *args)


class _Described:
    """The launch of a compiled kernel that takes host tensor descriptors. Triton's
    launcher turns each descriptor into its CUDA tensor map (plus shape and strides) on
    every launch; the descriptors croqtile passes are remembered objects (see
    ``Launcher.descriptor``), so their expansions are remembered too and handed to
    Triton's launcher below that step."""

    def __init__(self, raw: Callable[..., Any], positions: list[int], metas: list[Any],
                 expand: Callable[[Any, Any], list[Any]]) -> None:
        self.raw, self.positions, self.metas, self.expand = raw, positions, metas, expand
        # (position, id of the descriptor) -> (the descriptor, its expansion)
        self.expanded: LRU[tuple[int, int], tuple[Any, list[Any]]] = LRU(DEFAULT_SIZE)

    @staticmethod
    def of(run: Any) -> _Described | None:
        """For Triton's CUDA launcher of a kernel with descriptor arguments (Triton 3.6:
        ``wrap_handle_tensordesc``), the launcher below it; None for any other."""
        inner = getattr(run, "launch", None)
        code, cells = getattr(inner, "__code__", None), getattr(inner, "__closure__", None)
        if code is None or not cells or bool(getattr(run, "global_scratch_size", 1)) \
                or bool(getattr(run, "profile_scratch_size", 1)):
            return None
        try:
            free = dict(zip(code.co_freevars, (cell.cell_contents for cell in cells)))
            from triton.backends.nvidia.driver import make_tensordesc_arg
        except (ValueError, ImportError):  # an empty cell; no CUDA backend
            return None
        raw, indices, metas = (free.get(n) for n in ("launcher", "tensordesc_indices",
                                                     "tensordesc_meta"))
        if not callable(raw) or not isinstance(indices, (set, frozenset)) or not indices \
                or not isinstance(metas, list) or len(metas) != len(indices):
            return None
        return _Described(raw, sorted(indices), metas, make_tensordesc_arg)

    def launch(self, run: Any, grid3: tuple[int, ...], stream: int, compiled: Any,
               metadata: Any, enter: Any, leave: Any, args: tuple[Any, ...]) -> None:
        final: list[Any] = []
        last = 0
        for position, meta in zip(self.positions, self.metas):
            final.extend(args[last:position])
            desc = args[position]
            known = self.expanded.get((position, id(desc)))
            if known is None or known[0] is not desc:
                known = self.expanded[(position, id(desc))] = (desc, self.expand(desc, meta))
            final.extend(known[1])
            last = position + 1
        final.extend(args[last:])
        self.raw(grid3[0], grid3[1], grid3[2], stream, compiled.function,
                 run.launch_cooperative_grid, run.launch_pdl, None, None,
                 compiled.packed_metadata, metadata, enter, leave, *final)


# by id of a compiled kernel's launcher: (the launcher, its _Described or None)
_DESCRIBED: LRU[int, tuple[Any, _Described | None]] = LRU(_MAX_DESCRIPTORS)


# device, stream (a thread on the CPU) -> (workspace, counters); the kernels leave the
# counters at zero
# (bounded: threads come and go, each with its own on the CPU)
_STREAM_K_BUFFERS: LRU[tuple[Any, int], tuple[Any, Any]] = LRU(64)


def stream_k_buffers(device: DeviceLike, floats: int,
                     counters: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scratch for stream-K launches on ``device``: at least ``floats`` f32 (partial
    tiles, written before they are read) and ``counters`` int32 zeros. The kernel that
    completes a tile sets its counter back to zero, so GPU counters are cleared once,
    when they are made; launches on one stream run in turn, and each stream has its own
    buffers. On the CPU the counters are cleared before every launch (an interpreted
    kernel that fails half-way leaves counts behind)."""
    import torch

    device = device if isinstance(device, torch.device) else torch.device(device)
    # (on the CPU, each thread has its own: the counters are cleared before a launch,
    # which must not happen while another thread's launch is counting)
    if device.type == "cuda":  # (Triton's raw-stream query: a C call, no Stream object)
        given: int | None = device.index  # (torch's type information omits None: "cuda")
        index = given if given is not None else _current_device()
        stream = _runtime()[1].active.get_current_stream(index)
    else:
        stream = threading.get_ident()
    key = (device, stream)
    buffers = _STREAM_K_BUFFERS.get(key)
    if buffers is None or buffers[0].numel() < floats or buffers[1].numel() < counters:
        if buffers is not None:
            floats, counters = max(floats, buffers[0].numel()), max(counters, buffers[1].numel())
        buffers = (torch.empty(floats, dtype=torch.float32, device=device),
                   torch.zeros(counters, dtype=torch.int32, device=device))
        _STREAM_K_BUFFERS[key] = buffers
    elif device.type != "cuda":
        buffers[1].zero_()
    return buffers


class _interpreting:
    """Lets ``@triton.jit`` helpers of ``triton.language`` (``tl.sum``...) run inside the
    interpreter although ``TRITON_INTERPRET`` was not set when Triton was imported."""

    def __init__(self, debug: bool = False) -> None:
        self.debug = debug

    def __enter__(self) -> None:
        from triton.runtime.interpreter import InterpretedFunction, interpreter_builder
        from triton.runtime.jit import JITFunction

        # device assertions are checked in debug mode only, which the interpreter takes
        # from its builder rather than from the kernel; integers wrap as in C, unchecked
        self.options = interpreter_builder.options
        if self.debug:
            interpreter_builder.options = replace(self.options, debug=True,
                                                  sanitize_overflow=False)

        self.saved: Callable[..., Any] = JITFunction.__call__

        def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
            # InterpretedFunction.__call__ patches triton.language for the callee and never
            # undoes it, which breaks later GPU compiles in the same process: restore here.
            from triton.runtime.interpreter import _patch_lang

            scope = _patch_lang(fn.fn)
            try:
                return InterpretedFunction(fn.fn).rewrite()(*args, **kwargs)
            finally:
                scope.restore()

        JITFunction.__call__ = call

    def __exit__(self, *exc: object) -> None:
        from triton.runtime.jit import JITFunction

        from triton.runtime.interpreter import interpreter_builder

        JITFunction.__call__ = self.saved
        interpreter_builder.options = self.options


@functools.cache
def _check_interpreter_numpy() -> None:
    """Triton 3.6's interpreter turns 1-element arrays into ints, which numpy 2.4 refuses.
    (Cached: the versions do not change while a process runs; a failure is not cached.)"""
    import numpy
    import triton

    def version(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in text.split(".")[:2] if p.isdigit())

    if version(triton.__version__) <= (3, 6) and version(numpy.__version__) >= (2, 4):
        raise RuntimeError(f"running on CPU tensors uses Triton's interpreter, which in triton "
                           f"{triton.__version__} needs numpy<2.4 (found {numpy.__version__}); "
                           "install 'numpy<2.4' or pass CUDA tensors")


# Triton keeps its allocator in a context variable: a thread started later begins without
# it. This flag lives in the same context, so it is unset exactly where Triton's is.
_ALLOCATOR_SET: ContextVar[bool] = ContextVar("croqtile_allocator_set", default=False)


def _ensure_allocator() -> None:
    """Tensor descriptors made inside kernels need scratch memory from the host."""
    if _ALLOCATOR_SET.get():
        return
    import torch
    import triton

    def alloc(size: int, alignment: int, stream: Any) -> Any:
        del alignment, stream
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(alloc)
    _ALLOCATOR_SET.set(True)
