"""Task `answers`, typed in: the facts of questions.cu, read off once from the tools' output."""

from __future__ import annotations

from pathlib import Path

__all__ = ["answers"]


def answers(source: str | Path = "questions.cu") -> dict[str, object]:
    """The facts of README.md's "answers" task (measured once, for questions.cu)."""
    return {
        "ptx_writer": "cicc",
        "images_sm_90": [("elf", 90), ("ptx", 90)],
        "nvcc_O0_changes_sass": False,
        "registers": {
            "horner<48>": {"sm_75": 58, "sm_90": 58},
            "transpose": {"sm_75": 10, "sm_90": 12},
            "dot": {"sm_75": 12, "sm_90": 16},
        },
        "more_registers_on": {"horner<48>": "same", "transpose": "sm_90", "dot": "sm_90"},
        "instructions": {
            "horner<48>": {"O0": 514, "O3": 114},
            "transpose": {"O0": 96, "O3": 28},
            "dot": {"O0": 220, "O3": 36},
        },
        "spill_stores_maxrreg24": {"horner<48>": 192, "transpose": 0, "dot": 0},
        "store_lines": {"horner<48>": [48], "transpose": [29], "dot": []},
    }
