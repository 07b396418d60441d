"""GIVEN. A kubelet stand-in: the kubelet's side of the device-plugin API, over real gRPC.

It does what the kubelet's device manager (pkg/kubelet/cm/devicemanager) does with a plugin:

1. serves `Registration` on <plugin_dir>/kubelet.sock; a `Register` call is checked (the API
   version, an extended-resource name like "nvidia.com/gpu", an endpoint that is a socket file
   in the same directory) and then the kubelet *dials the plugin back* on that endpoint — a
   plugin must serve before it registers;
2. asks GetDevicePluginOptions, then opens ListAndWatch and keeps the latest device list;
3. calls GetPreferredAllocation, Allocate and PreStartContainer when a pod asks for devices;
4. on `restart()`, stops, removes every socket in the directory (the real kubelet empties
   its device-plugin directory when it starts) and serves a new kubelet.sock: plugins must
   notice and register again.

Every call has a deadline, so a plugin that hangs costs seconds, not the test's time limit.
Try your plugin by hand:  python -c "from kubelet import demo; demo()" (see README.md).
"""

from __future__ import annotations

import os
import re
import stat
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from .deviceplugin import KUBELET_SOCKET, VERSION, pb2, pb2_grpc

CALL_TIMEOUT = 2.0  # seconds for one unary call to the plugin
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class PluginError(AssertionError):
    """A call to the plugin failed: the sentence says which call and why."""


def _target(path: Path) -> str:
    return f"unix://{path}"


@dataclass
class Endpoint:
    """The kubelet's connection to one registered plugin."""

    request: Any  # the RegisterRequest it came with
    path: Path
    channel: grpc.Channel
    stub: Any
    options: Any = None
    devices: list[Any] = field(default_factory=list)  # the latest ListAndWatch list
    updates: int = 0  # how many lists ListAndWatch has sent
    stream_error: str = ""  # why the stream ended, if it did
    explain: Callable[[], BaseException | None] | None = None
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _stream: Any = None

    def _raise(self, sentence: str) -> None:
        # The tests pass `explain`: it turns a todo() inside your handler into "not started".
        cause = self.explain() if self.explain else None
        raise (cause or PluginError(sentence)) from None

    # ------------------------------------------------------------------ calls
    def _call(self, name: str, request: Any, timeout: float = CALL_TIMEOUT) -> Any:
        try:
            return getattr(self.stub, name)(request, timeout=timeout)
        except grpc.RpcError as e:
            code = e.code()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                self._raise(f"the plugin's {name} did not answer within {timeout} s")
            self._raise(f"the plugin's {name} failed: {code.name}: {e.details()}")

    def allocate(self, *containers: list[str]) -> Any:
        """AllocateRequest with one ContainerAllocateRequest per list of device IDs."""
        req = pb2.AllocateRequest(
            container_requests=[pb2.ContainerAllocateRequest(devices_ids=ids) for ids in containers]
        )
        return self._call("Allocate", req)

    def preferred(self, available: list[str], must_include: list[str], size: int) -> list[str]:
        req = pb2.PreferredAllocationRequest(
            container_requests=[
                pb2.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available,
                    must_include_deviceIDs=must_include,
                    allocation_size=size,
                )
            ]
        )
        resp = self._call("GetPreferredAllocation", req)
        if len(resp.container_responses) != 1:
            raise PluginError(
                f"GetPreferredAllocation answered {len(resp.container_responses)} container "
                "responses for 1 container request"
            )
        return list(resp.container_responses[0].deviceIDs)

    def prestart(self, ids: list[str]) -> Any:
        return self._call("PreStartContainer", pb2.PreStartContainerRequest(devices_ids=ids))

    # ------------------------------------------------------------------ ListAndWatch
    def _watch(self) -> None:
        try:
            self._stream = self.stub.ListAndWatch(pb2.Empty())
            for resp in self._stream:
                with self._cond:
                    self.devices = list(resp.devices)
                    self.updates += 1
                    self._cond.notify_all()
            reason = "the plugin ended the stream"
        except grpc.RpcError as e:
            reason = f"{e.code().name}: {e.details()}"
        except Exception as e:  # noqa: BLE001 - a broken message ends the stream, with its cause
            reason = f"{type(e).__name__}: {e}"
        with self._cond:
            self.stream_error = reason
            self._cond.notify_all()

    def wait_devices(
        self, pred: Callable[[list[Any]], bool], timeout: float = 2.0, what: str = ""
    ) -> list[Any]:
        """Waits until the latest device list satisfies `pred`; PluginError after `timeout`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (self.updates and pred(self.devices)):
                left = deadline - time.monotonic()
                if left <= 0 or (self.stream_error and self.updates == 0):
                    break
                self._cond.wait(left)
            if self.updates and pred(self.devices):
                return list(self.devices)
            got = [(d.ID, d.health) for d in self.devices] if self.updates else "no list at all"
            ended = f"; the stream ended: {self.stream_error}" if self.stream_error else ""
            self._raise(
                f"ListAndWatch did not send {what or 'the expected list'} within {timeout} s "
                f"(latest: {got}{ended})"
            )

    def close(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
        self.channel.close()


class _Registration(pb2_grpc.RegistrationServicer):
    def __init__(self, kubelet: Kubelet):
        self.kubelet = kubelet

    def Register(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        problem = self.kubelet._accept(request)
        if problem:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        return pb2.Empty()


class Kubelet:
    """Serves kubelet.sock in `plugin_dir` and keeps an Endpoint per registered resource."""

    def __init__(
        self,
        plugin_dir: str | os.PathLike[str],
        dial_timeout: float = 2.0,
        explain: Callable[[], BaseException | None] | None = None,
    ):
        self.dir = Path(plugin_dir)
        self.explain = explain
        self.dial_timeout = dial_timeout
        self.endpoints: dict[str, Endpoint] = {}
        self.registrations: list[Any] = []  # every RegisterRequest accepted, in order
        self.refused: list[str] = []  # why each refused registration was refused
        self._server: grpc.Server | None = None
        self._cond = threading.Condition()

    @property
    def socket(self) -> Path:
        return self.dir / KUBELET_SOCKET

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for p in self.dir.iterdir():  # what the device manager does when it starts
            if p.is_socket() or p.name == KUBELET_SOCKET:
                p.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb2_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        server.add_insecure_port(_target(self.socket))
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait(2)
            self._server = None
        with self._cond:
            for ep in self.endpoints.values():
                ep.close()
            self.endpoints.clear()
        self.socket.unlink(missing_ok=True)

    def restart(self) -> None:
        self.stop()
        time.sleep(0.05)
        self.start()

    # ------------------------------------------------------------------ registration
    def _accept(self, r: Any) -> str:
        problem = ""
        if r.version != VERSION:
            problem = f"unsupported API version {r.version!r} (this kubelet speaks {VERSION!r})"
        elif not _RESOURCE.match(r.resource_name) or r.resource_name.startswith("kubernetes.io/"):
            problem = f"{r.resource_name!r} is not an extended resource name like 'nvidia.com/gpu'"
        elif not r.endpoint or "/" in r.endpoint:
            problem = f"endpoint {r.endpoint!r} must be a file name in {self.dir}, not a path"
        else:
            path = self.dir / r.endpoint
            try:
                is_sock = stat.S_ISSOCK(path.stat().st_mode)
            except OSError:
                is_sock = False
            if not is_sock:
                problem = (
                    f"endpoint {r.endpoint!r}: no socket at {path} (serve before you register)"
                )
        if not problem:
            problem = self._connect(r, self.dir / r.endpoint)
        if problem:
            self.refused.append(problem)
        return problem

    def _connect(self, r: Any, path: Path) -> str:
        channel = grpc.insecure_channel(_target(path))
        try:
            grpc.channel_ready_future(channel).result(timeout=self.dial_timeout)
        except grpc.FutureTimeoutError:
            channel.close()
            return f"could not dial the plugin back at {path} within {self.dial_timeout} s"
        ep = Endpoint(r, path, channel, pb2_grpc.DevicePluginStub(channel), explain=self.explain)
        try:
            ep.options = ep._call("GetDevicePluginOptions", pb2.Empty())
        except BaseException as e:  # PluginError, or the tests' "not started"
            channel.close()
            return str(e) or type(e).__name__
        with self._cond:
            old = self.endpoints.pop(r.resource_name, None)
            self.endpoints[r.resource_name] = ep
            self.registrations.append(r)
            self._cond.notify_all()
        if old is not None:
            old.close()
        threading.Thread(target=ep._watch, name=f"kubelet-watch-{r.endpoint}", daemon=True).start()
        return ""

    def wait_registered(self, resource: str, timeout: float = 3.0, after: int = 0) -> Endpoint:
        """The endpoint of `resource` once more than `after` registrations were accepted."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while resource not in self.endpoints or len(self.registrations) <= after:
                left = deadline - time.monotonic()
                if left <= 0:
                    why = f"; refused: {self.refused[-1]}" if self.refused else ""
                    raise PluginError(
                        f"no plugin registered {resource!r} with the kubelet within {timeout} s{why}"
                    )
                self._cond.wait(left)
            return self.endpoints[resource]


def demo(replicas: int = 1) -> None:
    """Runs your plugin against this kubelet and prints what the kubelet sees."""
    import tempfile

    from .node import pcie_node
    from .plugin import GpuDevicePlugin

    with tempfile.TemporaryDirectory(prefix="dp-", dir="/tmp") as d:
        kubelet = Kubelet(d)
        kubelet.start()
        node = pcie_node()
        plugin = GpuDevicePlugin(node, d, replicas=replicas)
        plugin.start()
        ep = kubelet.wait_registered("nvidia.com/gpu")
        devices = ep.wait_devices(lambda ds: bool(ds))
        print(
            f"registered: {ep.request.resource_name} at {ep.request.endpoint}; {len(devices)} devices"
        )
        ids = ep.preferred([d.ID for d in devices], [], 2)
        print("preferred 2:", ids)
        print(ep.allocate(ids))
        plugin.stop()
        kubelet.stop()
