"""Launch arguments, shared by both backends: In/Out/InOut wrappers, scalars, block and grid."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness._lazy import lazy_module
from harness.cuda.errors import LaunchError

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = [
    "ArrayArg",
    "In",
    "InOut",
    "Out",
    "check_scalar",
    "normalise_dims",
]

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)


class ArrayArg:
    """A numpy array passed to a pointer parameter; copied to the device and/or back."""

    copy_in = True
    copy_out = True

    def __init__(self, array: np.ndarray) -> None:
        if not isinstance(array, np.ndarray):
            raise TypeError(
                f"{type(self).__name__}() takes a numpy array, got {type(array).__name__}"
            )
        if self.copy_out and not array.flags.writeable:
            raise ValueError(f"{type(self).__name__}(): the array is read-only")
        self.array = array

    def __repr__(self) -> str:
        return f"{type(self).__name__}(array of {self.array.shape} {self.array.dtype})"


class In(ArrayArg):
    """Copied to the device before the launch."""

    copy_in = True
    copy_out = False


class Out(ArrayArg):
    """Copied back into the array after the launch (the device buffer starts zeroed)."""

    copy_in = False
    copy_out = True


class InOut(ArrayArg):
    """Copied in before and back after the launch."""

    copy_in = True
    copy_out = True


def normalise_dims(kernel: str, block: Any, grid: Any) -> tuple[tuple[int, int, int], ...]:
    """(block, grid) as 3-tuples of positive ints, within CUDA's limits, or LaunchError."""

    def three(name: str, value: Any, limits: tuple[int, int, int]) -> tuple[int, int, int]:
        if value is None:
            raise LaunchError(f"{kernel}: {name}= is required, e.g. {name}=(256, 1, 1)")
        seq: Sequence[Any] = (value,) if isinstance(value, int | np.integer) else value
        try:
            dims = [int(v) for v in seq]
        except (TypeError, ValueError):
            raise LaunchError(f"{kernel}: {name}={value!r} must be 1 to 3 integers") from None
        if not 1 <= len(dims) <= 3 or any(int(v) != v for v in seq):
            raise LaunchError(f"{kernel}: {name}={value!r} must be 1 to 3 integers")
        dims += [1] * (3 - len(dims))
        for axis, (d, lim) in enumerate(zip(dims, limits, strict=True)):
            if d < 1:
                raise LaunchError(f"{kernel}: {name}={value!r}: dimension {'xyz'[axis]} is {d}")
            if d > lim:
                raise LaunchError(
                    f"{kernel}: {name}={value!r}: dimension {'xyz'[axis]} is {d}, more than "
                    f"CUDA's limit of {lim}"
                )
        return dims[0], dims[1], dims[2]

    b = three("block", block, MAX_BLOCK)
    threads = b[0] * b[1] * b[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise LaunchError(
            f"{kernel}: block={block!r} has {threads} threads; a block has at most "
            f"{MAX_THREADS_PER_BLOCK}"
        )
    g = three("grid", grid, MAX_GRID)
    return b, g


def check_scalar(kernel: str, index: int, value: Any) -> np.generic:
    """A by-value argument as a numpy scalar; Python numbers and arrays are refused with advice."""
    if isinstance(value, np.generic):
        return value
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    if isinstance(value, np.ndarray):
        raise LaunchError(
            f"{kernel}: argument {index} is a numpy array; wrap it for a pointer parameter: "
            "cuda.In(a), cuda.Out(a) or cuda.InOut(a)"
        )
    if isinstance(value, bool | int | float):
        kind = "np.float32" if isinstance(value, float) else "np.int32"
        raise LaunchError(
            f"{kernel}: argument {index} is a Python {type(value).__name__} ({value!r}); pass a "
            f"numpy scalar of the parameter's C type, e.g. {kind}({value!r})"
        )
    raise LaunchError(
        f"{kernel}: argument {index} has type {type(value).__name__}; pass cuda.In/Out/InOut, a "
        "device array, or a numpy scalar"
    )
