"""Pictures in reports: budget-ratio charts drawn as inline SVG, and kata-provided artefacts.

A test reports numbers and pictures through the ``kata_metrics`` fixture; the keys reports use:

``ratio`` (float)
    measured cost over the reference's (time, bytes moved, ...): lower is better.
``budget`` (float)
    the largest ``ratio`` that passes. With ``ratio`` it is drawn as a small bar chart.
``unit`` (str, optional)
    what the ratio measures, e.g. ``"× reference time"`` (the default).
``svg`` (str)
    an SVG picture drawn by the test (e.g. a roofline plot).
``artifact`` (str, or a list of str)
    a PNG, JPEG or SVG file the test wrote under ``.kata/artifacts/`` (the results directory's
    ``artifacts`` folder), given relative to it. Paths outside that folder are refused.
``budgets`` (list of {name, metric, ratio, limit, ...})
    every comparison a ``kata_budget`` test made; each is drawn as its own bar chart.
``label`` (str, optional)
    the caption of ``svg``/``artifact``.
``explanation`` (str)
    why the answer is right, set by ``kata_explain`` after the test's checks: shown with a test
    that passed, never with one that did not (:func:`explanation`).

Every picture becomes a ``data:`` URI shown through ``<img>``, so the HTML report stays one
self-contained file, and a script inside an SVG never runs (images do not execute scripts).
Other numeric keys are listed as plain numbers.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from ..results import TestRecord

_MIME = {".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
_MAX_BYTES = 2_000_000  # a bigger artefact is left out with a note: reports must stay small
_PICTURE_KEYS = {"svg", "artifact", "label", "unit", "budgets", "explanation"}


@dataclass
class Image:
    label: str
    uri: str  # data: URI, or "" when the picture could not be used (see `note`)
    note: str = ""


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def budget(metrics: dict[str, Any]) -> tuple[float, float] | None:
    """(ratio, budget) when the metrics carry both as numbers."""
    ratio, limit = metrics.get("ratio"), metrics.get("budget")
    if isinstance(ratio, int | float) and isinstance(limit, int | float) and limit > 0:
        return float(ratio), float(limit)
    return None


def budget_bars(metrics: dict[str, Any]) -> list[tuple[str, float, float, str]]:
    """(label, ratio, budget, unit) for each chart a test's metrics ask for: one per entry of
    ``budgets`` (what ``kata_budget`` records: name, metric, ratio, limit), else one for the
    top-level ``ratio``/``budget``."""
    out = []
    for entry in metrics.get("budgets") or []:
        if not isinstance(entry, dict):
            continue
        ratio, limit = entry.get("ratio"), entry.get("limit")
        if isinstance(ratio, int | float) and isinstance(limit, int | float) and limit > 0:
            metric = str(entry.get("metric", "time"))
            unit = "× reference time" if metric == "time" else f"× reference {metric}"
            out.append((str(entry.get("name") or metric), float(ratio), float(limit), unit))
    if not out:
        b = budget(metrics)
        if b is not None:
            out.append(("budget", *b, str(metrics.get("unit", "× reference"))))
    return out


def budget_chart(ratio: float, limit: float, unit: str = "× reference", width: int = 330) -> str:
    """A bar for `ratio` against a dashed line at `limit`: green within budget, red over it."""
    height, pad, bar_h = 38, 4, 13
    scale_max = max(ratio, limit, 1.0) * 1.15
    x = lambda v: pad + (width - 2 * pad) * max(0.0, v) / scale_max
    ok = ratio <= limit
    colour = "#2f9e44" if ok else "#e03131"
    label = f"{ratio:.2f}{unit} · budget {limit:.2f}{unit}"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
        f'<rect x="{pad}" y="{pad}" width="{width - 2 * pad}" height="{bar_h}" rx="3" '
        f'fill="#eef1f5"/>'
        f'<rect x="{pad}" y="{pad}" width="{x(ratio) - pad:.1f}" height="{bar_h}" rx="3" '
        f'fill="{colour}"/>'
        f'<line x1="{x(limit):.1f}" y1="1" x2="{x(limit):.1f}" y2="{pad + bar_h + 3}" '
        f'stroke="#343a40" stroke-width="1.5" stroke-dasharray="3 2"/>'
        f'<text x="{pad}" y="{height - 3}" font-family="sans-serif" font-size="12" '
        f'fill="#495057">{escape(label)}{"" if ok else " — over budget"}</text>'
        "</svg>"
    )


def chart_images(record: TestRecord) -> list[Image]:
    return [
        Image(
            f"{record.name}: {label}", data_uri(budget_chart(r, b, unit).encode(), "image/svg+xml")
        )
        for label, r, b, unit in budget_bars(record.metrics)
    ]


def artefact_images(record: TestRecord, artifacts_dir: Path) -> list[Image]:
    """The pictures a test provided, as data URIs; problems become notes, never exceptions."""
    m = record.metrics
    label = str(m.get("label") or record.name)
    out = []
    svg = m.get("svg")
    if isinstance(svg, str) and "<svg" in svg:
        out.append(Image(label, data_uri(svg.encode(), "image/svg+xml")))
    paths = m.get("artifact")
    for rel in [paths] if isinstance(paths, str) else paths if isinstance(paths, list) else []:
        out.append(_artefact(str(rel), label, artifacts_dir))
    return out


def _artefact(rel: str, label: str, artifacts_dir: Path) -> Image:
    base = artifacts_dir.resolve()
    path = (base / rel).resolve()
    if base != path and base not in path.parents:
        return Image(label, "", f"artifact {rel!r} is outside {artifacts_dir}; not shown")
    mime = _MIME.get(path.suffix.lower())
    if mime is None:
        return Image(label, "", f"artifact {rel!r}: only {', '.join(_MIME)} files are shown")
    try:
        data = path.read_bytes()
    except OSError as e:
        return Image(label, "", f"artifact {rel!r} could not be read: {e.strerror or e}")
    if len(data) > _MAX_BYTES:
        return Image(label, "", f"artifact {rel!r} is over {_MAX_BYTES // 1_000_000} MB; not shown")
    return Image(label, data_uri(data, mime))


def explanation(record: Any) -> str:
    """The explanation a passed test gave (``kata_explain``); "" for any other outcome."""
    text = record.metrics.get("explanation") if record is not None and record.ok else None
    return text if isinstance(text, str) else ""


def numbers(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """Metrics that are plain numbers or short strings, besides those drawn as pictures."""
    out = []
    for key, value in metrics.items():
        if key in _PICTURE_KEYS or isinstance(value, dict | list):
            continue
        if isinstance(value, float):
            out.append((key, f"{value:.4g}"))
        elif isinstance(value, int | str | bool):
            out.append((key, str(value)[:80]))
    return out
