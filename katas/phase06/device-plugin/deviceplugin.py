"""GIVEN. The kubelet's device-plugin API (api.proto, v1beta1) as Python modules, and its constants.

    from .deviceplugin import pb2, pb2_grpc, VERSION, HEALTHY, UNHEALTHY, KUBELET_SOCKET

`pb2` holds the messages (pb2.Device, pb2.AllocateResponse, ...), `pb2_grpc` the service
bases and stubs (pb2_grpc.DevicePluginServicer, pb2_grpc.add_DevicePluginServicer_to_server,
pb2_grpc.RegistrationStub, ...). They are compiled from api.proto with grpcio-tools the first
time this module is imported in a process (about 50 ms), exactly as `python -m
grpc_tools.protoc` would write them, so the messages always match the installed protobuf.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType

# The constants of k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/constants.go.
VERSION = "v1beta1"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
DEVICE_PLUGIN_PATH = "/var/lib/kubelet/device-plugins/"  # the real directory; tests use a temp one
KUBELET_SOCKET = "kubelet.sock"  # the kubelet's Registration server, in the same directory

_PROTO = Path(__file__).with_name("api.proto")
_NAME = "gpu_katas_deviceplugin_v1beta1"  # one copy per process: protobuf's pool is global


class RegistrationError(RuntimeError):
    """The kubelet refused a registration (unsupported version, a bad resource name, ...)."""


def _compile() -> tuple[ModuleType, ModuleType]:
    if f"{_NAME}_pb2_grpc" in sys.modules:
        return sys.modules[f"{_NAME}_pb2"], sys.modules[f"{_NAME}_pb2_grpc"]
    try:
        from grpc_tools import protoc
    except ImportError as e:  # pragma: no cover - grpcio-tools is a dependency of the project
        raise ImportError(
            "the device-plugin kata needs grpcio and grpcio-tools: pip install grpcio grpcio-tools"
        ) from e
    import grpc_tools

    with tempfile.TemporaryDirectory(prefix="kata-proto-") as out:
        src = Path(out) / f"{_NAME}.proto"
        src.write_text(_PROTO.read_text())
        include = str(Path(grpc_tools.__file__).parent / "_proto")
        rc = protoc.main(
            ["protoc", f"-I{out}", f"-I{include}", f"--python_out={out}",
             f"--grpc_python_out={out}", str(src)]
        )  # fmt: skip
        if rc != 0:
            raise RuntimeError(f"protoc could not compile {_PROTO} (exit {rc})")
        mods = []
        for name in (f"{_NAME}_pb2", f"{_NAME}_pb2_grpc"):  # _pb2_grpc imports _pb2 by name
            spec = importlib.util.spec_from_file_location(name, Path(out) / f"{name}.py")
            assert spec and spec.loader
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
            mods.append(mod)
    return mods[0], mods[1]


pb2, pb2_grpc = _compile()
