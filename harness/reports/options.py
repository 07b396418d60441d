"""What a report writer may need besides the results (its own module: the package dispatches to
the writers, and every writer needs these, so they live below both)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ReportOptions:
    """What a writer may need besides the results: where things are, and grader settings."""

    root: Path
    results_dir: Path
    hidden_visibility: str = "after_published"  # Gradescope visibility of hidden tests
    step_summary: bool = True  # append the markdown summary to $GITHUB_STEP_SUMMARY when set
    junit_family: str = "xunit2"  # JUnit shape: xunit2 (schema-valid) or xunit1 (per-test props)

    @property
    def artifacts_dir(self) -> Path:
        return self.results_dir / "artifacts"
