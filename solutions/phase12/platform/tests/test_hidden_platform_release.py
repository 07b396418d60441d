"""Hidden tests of the release artifacts (task release, release/RELEASE.md): every required
section is prose, every name the documents mention exists in API.md, slo_rules.yml, CLI.md and
components.py, the runbooks cover the alerts and the drills with a way to look and a way to act,
the CHANGELOG is a SemVer history newest first ending in components.VERSION, and the release
notes agree with the CHANGELOG and cli/package.json."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

DESIGN = ["Context", "Goals", "Non-goals", "Architecture", "API", "Failure modes",
          "Alternatives considered"]  # fmt: skip
RUNBOOK = ["Symptoms", "Impact", "Diagnosis", "Mitigation", "Verification"]
NOTES = ["Highlights", "Upgrade notes", "Compatibility", "Known issues"]
CHANGE_TYPES = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
COMPONENTS = ("Scheduler", "Runner", "Serving", "Licenser", "Clock")
FUNCTION_WORDS = frozenset(
    "the a an is are was be to of and or in on at for with when if it its this that these by as "
    "from not no so then than each every into we our you your they their".split()
)
PLACEHOLDER = re.compile(
    r"\b(TODO|TBD|FIXME)\b|\bXXX\b|lorem ipsum|\.\.\.|…|\bto be (written|done|decided|completed|filled)\b"
    r"|\b(coming soon|left blank|placeholder|fill (this|me) in|write (this|me))\b",
    re.I,
)
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


# The kata's own texts: prose about the platform uses their words (rt27-rel-filler: word salad).
OWN_TEXTS = (
    "README.md",
    "API.md",
    "cli/CLI.md",
    "release/RELEASE.md",
    "components.py",
    "slo_rules.yml",
)
MIN_OWN_WORDS = 0.3


def _words(text: str) -> list[str]:
    plain = re.sub(r"`+[^`]*`+", " ", text)  # code spans are names, not prose
    plain = re.sub(r"https?://\S+", " ", plain)
    return [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'-]*", plain)]


def _vocabulary(kata: Any) -> set[str]:
    out: set[str] = set()
    for name in OWN_TEXTS:
        out |= {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'-]*", kata.source(name).read_text(encoding="utf-8"))}  # fmt: skip
    return out


MIN_OWN_PAIRS = 0.12  # honest documents: 0.30-0.52; word salad from the kata's words: 0.03-0.06


def _pairs(kata: Any) -> set[tuple[str, str]]:
    """Adjacent word pairs of the kata's own texts ("the platform", "a node", "is lost")."""
    out: set[tuple[str, str]] = set()
    for name in OWN_TEXTS:
        w = _words(kata.source(name).read_text(encoding="utf-8"))
        out |= set(zip(w, w[1:], strict=False))
    return out


def _skeleton(text: str) -> tuple[str, ...]:
    """The section's sentence shape: its function words, every other word a blank."""
    return tuple(w if w in FUNCTION_WORDS else "_" for w in _words(text))


def _prose_problem(text: str, vocabulary: set[str] | None = None) -> str | None:
    """Why `text` is not a written-out section about the platform, or None."""
    plain = re.sub(r"`+[^`]*`+", " ", text)  # code spans are names, not prose
    plain = re.sub(r"https?://\S+", " ", plain)
    if m := PLACEHOLDER.search(plain):
        return f"it holds the placeholder {m[0]!r}"
    words = [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'-]*", plain)]
    if len(words) < 12:
        return f"it has {len(words)} words, fewer than 12"
    if len(set(words)) < 8:
        return f"it has {len(set(words))} different words, fewer than 8"
    if sum(w in FUNCTION_WORDS for w in words) < 2:
        return "it has no English sentence (none of the, a, is, to, of, and, ...)"
    content = [w for w in words if w not in FUNCTION_WORDS and len(w) >= 3]
    if vocabulary is not None and content:
        own = sum(w in vocabulary for w in content) / len(content)
        if own < MIN_OWN_WORDS:
            return f"only {own:.0%} of its words are words the kata's own texts use (README.md, API.md, CLI.md, ...): it is not about the platform"  # fmt: skip
    return None


def _level2(sections: list[Any], required: list[str]) -> dict[str, str]:
    return {s.title: s.text for s in sections if s.level == 2 and s.title in required}


def _runbooks(release_docs: Any, kit: Any) -> dict[str, dict[str, str]]:
    books = [s for s in kit.sections(release_docs.text("RUNBOOK.md")) if s.level == 1]
    return {b.title.removeprefix("Runbook:").strip(): _level2(kit.sections(b.text), RUNBOOK) for b in books}  # fmt: skip


@pytest.mark.kata_gate("a required section of DESIGN.md, RUNBOOK.md or the release notes is missing, a placeholder, or not prose about the platform")  # fmt: skip
def test_release_sections_are_prose(release_docs: Any, release_kit: Any, kata: Any) -> None:
    kit = release_kit
    vocabulary = _vocabulary(kata)
    shapes: dict[tuple[str, ...], str] = {}
    pairs = _pairs(kata)
    for name in ("DESIGN.md", "RUNBOOK.md", "notes-1.0.0.md"):  # rt27-rel-vocab-salad
        w = _words(release_docs.text(name))
        mine = list(zip(w, w[1:], strict=False))
        known = sum(p in pairs for p in mine) / max(1, len(mine))
        assert known >= MIN_OWN_PAIRS, (
            f"release/{name}: only {known:.0%} of its adjacent word pairs occur in the kata's own texts "
            f"(honest documents have 30 % or more): its sentences are not written about the platform"
        )
    docs = {
        "DESIGN.md": _level2(kit.sections(release_docs.text("DESIGN.md")), DESIGN),
        "notes-1.0.0.md": _level2(kit.sections(release_docs.text("notes-1.0.0.md")), NOTES),
    }
    for name, book in _runbooks(release_docs, kit).items():
        docs[f"RUNBOOK.md, runbook {name}"] = book
    seen: dict[frozenset[str], str] = {}
    for where, sections in docs.items():
        required = (
            NOTES if where.startswith("notes") else DESIGN if where == "DESIGN.md" else RUNBOOK
        )
        for title in required:
            assert title in sections, f"{where}: the section `## {title}` is missing"
            why = _prose_problem(sections[title], vocabulary)
            assert why is None, f"{where}: the section `## {title}` is not written out: {why}"
            words = frozenset(re.findall(r"[a-z0-9]+", sections[title].lower()))
            for other, said in seen.items():
                shared = len(words & other) / len(words | other)
                assert shared < 0.8, f"{where}: the section `## {title}` says what {said} says ({shared:.0%} of their words are the same)"  # fmt: skip
            seen[words] = f"{where}'s `## {title}`"
            shape = _skeleton(sections[title])
            assert len(shape) < 10 or shape not in shapes, f"{where}: the section `## {title}` is {shapes.get(shape)}'s sentences with other words in the blanks"  # fmt: skip
            shapes[shape] = f"{where}'s `## {title}`"


@pytest.mark.kata_gate("a document names a metric, alert, recording rule, endpoint or platformctl command that the platform does not have, or a Node.js older than the CLI needs")  # fmt: skip
def test_release_names_are_real(release_docs: Any, release_kit: Any, kata: Any) -> None:
    kit = release_kit
    endpoints, families = kit.api_table(kata)
    assert len(endpoints) >= 10 and len(families) >= 10, "API.md's tables could not be read"
    metrics = kit.metric_names(families)
    alerts, records, _ = kit.slo_rules(kata)
    engines = re.findall(r"\d+", release_docs.package()["engines"]["node"])
    node = (int(engines[0]), int(engines[1]) if len(engines) > 1 else 0)
    for name in kit.files:
        said = kit.mentions(release_docs.text(name))
        for metric in said["metrics"]:
            assert metric in metrics, f"release/{name} names the metric {metric}, which the platform does not expose (API.md's table)"  # fmt: skip
        for rule in said["rules"]:
            assert rule in records, f"release/{name} names the recording rule {rule}, which slo_rules.yml does not define ({records})"  # fmt: skip
        for method, path in said["endpoints"]:
            assert kit.endpoint_known(method, path, endpoints), f"release/{name} names the endpoint {method} {path}, which API.md's table does not have"  # fmt: skip
        for command in said["commands"]:
            assert kit.command_known(command), f"release/{name} names `platformctl {command}`, which is not a command of cli/CLI.md"  # fmt: skip
        text = release_docs.text(name)
        for m in re.finditer(r"\bplatformctl\s+(jobs|nodes)\s+([a-z][a-z-]*)", text):
            assert kit.command_known(f"{m[1]} {m[2]}"), f"release/{name} names `platformctl {m[1]} {m[2]}`, which is not a command of cli/CLI.md"  # fmt: skip
        for alert in re.findall(r"\bPlatform[A-Z][A-Za-z0-9]+\b", text):
            assert alert in alerts, f"release/{name} names the alert {alert}, which slo_rules.yml does not have ({alerts})"  # fmt: skip
        for metric in re.findall(
            r"(?<![\w:])[a-z][a-z0-9]*(?:_[a-z0-9]+)*_(?:total|seconds|ratio|bytes|info|bucket|count|sum)(?![\w:])",
            text,
        ):
            assert metric in metrics, f"release/{name} names the metric {metric}, which the platform does not expose (API.md's table)"  # fmt: skip
        for m in re.finditer(r"\b(?i:node\.?js)\s*(?:>=|≥|v)?\s*(\d+)(?:\.(\d+))?", text):
            version = (int(m[1]), int(m[2] or 0))
            assert version >= node, f"release/{name} says Node.js {m[1]}{'.' + m[2] if m[2] else ''}, older than the {node[0]}.{node[1]} cli/package.json needs"  # fmt: skip


@pytest.mark.kata_gate("DESIGN.md leaves out an endpoint of API.md, a component of components.py or a failure mode (lost node, grace, expired)")  # fmt: skip
def test_release_design_covers_the_api_and_the_components(release_docs: Any, release_kit: Any, kata: Any) -> None:  # fmt: skip
    kit = release_kit
    sections = _level2(kit.sections(release_docs.text("DESIGN.md")), DESIGN)
    endpoints, _ = kit.api_table(kata)
    api = " ".join(sections.get("API", "").split())
    for method, template in endpoints:
        assert f"{method} {template}" in api, f"DESIGN.md's API section does not name `{method} {template}`"  # fmt: skip
    arch = sections.get("Architecture", "")
    for name in (*COMPONENTS, "control.py", "routes.py", "metrics.py"):
        assert re.search(rf"\b{re.escape(name)}\b", arch), f"DESIGN.md's Architecture section does not name {name}"  # fmt: skip
    failures = sections.get("Failure modes", "").lower()
    for word in ("lost", "grace", "expired"):
        assert re.search(rf"\b{word}\b", failures), f"DESIGN.md's Failure modes section does not say `{word}`"  # fmt: skip


@pytest.mark.kata_gate("a runbook is missing for an alert or drill, or its Diagnosis or Mitigation names no metric, endpoint or command to use")  # fmt: skip
def test_release_runbooks_look_and_act(release_docs: Any, release_kit: Any, kata: Any) -> None:
    kit = release_kit
    alerts, _, reads = kit.slo_rules(kata)
    books = _runbooks(release_docs, kit)
    want = {*alerts, "node-lost", "license-expiry"}
    assert set(books) == want, f"RUNBOOK.md's runbooks are {sorted(books)}, expected exactly {sorted(want)}"  # fmt: skip
    text = release_docs.text("RUNBOOK.md")
    for name, book in books.items():
        for title in ("Diagnosis", "Mitigation"):
            said = kit.mentions(book.get(title, ""))
            acts = said["endpoints"] or said["commands"]
            assert acts, f"RUNBOOK.md, runbook {name}: `## {title}` names no endpoint (`GET /v1/...`) and no `platformctl ...` command"  # fmt: skip
        looks = kit.mentions(book.get("Diagnosis", ""))
        assert looks["metrics"] or looks["rules"], f"RUNBOOK.md, runbook {name}: `## Diagnosis` names no metric"  # fmt: skip
    for alert in alerts:
        block = text[text.index(f"Runbook: {alert}") :]
        nxt = re.search(r"^# Runbook:", block[1:], re.M)
        block = block[: nxt.start() + 1] if nxt else block
        said = kit.mentions(block)
        named = set(said["metrics"]) | set(said["rules"])
        assert named & reads, f"RUNBOOK.md, runbook {alert}: it names none of the metrics its rules read ({sorted(reads)})"  # fmt: skip


def _semver_key(version: str) -> tuple[Any, ...]:
    m = SEMVER.match(version)
    assert m, f"CHANGELOG.md: {version!r} is not a SemVer 2.0.0 version"
    pre = m[4]
    # A release ranks above its pre-releases; numeric identifiers below alphanumeric ones.
    ids = () if pre is None else tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))  # fmt: skip
    return (int(m[1]), int(m[2]), int(m[3]), pre is None, ids)


@pytest.mark.kata_gate("the CHANGELOG is not a SemVer history newest first, with real dates that never go forward and none in the future, items that say something, ending in components.VERSION")  # fmt: skip
def test_release_changelog_is_a_history(release_docs: Any, release_kit: Any, components: Any) -> None:  # fmt: skip
    kit = release_kit
    sections = kit.sections(release_docs.text("CHANGELOG.md"))
    assert sections and sections[0].level == 1 and sections[0].title == "Changelog", "CHANGELOG.md starts with `# Changelog`"  # fmt: skip
    heads = [s for s in sections if s.level == 2]
    if heads and heads[0].title == "[Unreleased]":
        heads = heads[1:]
    assert len(heads) >= 2, f"CHANGELOG.md has {len(heads)} releases, expected at least two"
    releases = []
    for h in heads:
        m = re.fullmatch(r"\[([^\]]+)\] - (\d{4}-\d{2}-\d{2})", h.title)
        assert m, f"CHANGELOG.md: `## {h.title}` is not `## [X.Y.Z] - YYYY-MM-DD` (only the first may be [Unreleased])"  # fmt: skip
        try:
            day = datetime.date.fromisoformat(m[2])
        except ValueError:
            raise AssertionError(f"CHANGELOG.md: {m[2]} ({m[1]}) is not a calendar date") from None
        latest = datetime.date.today() + datetime.timedelta(days=1)  # any time zone's today
        assert day <= latest, f"CHANGELOG.md: {m[1]} is dated {day}, in the future"
        releases.append((m[1], day, h.text))
    assert releases[0][0] == components.VERSION, f"CHANGELOG.md's newest release is {releases[0][0]}, components.VERSION is {components.VERSION}"  # fmt: skip
    for (v1, d1, _), (v2, d2, _) in zip(releases, releases[1:], strict=False):
        assert _semver_key(v1) > _semver_key(v2), f"CHANGELOG.md: {v1} is listed above {v2} but does not come after it in SemVer precedence"  # fmt: skip
        assert d1 >= d2, f"CHANGELOG.md: {v1} ({d1}) is listed above {v2} ({d2}) with an earlier date"  # fmt: skip
    for version, _, text in releases:
        kinds = {s.title: s.text for s in kit.sections(text) if s.level == 3}
        assert kinds, f"CHANGELOG.md: release {version} has no `### Added`/`Changed`/... section"
        for kind, body in kinds.items():
            assert kind in CHANGE_TYPES, f"CHANGELOG.md: release {version} has `### {kind}`, expected one of {CHANGE_TYPES}"  # fmt: skip
            items = [ln for ln in body.splitlines() if re.match(r"^- \S", ln)]
            assert items, f"CHANGELOG.md: release {version}, `### {kind}` has no `- ` item"
            for item in items:
                said = re.findall(r"[A-Za-z0-9][A-Za-z0-9'/{}.:_-]*", item)
                assert len(said) >= 3, f"CHANGELOG.md: release {version}, `### {kind}`: the item {item!r} says nothing (fewer than 3 words)"  # fmt: skip


@pytest.mark.kata_gate("the release notes disagree with the CHANGELOG or cli/package.json (version, date, API version, CLI version, Node.js)")  # fmt: skip
def test_release_notes_agree(release_docs: Any, release_kit: Any, components: Any) -> None:
    kit = release_kit
    notes = release_docs.text("notes-1.0.0.md")
    changelog = release_docs.text("CHANGELOG.md")
    dated = dict(re.findall(r"^## \[([^\]]+)\] - (\S+)\s*$", changelog, re.M))
    released = re.search(r"^Released: (\d{4}-\d{2}-\d{2})\s*$", notes, re.M)
    assert released, "notes-1.0.0.md has no `Released: YYYY-MM-DD` line"
    assert released[1] == dated.get(components.VERSION), (
        f"notes-1.0.0.md says Released: {released[1]}, the CHANGELOG dates {components.VERSION} {dated.get(components.VERSION)}"  # fmt: skip
    )
    sections = _level2(kit.sections(notes), NOTES)
    compat = sections.get("Compatibility", "")
    package = release_docs.package()
    node = re.sub(r"^[>=^~ v]+", "", package["engines"]["node"])
    for what, value in (("the API version", "v1"), ("the CLI's version", package["version"]),
                        ("the oldest Node.js the CLI needs", node)):  # fmt: skip
        assert re.search(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", compat), (
            f"notes-1.0.0.md's Compatibility section does not name {what} ({value})"
        )
    said = kit.mentions(sections.get("Highlights", ""))
    assert said["endpoints"] or said["commands"], "notes-1.0.0.md's Highlights name no endpoint and no `platformctl` command"  # fmt: skip
