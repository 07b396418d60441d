"""Build, cache, load and measure learner C/C++ code.

- `build_shared_library` / `build_executable`: gcc/g++ into a content-addressed cache.
- `build_cargo_cdylib`: a std-only Rust crate (cdylib, C ABI) with cargo into the same cache.
- `load`: cffi ABI-mode loading of a built library.
- `run_isolated`: run a function in a fresh interpreter (segfaults, sanitizers).
- `instruction_count`: deterministic callgrind instruction counts for budgets.
"""

from harness.native.build import (
    BuildError,
    BuildResult,
    build_executable,
    build_shared_library,
    compile_count,
)
from harness.native.callgrind import instruction_count
from harness.native.cargo import build_cargo_cdylib
from harness.native.isolate import NativeCrash, run_isolated, sanitizer_env
from harness.native.loader import NativeLibrary, declarations_from_header, load

__all__ = [
    "BuildError",
    "BuildResult",
    "NativeCrash",
    "NativeLibrary",
    "build_cargo_cdylib",
    "build_executable",
    "build_shared_library",
    "compile_count",
    "declarations_from_header",
    "instruction_count",
    "load",
    "run_isolated",
    "sanitizer_env",
]
