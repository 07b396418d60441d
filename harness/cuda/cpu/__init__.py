"""The cpu backend of harness.cuda (see docs/cuda.md)."""

from harness.cuda.cpu.backend import SCHEDULES, CpuDeviceArray, CpuFunction, CpuModule

__all__ = ["SCHEDULES", "CpuDeviceArray", "CpuFunction", "CpuModule"]
