"""Helpers for kata tests (public and hidden): the things every kata's tests would otherwise copy.

Tests import from here freely; learner modules must not (it is grader-side code).

    from harness.testing import hidden_settings, wrote_nothing

    @hidden_settings()
    @given(n=st.integers(1, 3000))
    def test_plan_any_size(schedule, n): ...

    if wrote_nothing(C):
        raise KataTodo("matmul_tiled wrote nothing yet")
"""

from __future__ import annotations

from typing import Any


def hidden_settings(max_examples: int = 60, **overrides: Any) -> Any:
    """Hypothesis settings for hidden tests: derandomized (a grade never depends on luck), no
    example database (nothing written into a learner's tree), no shrinking (a wrong answer fails
    fast and the message is the first counterexample), no deadline (machines differ), and
    function-scoped fixtures allowed (the `kata` fixtures are module-scoped anyway)."""
    from hypothesis import HealthCheck, Phase, settings

    base: dict[str, Any] = dict(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    base.update(overrides)
    return settings(**base)


def wrote_nothing(out: Any, sentinel: float | None = None) -> bool:
    """True when a kernel left its output exactly as the test filled it: all NaN (the default
    fill) or all `sentinel`. A stub kernel with an empty body is then *not started*, not failing."""
    import numpy as np

    arr = np.asarray(out)
    if sentinel is None:
        return bool(arr.size) and bool(np.all(np.isnan(arr)))
    return bool(np.all(arr == sentinel))
