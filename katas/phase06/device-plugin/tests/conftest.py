"""Fixtures of the device-plugin tests: your plugin, a simulated node and the kubelet stand-in,
wired over real gRPC on unix sockets in a fresh directory per test."""

from __future__ import annotations

import functools
import inspect
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import KataTodo

# gRPC's C core logs connection close-downs at INFO ("Got goaway"): noise in a test report.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

START_TIMEOUT = 5.0  # seconds for your start() to return
STOP_TIMEOUT = 3.0

RPCS = ("GetDevicePluginOptions", "ListAndWatch", "GetPreferredAllocation", "Allocate",
        "PreStartContainer")  # fmt: skip


@pytest.fixture(scope="module")
def dp(kata: Any) -> Any:
    """plugin.py (yours): every task."""
    return kata.module("plugin")


@pytest.fixture(scope="module")
def nodes(kata: Any) -> Any:
    """node.py (given): Node, Gpu, pcie_node(), custom_node()."""
    return kata.module("node")


@pytest.fixture(scope="module")
def kubelet_mod(kata: Any) -> Any:
    """kubelet.py (given): the kubelet stand-in."""
    return kata.module("kubelet")


@pytest.fixture(scope="module")
def picture(kata: Any) -> Any:
    """picture.py (given): draws a node and its allocations."""
    return kata.module("picture")


def _in_thread(fn: Any, timeout: float, what: str) -> None:
    """Runs fn() in a thread: a plugin that hangs costs `timeout` seconds, with a sentence."""
    box: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            box.append(e)

    t = threading.Thread(target=run, name=what, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise AssertionError(f"your {what} did not return within {timeout} s")
    if box:
        raise box[0]


class Rig:
    """A node, a kubelet and your plugin. `rig.ep` is the kubelet's connection to the plugin."""

    def __init__(self, dp: Any, kubelet_mod: Any, node: Any, plugin_dir: Path) -> None:
        self.dp, self.node, self.dir = dp, node, plugin_dir
        self.todo: list[KataTodo] = []  # a todo() reached inside a gRPC handler
        self.kubelet = kubelet_mod.Kubelet(plugin_dir, explain=self._explain)
        self.plugin: Any = None
        self.ep: Any = None

    def _explain(self) -> BaseException | None:
        return self.todo[0] if self.todo else None

    def _watch_todo(self, plugin: Any) -> None:
        # gRPC turns an exception in a handler into an UNKNOWN status; note a todo() first, so
        # that the test says "not started" instead of "failed".
        for name in RPCS:
            fn = getattr(plugin, name, None)
            if fn is None:
                continue
            if inspect.isgeneratorfunction(fn):

                @functools.wraps(fn)
                def gen(req: Any, ctx: Any, _fn: Any = fn) -> Iterator[Any]:
                    try:
                        yield from _fn(req, ctx)
                    except KataTodo as e:
                        self.todo.append(e)
                        raise

                setattr(plugin, name, gen)
            else:

                @functools.wraps(fn)
                def call(req: Any, ctx: Any, _fn: Any = fn) -> Any:
                    try:
                        return _fn(req, ctx)
                    except KataTodo as e:
                        self.todo.append(e)
                        raise

                setattr(plugin, name, call)

    def start(self, resource: str = "nvidia.com/gpu", **kwargs: Any) -> Any:
        """Starts the kubelet and your plugin; returns the kubelet's endpoint for it."""
        self.kubelet.start()
        self.plugin = self.dp.GpuDevicePlugin(self.node, str(self.dir), resource_name=resource,
                                              **kwargs)  # fmt: skip
        self._watch_todo(self.plugin)
        try:
            _in_thread(self.plugin.start, START_TIMEOUT, "GpuDevicePlugin.start()")
        except KataTodo:
            raise
        except BaseException as e:
            if self.todo:
                raise self.todo[0] from None
            raise AssertionError(f"your start() raised {type(e).__name__}: {e}") from None
        self.ep = self.kubelet.wait_registered(resource)
        return self.ep

    def close(self) -> None:
        try:
            if self.plugin is not None:
                _in_thread(self.plugin.stop, STOP_TIMEOUT, "GpuDevicePlugin.stop()")
        except BaseException:  # noqa: BLE001 - the test's own verdict matters, not teardown's
            pass
        finally:
            self.kubelet.stop()


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    """A fresh device-plugin directory (short: a unix socket path must fit in 108 bytes)."""
    d = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def rig(dp: Any, nodes: Any, kubelet_mod: Any, plugin_dir: Path) -> Iterator[Rig]:
    """An 8-GPU PCIe node (NVLink pairs 0-1, 2-3, 4-5, 6-7; GPUs 0-3 on socket 0), a kubelet
    and your plugin (call rig.start(...))."""
    r = Rig(dp, kubelet_mod, nodes.pcie_node(8), plugin_dir)
    yield r
    r.close()


@pytest.fixture
def make_rig(dp: Any, kubelet_mod: Any) -> Iterator[Any]:
    """make_rig(node) -> Rig for another node; closed after the test."""
    rigs: list[Rig] = []
    dirs: list[Path] = []

    def make(node: Any) -> Rig:
        d = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
        dirs.append(d)
        rigs.append(Rig(dp, kubelet_mod, node, d))
        return rigs[-1]

    yield make
    for r in rigs:
        r.close()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
