"""The canary judge: promote, hold or roll back, on evidence (task `canary`)."""

from __future__ import annotations

from harness import todo

from .release import Arm, Judgement, Policy


def errors_p_value(
    base_errors: int, base_requests: int, canary_errors: int, canary_requests: int
) -> float:
    """One-sided Fisher exact test that the canary's error rate is higher than the baseline's:
    with the total errors fixed, the hypergeometric probability that the canary got at least
    `canary_errors` of them (scipy.stats.fisher_exact([[ce, cr - ce], [be, br - be]],
    alternative="greater")). ValueError for counts that are not 0 <= errors <= requests."""
    todo("errors_p_value")


def latency_p_value(base_ms: list[float], canary_ms: list[float]) -> float:
    """One-sided Mann-Whitney U test that canary latencies are stochastically larger: U of the
    canary (ties count 1/2), the normal approximation with the tie-corrected variance and a 0.5
    continuity correction (scipy.stats.mannwhitneyu(canary, base, alternative="greater",
    method="asymptotic")); 1.0 when every latency is the same (no evidence, and no variance).
    ValueError when either sample is empty."""
    todo("latency_p_value")


def judge(baseline: Arm, canary: Arm, policy: Policy) -> Judgement:
    """PROMOTE, HOLD or ROLLBACK for `canary` against `baseline` over the same window.

    1. HOLD while either arm has fewer than policy.min_requests requests or fewer than
       policy.min_latencies latency samples (no decision on no evidence).
    2. Errors: effect = canary error rate - baseline error rate, p = errors_p_value. Latency:
       effect = median(canary) / median(baseline) - 1, p = latency_p_value. A metric is a
       regression when p < alpha and effect > its margin; inconclusive when effect > its
       margin but p >= alpha; fine otherwise.
    3. ROLLBACK on any regression; else HOLD on any inconclusive metric; else PROMOTE.
    """
    todo("judge")
