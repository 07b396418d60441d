"""Start-up cost: loading the plugin imports no heavy third-party module a run may not need.

numpy (harness.cuda), cryptography (harness.hidden.bundle) and filelock (harness.native.cache)
come in through :mod:`harness._lazy` stand-ins on first use. A module that imports one of them
at the top again adds 50-300 ms to every pytest run, CUDA kata or not.
"""

from __future__ import annotations

import subprocess
import sys

from harness._lazy import LazyModule, lazy_module

HEAVY = ("numpy", "cryptography", "filelock", "jinja2", "jsonschema")
PLUGINS = (
    "harness.plugin",
    "harness.native.fixtures",
    "harness.cuda.fixtures",
    "harness.budgets",
    "harness.sandbox",
    "harness.hidden",
)


def test_loading_the_plugins_imports_no_heavy_module() -> None:
    code = (
        "import sys\n"
        f"for name in {PLUGINS!r}:\n"
        "    __import__(name)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out.strip() == "[]", f"imported at start-up: {out.strip()} (use harness._lazy)"


def test_a_lazy_module_imports_on_first_attribute_and_keeps_it() -> None:
    code = (
        "import sys\n"
        "from harness._lazy import lazy_module\n"
        "m = lazy_module('fractions')\n"
        "before = 'fractions' in sys.modules\n"
        "probe = hasattr(m, '__wrapped__')\n"  # inspect-style probes must not import
        "f = m.Fraction(1, 3)\n"
        "print(before, probe, 'fractions' in sys.modules, 'Fraction' in vars(m), f)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.split() == ["False", "False", "True", "True", "1/3"]


def test_a_lazy_module_is_a_module_that_is_never_rebound() -> None:
    stand_in = lazy_module("json")
    assert isinstance(stand_in, LazyModule) and repr(stand_in) == "<lazy module 'json'>"
    assert stand_in.dumps([1]) == "[1]"
    assert stand_in.dumps is sys.modules["json"].dumps  # the real function, cached
