"""gpu-backend launches under NVIDIA compute-sanitizer (`--kata-cuda-sanitize=racecheck|memcheck`).

A sanitized launch does not run in the test process: the kernel's source, launch shape and argument
arrays are written to a temporary directory, and `compute-sanitizer --tool <tool> python -m
harness.cuda.sanitize_runner DIR` compiles and launches it once (with -lineinfo, so reports name
source lines). The runner writes the outputs back to DIR; this module parses the sanitizer's
report into `SanitizerError` (kernel, file:line, thread, block, what went wrong) or, when it is
clean, copies the outputs into the caller's Out/InOut arrays and device arrays.

A launch the sanitizer did not check is never a pass: when compute-sanitizer refuses the device
("Device not supported", as under gVisor's GPU proxy), reports an internal error ("Internal
Sanitizer Error: ... didn't track the launch"), or exits without the runner having launched the
kernel (its sentinel line) or without printing its summary, the launch raises `SanitizerRefused`
with what it printed.

Parsing covers the report formats of compute-sanitizer 2021-2025 (and cuda-memcheck's older one):
"Invalid __global__ write of size 4 bytes / at k(...)+0x90 in k.cu:4 / by thread (..) in block
(..) / Address 0x.. is out of bounds / and is 1 bytes after the nearest allocation ..." and
"Error: Race reported between Write access at k(...)+0x1a0 in k.cu:12 / and Read access at ...
[1024 hazards]".
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness._lazy import lazy_module
from harness.cuda.errors import CudaError, SanitizerError, SanitizerRefused

np = lazy_module("numpy")  # imported on first use: a run without CUDA katas never loads it

__all__ = [
    "SENTINEL",
    "TOOLS",
    "Finding",
    "configure",
    "find_sanitizer",
    "parse_report",
    "refusal",
    "run_sanitized",
    "sanitize_tool",
]

TOOLS = ("memcheck", "racecheck")
RUNNER = "harness.cuda.sanitize_runner"
SENTINEL = "harness.cuda.sanitize_runner: launched "  # the runner prints it, then the kernel
_settings: dict[str, Any] = {}  # mutated, never rebound (harness.sandbox's guard)


def configure(tool: str | None, executable: str | Path | None = None) -> None:
    """Sanitize every later gpu-backend launch of this process with `tool` (None: stop)."""
    _settings.clear()
    if tool is None:
        return
    if tool not in TOOLS:
        raise CudaError(f"--kata-cuda-sanitize: unknown tool {tool!r}; choose one of {TOOLS}")
    exe = Path(executable) if executable else find_sanitizer()
    if exe is None:
        raise CudaError(
            f"--kata-cuda-sanitize={tool} needs NVIDIA compute-sanitizer (part of the CUDA "
            "toolkit): not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin"
        )
    _settings.update(tool=tool, executable=str(exe))


def sanitize_tool() -> str | None:
    return _settings.get("tool")


def find_sanitizer() -> Path | None:
    """compute-sanitizer: $KATA_TOOL_COMPUTE_SANITIZER, PATH, then the CUDA toolkit's places."""
    from harness.toolchain import find_tool

    found = find_tool("compute-sanitizer")
    if found is not None:
        return found
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    for root in filter(None, roots):
        for sub in ("bin", "compute-sanitizer"):
            p = Path(root) / sub / "compute-sanitizer"
            if p.is_file() and os.access(p, os.X_OK):
                return p
    return None


# ----------------------------------------------------------------------------- parsing
@dataclass
class Finding:
    """One error record of a compute-sanitizer report."""

    title: str  # "Invalid __global__ write of size 4 bytes", "Race reported between ..."
    kind: str  # "memory", "race", "api", "other"
    kernel: str | None = None
    location: str | None = None  # "vadd.cu:4" when built with -lineinfo
    thread: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    detail: str = ""  # "address 0x.. is out of bounds, 1 bytes after ..."
    hazards: int | None = None
    other_sites: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = [self.title]
        if self.location:
            parts.append(f"at {self.location}")
        if self.thread and self.block:
            t, b = self.thread, self.block
            parts.append(f"by thread ({t[0]},{t[1]},{t[2]}) in block ({b[0]},{b[1]},{b[2]})")
        text = " ".join(parts)
        if self.detail:
            text += f": {self.detail}"
        if self.hazards is not None:
            text += f" ({self.hazards} hazards)"
        return text


_PREFIX = re.compile(r"^=+ ?")
_HEADER = re.compile(
    r"^(Invalid __\w+__ (?:read|write|atomic)|(?:Error|ERROR|Warning|WARNING|WARN|Info|INFO): "
    r"|Program hit |Misaligned|Malformed|Barrier error|Hardware exception|Uninitialized "
    r"|Out-of-range|Memory leak|Cuda|CUDA|Device-side|Error )"
)
_SUMMARY = re.compile(r"^(ERROR|RACECHECK|LEAK|INITCHECK|SYNCCHECK) SUMMARY")
_FUNC_AT = re.compile(r"at (?P<func>.+?)\+0x[0-9a-fA-F]+(?:\s+in (?P<file>[^\s:]+):(?P<line>\d+))?")
_OLD_AT = re.compile(r"at 0x[0-9a-fA-F]+ in (?P<file>[^\s:]+):(?P<line>\d+):(?P<func>.+?)$")
_OLD_AT_NOLINE = re.compile(r"at 0x[0-9a-fA-F]+ in (?P<func>[A-Za-z_][\w:<>]*)")
_WHERE = re.compile(r"by thread \((\d+),(\d+),(\d+)\) in block \((\d+),(\d+),(\d+)\)")
_ADDR = re.compile(r"(?:Address|Access to) (0x[0-9a-fA-F]+) is ([\w -]+?)(?:$| and )")
_NEAREST = re.compile(
    r"and is ([\d,]+) bytes (after|before) the nearest allocation at 0x[0-9a-fA-F]+ of size "
    r"([\d,]+) bytes"
)
_RACE = re.compile(r"Race reported between (\w+) access at (.+?) and (\w+) access at (.+?)$")
_HAZARDS = re.compile(r"\[([\d,]+) hazards?\]")


def _kernel_of(func: str) -> str:
    """`void ns::k<(int)1>(float *, int)` -> "k": the name before the parameter list, no templates."""
    depth = 0
    name = ""
    for ch in func.strip():
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            if ch == "(":
                break
            name += ch
    words = name.split()
    return words[-1].split("::")[-1] if words else func.strip()


def _site(text: str) -> tuple[str | None, str | None]:
    """(kernel, file:line) of "k(float *)+0x1a0 in k.cu:12" or the older "0x148 in k.cu:53:k()"."""
    text = "at " + text.strip() if not text.lstrip().startswith("at ") else text
    m = _OLD_AT.search(text)
    if m:
        return _kernel_of(m["func"]), f"{m['file']}:{m['line']}"
    m = _FUNC_AT.search(text)
    if m:
        loc = f"{m['file']}:{m['line']}" if m["file"] else None
        return _kernel_of(m["func"]), loc
    m = _OLD_AT_NOLINE.search(text)
    return (_kernel_of(m["func"]), None) if m else (None, None)


def _records(text: str) -> list[list[str]]:
    """Group the report's lines into records: a header line, then its indented detail lines."""
    records: list[list[str]] = []
    in_backtrace = False
    for raw in text.splitlines():
        if not raw.startswith("="):
            continue  # the program's own output
        line = _PREFIX.sub("", raw).rstrip()
        body = line.strip()
        if not body or body in ("COMPUTE-SANITIZER", "CUDA-MEMCHECK") or _SUMMARY.match(body):
            continue
        if _HEADER.match(body):
            records.append([body])
            in_backtrace = False
        elif records and not in_backtrace:
            if body.startswith(("Saved host backtrace", "Host Frame", "Device Frame")):
                in_backtrace = True  # frames carry no field we report
            else:
                records[-1].append(body)
    return records


def parse_report(text: str) -> list[Finding]:
    """The error records of compute-sanitizer output `text`, in the order reported."""
    findings = []
    for rec in _records(text):
        head = rec[0]
        if "Race reported between" in head:
            findings.append(_race(rec))
            continue
        joined = " ".join(rec)
        if head.startswith(("Invalid __", "Misaligned", "Uninitialized")):
            kind = "memory"
        elif "hazard" in head.lower():
            kind = "race"  # racecheck's --racecheck-report hazard records
        else:
            kind = "api" if head.startswith("Program hit") else "other"
        title = re.split(r"\s+at\s+(?=\S+\+0x|0x)", head, maxsplit=1)[0]
        f = Finding(title=title, kind=kind)
        f.kernel, f.location = _site(joined[len(title) :]) if " at " in joined else (None, None)
        m = _WHERE.search(joined)
        if m:
            g = tuple(int(x) for x in m.groups())
            f.thread, f.block = g[:3], g[3:]  # type: ignore[assignment]
        details = []
        m = _ADDR.search(joined)
        if m:
            details.append(f"address {m[1]} is {m[2].strip()}")
        m = _NEAREST.search(joined)
        if m:
            details.append(
                f"{m[1].replace(',', '')} bytes {m[2]} the nearest allocation "
                f"({m[3].replace(',', '')} bytes)"
            )
        f.detail = ", ".join(details)
        findings.append(f)
    return findings


def _race(rec: list[str]) -> Finding:
    # "Race reported between Write access at <site>" then "and Read access at <site> [N hazards]"
    # lines; a site may wrap onto the next line (newer versions).
    sites: list[tuple[str, str]] = []
    text = " ".join(rec)
    parts = re.split(r"(?:Race reported between|\band) (Read|Write|Atomic) access at ", text)
    hazards = [int(h.replace(",", "")) for h in _HAZARDS.findall(text)]
    for i in range(1, len(parts) - 1, 2):
        sites.append((parts[i], _HAZARDS.sub("", parts[i + 1]).strip()))
    f = Finding(title="Race reported", kind="race", hazards=sum(hazards) if hazards else None)
    described = []
    for access, where in sites:
        kernel, loc = _site(where)
        f.kernel = f.kernel or kernel
        described.append(f"{access} access at {loc or where}")
    if described:
        f.title = "Race reported between " + " and ".join(described[:2])
        f.other_sites = described[2:]
    return f


# What compute-sanitizer prints when it checks nothing: an unsupported device or runtime, an
# internal error, a target it could not attach to. (The first is the words reported on a gVisor
# GPU machine; the others are in NVIDIA's compute-sanitizer documentation.)
_REFUSED = re.compile(
    r"(?i)(device not supported|not supported|internal sanitizer error|didn't track|"
    r"no attachable process|target application returned an error|unable to (?:find|load|"
    r"initialize)|failed to (?:initialize|attach))"
)
_SUMMARY_LINE = re.compile(r"^=+ ?(ERROR|RACECHECK) SUMMARY:", re.M)


def refusal(report: str, sentinel: str | None = None) -> str | None:
    """Why a report with no findings checked nothing (None when it did check the launch): the
    sanitizer's own refusal line, or no summary line, or (with `sentinel`) no sign that the
    program launched the kernel at all."""
    for raw in report.splitlines():
        line = _PREFIX.sub("", raw).strip() if raw.startswith("=") else ""
        if line and _REFUSED.search(line):
            return line
    if not _SUMMARY_LINE.search(report):
        return "it printed no ERROR SUMMARY / RACECHECK SUMMARY line"
    if sentinel is not None and sentinel not in report:
        return "the program under it never launched the kernel"
    return None


def refused_message(tool: str, kernel: str, why: str, name: str) -> str:
    return (
        f"compute-sanitizer {tool} did not check kernel {kernel} ({name}): {why}. Nothing was "
        "checked, so this is not a pass: run where compute-sanitizer supports the GPU (not under "
        "gVisor's GPU proxy), or without --kata-cuda-sanitize"
    )


def failure_message(tool: str, kernel: str, findings: Sequence[Finding], name: str) -> str:
    """The test failure: kernel, then each finding (the first few), then what it usually means."""
    primary = [f for f in findings if f.kind != "api"] or list(findings)
    n = len(primary)
    lines = [
        f"compute-sanitizer {tool} found {n} problem{'s' * (n != 1)} in kernel {kernel} ({name}):"
    ]
    for f in primary[:5]:
        lines.append(f"  {f.describe()}")
    if n > 5:
        lines.append(f"  ... and {n - 5} more")
    kinds = {f.kind for f in primary}
    if "race" in kinds:
        lines.append(
            "Threads access the same __shared__ location without a __syncthreads() between a "
            "write and another thread's read or write: add the missing barrier."
        )
    if "memory" in kinds:
        lines.append(
            "A thread accessed memory outside every allocation: check the index bound (if (i < "
            "n)) and the grid size."
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- running
def write_spec(
    directory: Path,
    module: Any,
    kernel: str,
    plan: Sequence[Any],
    block: tuple[int, int, int],
    grid: tuple[int, ...],
    shared: int,
) -> None:
    """The launch, as files the runner reads: spec.json and args.npz."""
    arrays: dict[str, np.ndarray] = {}
    args = []
    for i, p in enumerate(plan):
        if p.kind == "device":
            arrays[f"a{i}"] = p.value.get()
            args.append({"kind": "inout", "device": True})
        elif p.kind == "scalar":
            arrays[f"a{i}"] = np.asarray(p.value)
            args.append({"kind": "scalar"})
        else:
            arrays[f"a{i}"] = p.value
            args.append({"kind": p.kind})
    spec = {
        "source": module.source,
        "options": [*module.options, "-lineinfo"],
        "no_extern_c": module.no_extern_c,
        "name": module.name,
        "include_dirs": [str(d) for d in module.include_dirs],
        "kernel": kernel,
        "block": list(block),
        "grid": list(grid),
        "shared": int(shared),
        "args": args,
    }
    (directory / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    np.savez(directory / "args.npz", **arrays)


@contextmanager
def harness_files_uncapped() -> Iterator[None]:
    """Lift the sandbox's cap on one file's size (RLIMIT_FSIZE, meant for what learner code
    writes) to the hard limit while the harness writes a launch's arrays and the runner, which
    inherits it, writes the outputs: arrays larger than the cap failed with "File too large"."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    except (OSError, ValueError):  # pragma: no cover - no such limit here
        soft = hard = resource.RLIM_INFINITY
    if soft == hard:
        yield
        return
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def run_sanitized(
    module: Any,
    kernel: str,
    plan: Sequence[Any],
    block: tuple[int, int, int],
    grid: tuple[int, ...],
    shared: int,
    timeout: float = 600.0,
) -> float:
    """Launch once under compute-sanitizer; SanitizerError on findings, else outputs copied back."""
    tool, exe = _settings["tool"], _settings["executable"]
    with tempfile.TemporaryDirectory(prefix="kata-sanitize-") as tmp, harness_files_uncapped():
        d = Path(tmp)
        write_spec(d, module, kernel, plan, block, grid, shared)
        cmd = [
            exe,
            "--tool",
            tool,
            "--error-exitcode",
            "86",
            "--print-limit",
            "20",
            sys.executable,
            "-m",
            RUNNER,
            str(d),
        ]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise SanitizerError(
                f"kernel {kernel}: compute-sanitizer {tool} did not finish within {timeout:.0f} s",
                kernel=kernel,
                tool=tool,
                findings=[],
            ) from None
        report = proc.stdout + proc.stderr
        findings = [f for f in parse_report(report) if not _REFUSED.search(f.title)]
        if findings or proc.returncode == 86:
            message = failure_message(tool, kernel, findings, module.name)
            if not findings:
                message += "\n" + _tail(report)
            raise SanitizerError(message, kernel=kernel, tool=tool, findings=findings)
        why = refusal(report, f"{SENTINEL}{kernel}")
        if why is not None:
            message = refused_message(tool, kernel, why, module.name) + "\n" + _tail(report)
            raise SanitizerRefused(message, kernel=kernel, tool=tool, findings=[])
        out = d / "out.npz"
        if proc.returncode != 0 or not out.exists():
            raise CudaError(
                f"kernel {kernel}: the sanitized launch failed (exit status {proc.returncode}):\n"
                + _tail(report)
            )
        with np.load(out) as res:
            for i, p in enumerate(plan):
                key = f"a{i}"
                if key not in res.files:
                    continue
                if p.kind == "device":
                    p.value.set(res[key])
                elif p.kind in ("out", "inout"):
                    p.value[...] = res[key]
            return float(res["seconds"])


def _tail(text: str, n: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-n:])
