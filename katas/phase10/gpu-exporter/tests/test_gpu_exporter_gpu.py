"""Public tests of the nvml task (gpu tier): your Exporter over the real NVML through pynvml
(`pip install nvidia-ml-py`), scraped over HTTP and compared with what pynvml itself says right
after. Skipped without the gpu tier, or without pynvml, with the reason."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def pynvml() -> Any:
    return pytest.importorskip(
        "pynvml", reason="the nvml task needs pynvml: pip install nvidia-ml-py"
    )


def test_nvml_identity_and_memory(
    pynvml: Any, make_exporter: Any, start_server: Any, get: Any, parse: Any
) -> None:
    url = start_server(make_exporter(pynvml))
    r = get(url + "/metrics")
    assert r.status == 200, f"GET /metrics over the real NVML: HTTP {r.status}"
    e = parse(r.body)
    n = pynvml.nvmlDeviceGetCount()
    assert len(e.series("gpu_up")) == n, f"one gpu_up per GPU: NVML sees {n}"
    for i in range(n):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        uuid = pynvml.nvmlDeviceGetUUID(h)
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        ids = {"gpu": str(i), "uuid": uuid}
        assert e.get("gpu_up", **ids) == 1, f"GPU {i} ({uuid}) is up"
        total = pynvml.nvmlDeviceGetMemoryInfo(h).total
        assert e.get("gpu_memory_total_bytes", **ids) == total, f"GPU {i}: {total} bytes installed"
        mhz = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)
        hz = e.get("gpu_sm_clock_hertz", **ids)
        assert hz is not None and 0 < hz <= mhz * 1e6, f"GPU {i}: SM clock in Hz, <= {mhz} MHz"
        power = e.get("gpu_power_watts", **ids)
        assert power is None or 1 < power < 2000, f"GPU {i}: power in watts, got {power}"
