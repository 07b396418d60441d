"""The canary judge: promote, hold or roll back, on evidence (task `canary`)."""

from __future__ import annotations

import math
import statistics

from .release import HOLD, PROMOTE, ROLLBACK, Arm, Judgement, Policy


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def errors_p_value(
    base_errors: int, base_requests: int, canary_errors: int, canary_requests: int
) -> float:
    """One-sided Fisher exact test that the canary's error rate is higher than the baseline's:
    with the total errors fixed, the hypergeometric probability that the canary got at least
    `canary_errors` of them (scipy.stats.fisher_exact([[ce, cr - ce], [be, br - be]],
    alternative="greater")). ValueError for counts that are not 0 <= errors <= requests."""
    for e, n in ((base_errors, base_requests), (canary_errors, canary_requests)):
        if not (isinstance(e, int) and isinstance(n, int) and 0 <= e <= n):
            raise ValueError(
                f"error and request counts must satisfy 0 <= errors <= requests: {e}, {n}"
            )
    total = base_errors + canary_errors
    n = base_requests + canary_requests
    top = min(total, canary_requests)
    denom = _log_comb(n, canary_requests)
    terms = [
        _log_comb(total, k) + _log_comb(n - total, canary_requests - k) - denom
        for k in range(canary_errors, top + 1)
    ]
    peak = max(terms)
    return min(1.0, math.exp(peak) * math.fsum(math.exp(t - peak) for t in terms))


def latency_p_value(base_ms: list[float], canary_ms: list[float]) -> float:
    """One-sided Mann-Whitney U test that canary latencies are stochastically larger: U of the
    canary (ties count 1/2), the normal approximation with the tie-corrected variance and a 0.5
    continuity correction (scipy.stats.mannwhitneyu(canary, base, alternative="greater",
    method="asymptotic")); 1.0 when every latency is the same (no evidence, and no variance).
    ValueError when either sample is empty."""
    n1, n2 = len(canary_ms), len(base_ms)
    if not (n1 and n2):
        raise ValueError("latency_p_value needs at least one sample on each side")
    pooled = sorted([(x, 1) for x in canary_ms] + [(x, 0) for x in base_ms])
    n = n1 + n2
    rank_sum, ties, i = 0.0, 0.0, 0
    while i < n:
        j = i
        while j < n and pooled[j][0] == pooled[i][0]:
            j += 1
        mid = (i + 1 + j) / 2  # the average of ranks i+1..j
        rank_sum += mid * sum(1 for k in range(i, j) if pooled[k][1])
        t = j - i
        ties += t**3 - t
        i = j
    u = rank_sum - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (u - mean - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


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
    for name, arm in (("baseline", baseline), ("canary", canary)):
        if arm.requests < policy.min_requests or len(arm.latencies_ms) < policy.min_latencies:
            return Judgement(
                HOLD,
                [
                    f"{name} has {arm.requests} requests and {len(arm.latencies_ms)} latency "
                    f"samples; the judge needs {policy.min_requests} and {policy.min_latencies}"
                ],
            )
    err_effect = canary.errors / canary.requests - baseline.errors / baseline.requests
    err_p = errors_p_value(baseline.errors, baseline.requests, canary.errors, canary.requests)
    lat_effect = (
        statistics.median(canary.latencies_ms) / statistics.median(baseline.latencies_ms) - 1
    )
    lat_p = latency_p_value(list(baseline.latencies_ms), list(canary.latencies_ms))
    regressions, unsure = [], []
    for metric, effect, p, margin in (
        ("error rate", err_effect, err_p, policy.error_margin),
        ("median latency", lat_effect, lat_p, policy.latency_margin),
    ):
        if effect > margin:
            line = (
                f"{metric}: +{effect:.4g} (margin {margin:g}), p = {p:.3g} (alpha {policy.alpha:g})"
            )
            (regressions if p < policy.alpha else unsure).append(line)
    if regressions:
        return Judgement(ROLLBACK, regressions)
    if unsure:
        return Judgement(HOLD, unsure)
    return Judgement(PROMOTE, ["no metric is worse by more than its margin"])
