"""Prometheus' own checker (given): `promtool check rules` and `promtool test rules` on your rules.
The tests grade with these; run them yourself too (README, "Trying your rules")."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from harness.toolchain import find_tool, install_advice

TIMEOUT_S = 120  # a rule file that makes promtool loop costs bounded time


class RuleFileError(AssertionError):
    """promtool refused the rule file itself (YAML, PromQL, a template): a mistake in the rules
    you wrote, reported as such, never as a wrong alert."""

    kata_learner_crash = "promtool refused the rule file (a syntax error, not a wrong answer)"


def binary() -> str:
    """The promtool executable (PATH, or $KATA_TOOL_PROMTOOL)."""
    path = find_tool("promtool")
    if path is None:
        raise FileNotFoundError(f"promtool is not installed: {install_advice('promtool')}")
    return str(path)


def rule_file(*parts: dict[str, Any]) -> dict[str, Any]:
    """One rule file of the groups of every part (recording_rules(spec), alerting_rules(spec))."""
    groups: list[Any] = []
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("groups"), list):
            raise RuleFileError(
                f"a rule file is a mapping with a list 'groups'; got {str(part)[:200]}"
            )
        groups += part["groups"]
    return {"groups": groups}


def _run(args: list[str], cwd: Path) -> tuple[int, str]:
    try:
        p = subprocess.run(
            [binary(), *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return 124, f"promtool {args[0]} {args[1]} ran past {TIMEOUT_S} s"
    return p.returncode, (p.stdout + p.stderr).strip()


def check_rules(rules: dict[str, Any]) -> str:
    """`promtool check rules` on `rules` (written as JSON, which is YAML): its output; raises
    RuleFileError with promtool's words when it refuses the file."""
    with tempfile.TemporaryDirectory(prefix="slo-rules-") as tmp:
        path = Path(tmp) / "rules.yml"
        path.write_text(json.dumps(rules, indent=1))
        rc, out = _run(["check", "rules", path.name], Path(tmp))
    if rc != 0:
        raise RuleFileError(f"promtool check rules refused the rule file:\n{out[-3000:]}")
    return out


def run_tests(
    rules: dict[str, Any], groups: list[dict[str, Any]], evaluation_interval: str = "1m"
) -> tuple[bool, str]:
    """`promtool test rules` of `rules` against unit-test `groups` (each with interval,
    input_series, promql_expr_test / alert_rule_test): (passed, promtool's output). Raises
    RuleFileError when promtool cannot load the rules at all."""
    check_rules(rules)
    with tempfile.TemporaryDirectory(prefix="slo-test-") as tmp:
        Path(tmp, "rules.yml").write_text(json.dumps(rules, indent=1))
        tests = {
            "rule_files": ["rules.yml"],
            "evaluation_interval": evaluation_interval,
            # promtool evaluates groups in random order unless told (and an alert evaluated
            # before the recording rules it reads sees the last evaluation's samples, gone
            # stale after 5 min): the file's order, as Prometheus' own intervals make it.
            "group_eval_order": [g.get("name") for g in rules["groups"] if isinstance(g, dict)],
            "tests": groups,
        }
        Path(tmp, "tests.yml").write_text(json.dumps(tests))
        rc, out = _run(["test", "rules", "tests.yml"], Path(tmp))
    if rc != 0 and ("error" in out.lower() and "exp:" not in out):
        raise RuleFileError(f"promtool test rules could not evaluate the rules:\n{out[-3000:]}")
    return rc == 0, out


def failures(out: str) -> list[tuple[str, str, str, str]]:
    """promtool test's failed checks: (expr, time, expected, got), in its order."""
    found: list[tuple[str, str, str, str]] = []
    lines = out.splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("expr:") and ", time:" in s:
            expr, _, when = s[len("expr:") :].rpartition(", time:")
            exp = got = ""
            for nxt in lines[i + 1 : i + 4]:
                t = nxt.strip()
                if t.startswith("exp:"):
                    exp = t[4:].strip()
                elif t.startswith("got:"):
                    got = t[4:].strip()
            expr = expr.strip()
            try:  # Go's %q quoting, as JSON reads it
                expr = json.loads(expr)
            except ValueError:
                expr = expr.strip('"')
            found.append((expr, when.strip().rstrip(","), exp, got))
    return found
