"""Public tests of continuous-batching, tasks "cost" (cost.py) and "metrics" (metrics.py)."""

from __future__ import annotations

from typing import Any

import pytest

approx = lambda x: pytest.approx(x, rel=1e-9)


# --------------------------------------------------------------------------- cost
def test_cost_llama3_8b_on_h100(cost: Any, hardware: Any, engine: Any) -> None:
    c = cost.derive_step_cost(hardware.LLAMA_3_8B, hardware.H100_SXM)
    # 16.06 GB of bf16 weights at 80 % of 3.35 TB/s; 2 x 8.03 GFLOP per token at 60 % of 989.4.
    assert c.weights_s == approx(8_030_261_248 * 2 / (0.8 * 3.35e12))
    assert c.kv_s_per_token == approx(131072 / (0.8 * 3.35e12))  # 2 x 32 x 8 x 128 x 2 bytes
    assert c.flop_s_per_token == approx(2 * 8_030_261_248 / (0.6 * 989.4e12))
    assert c.overhead_s == 1e-3
    assert c.swap_s_per_token == approx(131072 / 64e9)
    # engine.H100_LLAMA_3_8B rounds these for the traces.
    r = engine.H100_LLAMA_3_8B
    for name in ("weights_s", "kv_s_per_token", "flop_s_per_token", "swap_s_per_token"):
        assert getattr(c, name) == pytest.approx(getattr(r, name), rel=0.03), name


def test_cost_tensor_parallel_and_dtypes(cost: Any, hardware: Any, engine: Any) -> None:
    c = cost.derive_step_cost(hardware.LLAMA_3_70B, hardware.H100_SXM, tensor_parallel=2)
    assert c.weights_s == approx(70_553_706_496 * 2 / 2 / (0.8 * 3.35e12))
    assert c.kv_s_per_token == approx(2 * 80 * 4 * 128 * 2 / (0.8 * 3.35e12))  # 4 KV heads each
    assert c.flop_s_per_token == approx(70_553_706_496 / (0.6 * 989.4e12))
    r = engine.H100X2_LLAMA_3_70B
    assert c.weights_s == pytest.approx(r.weights_s, rel=0.03)
    f = cost.derive_step_cost(hardware.LLAMA_3_8B, hardware.H100_SXM, dtype="fp8", kv_dtype="fp8")
    assert f.weights_s == approx(8_030_261_248 / (0.8 * 3.35e12))  # half the bytes
    assert f.flop_s_per_token == approx(2 * 8_030_261_248 / (0.6 * 1978.9e12))  # twice the rate
    assert f.kv_s_per_token == approx(65536 / (0.8 * 3.35e12))
    with pytest.raises(ValueError, match="fp8"):
        cost.derive_step_cost(hardware.LLAMA_3_8B, hardware.A100_SXM, dtype="fp8")
    with pytest.raises(ValueError):
        cost.derive_step_cost(hardware.LLAMA_3_70B, hardware.H100_SXM, tensor_parallel=3)


def test_cost_prefill_is_compute_bound_decode_is_memory_bound(cost: Any, engine: Any) -> None:
    c = engine.H100_LLAMA_3_8B  # 6 ms weights, 50 ns/token KV, 27 us/token matmuls, 1 ms
    assert cost.ridge_tokens(c) == pytest.approx(6e-3 / 2.7e-5)  # 222 tokens
    assert cost.prefill_time(c, 2048) == pytest.approx(1e-3 + 2048 * 2.7e-5)  # compute-bound
    assert cost.prefill_time(c, 100) == pytest.approx(1e-3 + 6e-3 + 100 * 5e-8)  # memory-bound
    # One request decoding alone: 7 ms a token. 64 at 1000 tokens of context: 10.2 ms a step.
    assert cost.decode_tokens_per_s(c, 1, 0) == pytest.approx(1 / (1e-3 + 6e-3 + 5e-8))
    step = 1e-3 + 6e-3 + 5e-8 * 64 * 1001
    assert cost.decode_tokens_per_s(c, 64, 1000) == pytest.approx(64 / step)


# --------------------------------------------------------------------------- metrics
def result(engine: Any, arrival: float, times: list[float], rid: int = 0) -> Any:
    return engine.RequestResult(rid, arrival, 100, len(times), 0, list(times))


def test_metrics_one_request(metrics: Any, engine: Any) -> None:
    m = metrics.request_metrics(result(engine, 0.5, [1.0, 1.1, 1.3, 1.6]))
    assert m.ttft == pytest.approx(0.5)
    assert m.tpot == pytest.approx(0.2), "TPOT leaves the first token out: (1.6 - 1.0) / 3"
    assert m.itl == pytest.approx((0.1, 0.2, 0.3))
    assert m.e2e == pytest.approx(1.1)
    one = metrics.request_metrics(result(engine, 0.0, [0.25]))
    assert one.tpot is None and one.itl == () and one.ttft == one.e2e == 0.25


def test_metrics_percentile_interpolates(metrics: Any) -> None:
    v = [4.0, 1.0, 3.0, 2.0]
    assert metrics.percentile(v, 50) == pytest.approx(2.5)
    assert metrics.percentile(v, 0) == 1.0 and metrics.percentile(v, 100) == 4.0
    assert metrics.percentile(v, 90) == pytest.approx(3.7)
    assert metrics.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        metrics.percentile([], 50)
    with pytest.raises(ValueError):
        metrics.percentile(v, 101)


def test_metrics_summary_and_goodput(metrics: Any, engine: Any) -> None:
    rs = [
        result(engine, 0.0, [0.1, 0.2, 0.3], 0),  # TTFT 0.1, TPOT 0.1: meets both
        result(engine, 0.0, [0.5, 0.55], 1),  # TTFT 0.5: misses the TTFT SLO
        result(engine, 1.0, [1.1, 1.5, 1.9], 2),  # TPOT 0.4: misses the TPOT SLO
        result(engine, 1.5, [1.7], 3),  # one token: only TTFT counts
    ]
    s = metrics.summarize(rs, ttft_slo=0.25, tpot_slo=0.2)
    assert s.requests == 4 and s.output_tokens == 9
    assert s.duration == pytest.approx(1.9)  # first arrival 0.0, last token 1.9
    assert s.throughput == pytest.approx(9 / 1.9) and s.request_rate == pytest.approx(4 / 1.9)
    assert s.slo_attainment == pytest.approx(0.5)
    assert s.goodput == pytest.approx(2 / 1.9)
    assert s.ttft[50] == pytest.approx(0.15)  # TTFTs 0.1, 0.5, 0.1, 0.2
    assert s.tpot[50] == pytest.approx(0.1)  # TPOTs 0.1, 0.05, 0.4 (request 3 has none)
    assert s.itl[99] == pytest.approx(0.4)  # gaps 0.1 0.1 0.05 0.4 0.4
    assert set(s.ttft) == {50, 90, 99}
    with pytest.raises(ValueError):
        metrics.summarize([], ttft_slo=1, tpot_slo=1)
