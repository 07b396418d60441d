"""Which implementation plays each part (given: read it, run it; the grade does not use it).

    python -m katas.phase12.platform.wiring              # the simple parts of components.py
    python -m katas.phase12.platform.wiring --earlier    # your own earlier katas, where they run

The graded tests build the platform from components of their own (tests/conftest.py), so your
phase 12 grade does not depend on phases 06-11. This module is the other half of the capstone:
the same glue running on the parts you built earlier, through adapters that load each earlier
kata from its folder (katas/phaseNN/<kata>/, your files, never a reference) and fall back to
components.py's simple part, saying so, when that kata is not done yet.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from .components import (
    Components,
    FirstFit,
    Generation,
    JobView,
    LicenseTerms,
    ManualClock,
    ManualRunner,
    NodeSpec,
    NodeView,
    RooflineServing,
    StaticLicenser,
)

KATAS = Path(__file__).resolve().parents[2]  # katas/


def load_earlier(phase: str, kata: str, module: str) -> ModuleType:
    """katas/<phase>/<kata>/<module>.py as a module of a package of its own (its relative
    imports work); raises what the module raises (a todo() in a stub: KataTodo)."""
    folder = KATAS / phase / kata
    pkg = f"_earlier_{phase}_{kata.replace('-', '_')}"
    if pkg not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            pkg, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[pkg] = package
        if (folder / "__init__.py").exists():
            spec.loader.exec_module(package)
    return importlib.import_module(f"{pkg}.{module}")


class EarlierScheduler:
    """Phase 06's best_fit over the ready nodes. Its Topology has one size of node, so every
    node is modelled with the largest node's GPUs, of which only the real node's free ones are
    offered (a node of 4 in a cluster of 8s: ids 0-3 of its 8, at most)."""

    def __init__(self, placement: ModuleType, cluster: ModuleType) -> None:
        self.placement = placement
        self.cluster = cluster

    def place(self, job: JobView, nodes: list[NodeView]) -> str | None:
        if not nodes:
            return None
        per_node = max(n.gpus for n in nodes)
        topo = self.cluster.Topology("platform", 1, len(nodes), per_node, per_node)
        free = [set(range(i * per_node, i * per_node + n.free)) for i, n in enumerate(nodes)]
        pods = self.placement.best_fit(topo, free, 1, job.gpus)
        if not pods:
            return None
        return nodes[topo.node_of(pods[0][0])].name


class EarlierServing:
    """Phase 07's engine serving one request with your ContinuousBatcher on the kata's
    Llama-3-70B-on-two-H100s step cost: TTFT and TPOT from its token times."""

    def __init__(self, engine: ModuleType, schedulers: ModuleType) -> None:
        self.engine = engine
        self.schedulers = schedulers

    def generate(self, prompt_tokens: int, max_tokens: int) -> Generation:
        e = self.engine
        blocks = -(-(prompt_tokens + max_tokens) // 16) + 1
        run = e.Engine(e.H100X2_LLAMA_3_70B, num_blocks=blocks).run(
            self.schedulers.ContinuousBatcher(),
            [e.Request(0, 0.0, prompt_tokens, max_tokens, max_tokens)],
        )
        times = run.results[0].token_times
        tpot = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else 0.0
        return Generation(ttft_s=times[0], tpot_s=tpot, tokens=len(times))


def simple(nodes: list[NodeSpec]) -> Components:
    """components.py's simple parts: first fit, jobs finished by hand, a roofline serving
    model, a 30-day license with a 7-day grace, a clock moved by hand."""
    clock = ManualClock()
    return Components(
        scheduler=FirstFit(),
        runner=ManualRunner(),
        serving=RooflineServing(),
        licenser=StaticLicenser(
            LicenseTerms("you", frozenset({"jobs", "serving"}), clock.t + 30 * 86400, 7 * 86400)
        ),
        clock=clock,
    )


def earlier(nodes: list[NodeSpec], report: list[str]) -> Components:
    """simple(nodes), with each part your earlier kata can play swapped in; `report` says which."""
    comps = simple(nodes)
    try:
        scheduler = EarlierScheduler(
            load_earlier("phase06", "cluster-scheduler", "placement"),
            load_earlier("phase06", "cluster-scheduler", "cluster"),
        )
        scheduler.place(JobView("probe", "probe", 1, 0), [NodeView("n", 8, 8)])
        comps.scheduler = scheduler
        report.append("scheduler: phase06/cluster-scheduler placement.best_fit (yours)")
    except Exception as exc:  # noqa: BLE001 (not done yet: the simple part plays it)
        report.append(f"scheduler: first fit (phase 06 not usable: {type(exc).__name__}: {exc})")
    try:
        serving = EarlierServing(
            load_earlier("phase07", "continuous-batching", "engine"),
            load_earlier("phase07", "continuous-batching", "schedulers"),
        )
        serving.generate(128, 4)
        comps.serving = serving
        report.append("serving: phase07/continuous-batching engine + ContinuousBatcher (yours)")
    except Exception as exc:  # noqa: BLE001
        report.append(f"serving: roofline model (phase 07 not usable: {type(exc).__name__}: {exc})")
    report.append("runner: jobs finished by hand (phase 09's HAL runs on a node, not here)")
    report.append("license: static terms (a phase 11 license needs your vendor key and keyring)")
    return comps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--earlier", action="store_true", help="use your earlier katas")
    ap.add_argument("--port", type=int, default=8080)
    args = ap.parse_args(argv)
    from . import control, routes, transport

    nodes = [NodeSpec("node-0", 8), NodeSpec("node-1", 8), NodeSpec("node-2", 4)]
    report: list[str] = []
    comps = earlier(nodes, report) if args.earlier else simple(nodes)
    for line in report:
        print(line)
    try:
        platform: Any = control.Platform(comps, nodes)
    except NotImplementedError as exc:  # harness.KataTodo: control.py is still a stub
        print(f"control.py is not written yet ({exc}): nothing to serve")
        return 1
    server = transport.serve(routes, platform, port=args.port)
    print(f"serving on http://127.0.0.1:{server.server_address[1]} (Ctrl-C stops)")
    try:
        server.kata_thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        transport.stop(server)
        platform.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
