"""Public tests of the release artifacts (task release, release/RELEASE.md): the documents'
required sections in order and the versions that must agree. The hidden tests read every
section as prose, check every metric, rule, endpoint and command the documents name against
API.md, slo_rules.yml and CLI.md, and the CHANGELOG's history."""

from __future__ import annotations

import re
from typing import Any

DESIGN = ["Context", "Goals", "Non-goals", "Architecture", "API", "Failure modes",
          "Alternatives considered"]  # fmt: skip
RUNBOOK = ["Symptoms", "Impact", "Diagnosis", "Mitigation", "Verification"]
NOTES = ["Highlights", "Upgrade notes", "Compatibility", "Known issues"]


def _in_order(titles: list[str], required: list[str], where: str) -> None:
    for title in required:
        assert titles.count(title) == 1, f"{where}: `## {title}` appears {titles.count(title)} times, expected once"  # fmt: skip
    at = [titles.index(t) for t in required]
    assert at == sorted(at), f"{where}: the sections are {titles}, expected {required} in this order"  # fmt: skip


def test_release_documents_have_their_sections(release_docs: Any, release_kit: Any) -> None:
    design = release_kit.sections(release_docs.text("DESIGN.md"))
    assert design and design[0].level == 1 and design[0].title.startswith("Design: "), (
        "DESIGN.md starts with `# Design: <title>`"
    )
    _in_order([s.title for s in design if s.level == 2], DESIGN, "DESIGN.md")
    books = [s for s in release_kit.sections(release_docs.text("RUNBOOK.md")) if s.level == 1]
    names = [s.title.removeprefix("Runbook:").strip() for s in books]
    assert {"node-lost", "license-expiry"} <= set(names), f"RUNBOOK.md's runbooks are {names}"
    for book in books:
        titles = [s.title for s in release_kit.sections(book.text) if s.level == 2]
        _in_order(titles, RUNBOOK, f"RUNBOOK.md, {book.title}")
    notes = release_kit.sections(release_docs.text("notes-1.0.0.md"))
    _in_order([s.title for s in notes if s.level == 2], NOTES, "notes-1.0.0.md")


def test_release_versions_agree(release_docs: Any, components: Any) -> None:
    changelog = release_docs.text("CHANGELOG.md")
    released = re.findall(r"^## \[([^\]]+)\] - (\d{4}-\d{2}-\d{2})\s*$", changelog, re.M)
    assert released, "CHANGELOG.md has no `## [X.Y.Z] - YYYY-MM-DD` release"
    assert released[0][0] == components.VERSION, (
        f"CHANGELOG.md's newest release is {released[0][0]}, components.VERSION is {components.VERSION}"
    )
    assert release_docs.package()["version"] == components.VERSION, "cli/package.json's version"
    notes = release_docs.text("notes-1.0.0.md")
    title = re.search(r"^# platform (\S+) release notes\s*$", notes, re.M)
    assert title and title[1] == components.VERSION, (
        f"notes-1.0.0.md's title should be `# platform {components.VERSION} release notes`"
    )
