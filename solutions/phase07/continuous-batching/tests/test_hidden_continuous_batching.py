"""Hidden tests of continuous-batching: any GPU and model, any results, every step of random
workloads checked against the rules, other traces, and gates for the known shortcuts.

Examples are derandomized (harness.testing.hidden_settings), so a grade never depends on luck.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.testing import hidden_settings, raises


def req(
    engine: Any,
    rid: int,
    arrival: float,
    prompt: int,
    output: int,
    max_tokens: int = 16,
    priority: int = 0,
) -> Any:
    return engine.Request(rid, arrival, prompt, output, max_tokens, priority)


def times(r: Any) -> list[float]:
    return [round(t, 9) for t in r.token_times]


def p99(values: list[float]) -> float:
    return float(np.percentile(values, 99))


def quantity(run: Any, q: str) -> float:
    rs = run.results
    if q == "makespan":
        return run.end
    if q == "ttft_p99":
        return p99([r.token_times[0] - r.arrival for r in rs])
    if q == "tpot_p99":
        return p99(
            [
                (r.token_times[-1] - r.token_times[0]) / (len(r.token_times) - 1)
                for r in rs
                if len(r.token_times) > 1
            ]
        )
    raise ValueError(q)


# --------------------------------------------------------------------------- cost
@st.composite
def setups(draw: Any) -> dict[str, Any]:
    kv = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    return dict(
        params=draw(st.integers(10**8, 5 * 10**11)),
        layers=draw(st.integers(1, 128)),
        kv=kv,
        head_dim=draw(st.sampled_from([64, 96, 128, 256])),
        mem_bw=draw(st.floats(1e11, 1e13)),
        bf16=draw(st.floats(1e13, 3e15)),
        pcie=draw(st.floats(8e9, 2.6e11)),
        tp=draw(st.sampled_from([1, 2, 3, 4, 5, 6, 8, 12, 16])),  # invalid splits too
        fp8=draw(st.booleans()),  # a GPU without fp8 Tensor Cores: fp8 must be refused
        dtype=draw(st.sampled_from(["bf16", "fp8"])),
        kv_dtype=draw(st.sampled_from(["bf16", "fp8", "fp32"])),
        fe=draw(st.floats(0.1, 1.0)),
        be=draw(st.floats(0.1, 1.0)),
        overhead=draw(st.floats(0.0, 0.01)),
    )


@pytest.mark.kata_gate(
    "derive_step_cost disagrees with the roofline formulas, or accepts a KV-head split or a"
    " dtype without Tensor Cores that it must refuse, on random GPUs and models that are not"
    " the published ones"
)
@hidden_settings(max_examples=80)
@given(s=setups())
def test_cost_any_gpu_and_model(cost: Any, hardware: Any, s: dict[str, Any]) -> None:
    flops = {"bf16": s["bf16"], "fp8": 2 * s["bf16"]} if s["fp8"] else {"bf16": s["bf16"]}
    gpu = hardware.GPUSpec("some GPU", 80 * 2**30, s["mem_bw"], flops, s["pcie"])
    model = hardware.ModelSpec("some model", s["params"], s["layers"], s["kv"], s["head_dim"])
    kw = dict(
        tensor_parallel=s["tp"], dtype=s["dtype"], kv_dtype=s["kv_dtype"],
        flops_efficiency=s["fe"], bandwidth_efficiency=s["be"], overhead_s=s["overhead"],
    )  # fmt: skip
    if s["dtype"] not in flops:
        with raises(
            ValueError,
            f"derive_step_cost must refuse dtype={s['dtype']} on a GPU whose flops have only"
            f" {sorted(flops)} (no Tensor Cores for it)",
        ):
            cost.derive_step_cost(model, gpu, **kw)
        return
    if s["kv"] % s["tp"] and s["tp"] % s["kv"]:
        with raises(
            ValueError,
            f"derive_step_cost must refuse tp={s['tp']} with {s['kv']} KV heads (neither divides the other)",
        ):
            cost.derive_step_cost(model, gpu, **kw)
        return
    c = cost.derive_step_cost(model, gpu, **kw)
    nb = hardware.DTYPE_BYTES
    bw = s["mem_bw"] * s["be"]
    kv_bytes = 2 * s["layers"] * max(1, s["kv"] // s["tp"]) * s["head_dim"] * nb[s["kv_dtype"]]
    rate = gpu.flops[s["dtype"]] * s["fe"]
    want = {
        "weights_s": s["params"] * nb[s["dtype"]] / s["tp"] / bw,
        "kv_s_per_token": kv_bytes / bw,
        "flop_s_per_token": 2 * s["params"] / s["tp"] / rate,
        "swap_s_per_token": kv_bytes / s["pcie"],
        "overhead_s": s["overhead"],
    }
    for name, value in want.items():
        assert getattr(c, name) == pytest.approx(value, rel=1e-9), (
            f"{name} = {getattr(c, name):.6g} for a {s['params']:.3g}-parameter model on "
            f"{s['tp']} GPU(s) of {s['mem_bw']:.3g} B/s, {s['dtype']} / {s['kv_dtype']} KV: "
            f"want {value:.6g}"
        )
    if s["kv_dtype"] == "bf16":  # the defaults: bf16 KV
        kw.pop("kv_dtype")
        d = cost.derive_step_cost(model, gpu, **kw)
        assert d.kv_s_per_token == pytest.approx(want["kv_s_per_token"], rel=1e-9), (
            "derive_step_cost without kv_dtype: kv_s_per_token must be bf16 KV's"
        )


@pytest.mark.kata_gate(
    "ridge_tokens, prefill_time or decode_tokens_per_s disagree with the step-cost formula on"
    " random constants"
)
@hidden_settings(max_examples=60)
@given(
    w=st.floats(1e-4, 0.05), k=st.floats(0, 1e-6), f=st.floats(1e-7, 1e-3), o=st.floats(0, 0.01),
    batch=st.integers(1, 512), context=st.integers(0, 32000), prompt=st.integers(1, 32000),
)  # fmt: skip
def test_cost_regimes_any_constants(
    cost: Any,
    engine: Any,
    w: float,
    k: float,
    f: float,
    o: float,
    batch: int,
    context: int,
    prompt: int,
) -> None:
    c = engine.StepCost(w, k, f, o)
    where = f"StepCost(weights_s={w}, kv_s_per_token={k}, flop_s_per_token={f}, overhead_s={o})"
    assert cost.ridge_tokens(c) == pytest.approx(w / f, rel=1e-9), (
        f"ridge_tokens({where}) must be weights_s / flop_s_per_token = {w / f}"
    )
    want = o + max(f * prompt, w + k * prompt)
    assert cost.prefill_time(c, prompt) == pytest.approx(want, rel=1e-9), (
        f"prefill_time({where}, {prompt}) must be {want}"
    )
    step = o + max(f * batch, w + k * batch * (context + 1))
    assert cost.decode_tokens_per_s(c, batch, context) == pytest.approx(batch / step, rel=1e-9), (
        f"decode_tokens_per_s({where}, {batch}, {context}) must be {batch / step}"
    )


# --------------------------------------------------------------------------- metrics
@st.composite
def runs(draw: Any) -> list[tuple[float, list[float]]]:
    out = []
    for _ in range(draw(st.integers(1, 12))):
        arrival = draw(st.floats(0, 100))
        gaps = draw(st.lists(st.floats(1e-4, 2.0), min_size=1, max_size=8))
        out.append((arrival, list(arrival + np.cumsum(gaps))))
    return out


@pytest.mark.kata_gate(
    "request_metrics() or summarize() disagree with their definitions on random results"
)
@hidden_settings(max_examples=50)
@given(data=runs(), ttft_slo=st.floats(0.01, 3), tpot_slo=st.floats(0.01, 2))
def test_metrics_any_results(
    metrics: Any, engine: Any, data: list, ttft_slo: float, tpot_slo: float
) -> None:
    rs = [
        engine.RequestResult(i, a, 10, len(t), 0, [float(x) for x in t])
        for i, (a, t) in enumerate(data)
    ]
    s = metrics.summarize(rs, ttft_slo=ttft_slo, tpot_slo=tpot_slo)
    ttft = [t[0] - a for a, t in data]
    tpot = [(t[-1] - t[0]) / (len(t) - 1) for a, t in data if len(t) > 1]
    itl = [g for a, t in data for g in np.diff(t)]
    dur = max(t[-1] for a, t in data) - min(a for a, t in data)
    good = sum(
        1
        for a, t in data
        if t[0] - a <= ttft_slo and (len(t) < 2 or (t[-1] - t[0]) / (len(t) - 1) <= tpot_slo)
    )
    tok = sum(len(t) for a, t in data)
    approx = lambda x: pytest.approx(x, rel=1e-7, abs=1e-9)
    want = {
        "requests": len(data), "output_tokens": tok, "duration": dur, "throughput": tok / dur,
        "slo_attainment": good / len(data), "goodput": good / dur,
    }  # fmt: skip
    for q in (50, 90, 99):
        want[f"ttft[{q}]"] = np.percentile(ttft, q)
        want[f"tpot[{q}]"] = np.percentile(tpot, q) if tpot else 0.0
        want[f"itl[{q}]"] = np.percentile(itl, q) if itl else 0.0
        want[f"e2e[{q}]"] = np.percentile([t[-1] - a for a, t in data], q)
    for name, value in want.items():
        field, _, q = name.partition("[")
        got = getattr(s, field)[int(q[:-1])] if q else getattr(s, field)
        assert got == approx(value), (
            f"summary.{name} = {got!r} for {len(data)} requests, want {value!r}"
        )


@pytest.mark.kata_gate(
    "percentile() disagrees with linear interpolation on random values and ranks"
)
@hidden_settings(max_examples=60)
@given(values=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40), q=st.floats(0, 100))
def test_metrics_percentile_any_values(metrics: Any, values: list[float], q: float) -> None:
    assert metrics.percentile(values, q) == pytest.approx(
        np.percentile(values, q), rel=1e-9, abs=1e-6
    ), f"percentile({values}, {q}) must interpolate linearly like numpy: {np.percentile(values, q)}"


# --------------------------------------------------------------------------- static
STAGGERED = [(0, 0.0, 30, 4), (1, 0.005, 30, 1), (2, 0.025, 30, 2)]


@pytest.mark.kata_gate("static batching takes requests in while its batch still runs")
def test_static_staggered_arrivals(engine: Any, toy: Any, schedulers: Any) -> None:
    reqs = [req(engine, *r) for r in STAGGERED]
    r = engine.Engine(toy, num_blocks=64).run(schedulers.StaticBatcher(4), reqs).results
    assert times(r[0]) == [0.01, 0.02, 0.03, 0.04], (
        f"StaticBatcher(4): request 0's token times are {times(r[0])}, not [0.01, 0.02, 0.03, 0.04]"
    )
    assert times(r[1]) == [0.052] and times(r[2]) == [0.052, 0.062], (
        "requests 1 and 2 arrive while request 0's batch runs: they start together after it"
    )


@pytest.mark.kata_gate("static batching does not take requests in priority order")
def test_static_priority_order(engine: Any, toy: Any, schedulers: Any) -> None:
    three = [
        req(engine, 0, 0.0, 10, 1, priority=1),
        req(engine, 1, 0.0, 10, 1),
        req(engine, 2, 0.0, 10, 1, priority=1),
    ]
    r = engine.Engine(toy, num_blocks=64).run(schedulers.StaticBatcher(1), three).results
    assert [times(x)[0] for x in r] == [0.02, 0.01, 0.03], (
        f"StaticBatcher(1): first token times {[times(x)[0] for x in r]}; priority 0 goes first, then arrival order: [0.02, 0.01, 0.03]"
    )


# --------------------------------------------------------------------------- continuous / chunked
def expected_steps(run: Any, reqs: list, max_seqs: int, budget: int, chunked: bool) -> None:
    """Replay the engine's bookkeeping from the step records and check every step's plan
    against the rules (no KV pressure in these runs: blocks are plentiful)."""
    by_id = {r.id: r for r in reqs}
    computed = dict.fromkeys(by_id, 0)
    generated = dict.fromkeys(by_id, 0)
    key = lambda i: (by_id[i].priority, by_id[i].arrival, i)
    for k, step in enumerate(run.steps):
        live = [i for i in by_id if generated[i] < by_id[i].output_len]
        running = sorted((i for i in live if computed[i] > 0), key=key)
        waiting = sorted(
            (i for i in live if computed[i] == 0 and by_id[i].arrival <= step.start), key=key
        )
        left, want = budget, {}
        for i in running:
            rem = by_id[i].prompt_len + generated[i] - computed[i]
            n = min(rem, left) if chunked else (rem if rem <= left else 0)
            if n:
                want[i] = n
                left -= n
        active = len(running)
        for i in waiting:
            rem = by_id[i].prompt_len
            n = min(rem, left) if chunked else (rem if rem <= left else 0)
            if active >= max_seqs or n == 0:
                break
            want[i] = n
            left -= n
            active += 1
        assert step.tokens == want, (
            f"step {k} at t = {step.start:.4f} s scheduled {step.tokens}; the rules give {want} "
            f"(running {running}, waiting {waiting})"
        )
        for i, n in step.tokens.items():
            computed[i] += n
            if computed[i] == by_id[i].prompt_len + generated[i]:
                generated[i] += 1


@st.composite
def workloads(draw: Any) -> list[tuple]:
    n = draw(st.integers(2, 10))
    return [
        (
            i,
            draw(st.floats(0, 0.08)),
            draw(st.integers(1, 120)),
            draw(st.integers(1, 6)),
            8,
            draw(st.integers(0, 1)),
        )
        for i in range(n)
    ]


@pytest.mark.kata_gate(
    "ContinuousBatcher: a step's tokens per request differ from the rules (running requests"
    " their next tokens, then waiting prompts whole, each in priority-then-arrival order, within"
    " max_num_seqs and the token budget) on random workloads"
)
@hidden_settings(max_examples=60)
@given(w=workloads(), max_seqs=st.integers(1, 5), budget=st.sampled_from([128, 200, 400]))
def test_continuous_every_step_follows_the_rules(
    engine: Any, toy: Any, schedulers: Any, w: list, max_seqs: int, budget: int
) -> None:
    reqs = [req(engine, *r) for r in w]
    run = engine.Engine(toy, num_blocks=512).run(
        schedulers.ContinuousBatcher(max_seqs, budget), reqs
    )
    expected_steps(run, reqs, max_seqs, budget, chunked=False)


@pytest.mark.kata_gate(
    "ContinuousBatcher: requests that arrive while others decode do not join the running batch"
    " at the next step (fixed staggered arrivals)"
)
def test_continuous_staggered_arrivals(engine: Any, toy: Any, schedulers: Any) -> None:
    reqs = [req(engine, *r) for r in STAGGERED]
    r = engine.Engine(toy, num_blocks=64).run(schedulers.ContinuousBatcher(), reqs).results
    assert times(r[0]) == [0.01, 0.02, 0.03, 0.04], (
        f"ContinuousBatcher(): request 0's token times are {times(r[0])}, not [0.01, 0.02, 0.03, 0.04]"
    )
    assert times(r[1]) == [0.02] and times(r[2]) == [0.04, 0.05], (
        f"ContinuousBatcher(): requests 1 and 2 join at the next step: times {times(r[1])}, {times(r[2])}, not [0.02], [0.04, 0.05]"
    )


def test_continuous_rejects_a_prompt_over_the_budget(
    engine: Any, toy: Any, schedulers: Any
) -> None:
    with raises(
        ValueError,
        "a 100-token prompt over max_num_batched_tokens=64 without chunked prefill must be refused",
    ):
        engine.Engine(toy, num_blocks=64).run(
            schedulers.ContinuousBatcher(max_num_batched_tokens=64), [req(engine, 0, 0.0, 100, 1)]
        )
    with raises(ValueError, "ContinuousBatcher(preemption='drop') must be refused"):
        schedulers.ContinuousBatcher(preemption="drop")
    # The default token budget is vLLM's 8192: a prompt of 8192 runs, one of 8193 never can.
    big = engine.Engine(toy, num_blocks=1200).run(
        schedulers.ContinuousBatcher(), [req(engine, 0, 0.0, 8192, 1)]
    )
    assert big.steps[0].tokens == {0: 8192}, (
        f"ContinuousBatcher() (default budget 8192) runs a prompt of 8192 as {big.steps[0].tokens}"
    )
    with raises(
        ValueError, "a prompt of 8193 tokens over the default budget of 8192 must be refused"
    ):
        engine.Engine(toy, num_blocks=1200).run(
            schedulers.ContinuousBatcher(), [req(engine, 0, 0.0, 8193, 1)]
        )


@pytest.mark.kata_gate(
    "chunked prefill: a step's tokens per request differ from the rules (running requests"
    " first, then waiting prompts, each in priority-then-arrival order, chunked to what is left"
    " of the token budget, within max_num_seqs) on random workloads"
)
@hidden_settings(max_examples=60)
@given(w=workloads(), max_seqs=st.integers(1, 5), budget=st.sampled_from([16, 48, 100]))
def test_chunked_every_step_follows_the_rules(
    engine: Any, toy: Any, schedulers: Any, w: list, max_seqs: int, budget: int
) -> None:
    reqs = [req(engine, *r) for r in w]
    sched = schedulers.ContinuousBatcher(max_seqs, budget, chunked_prefill=True)
    run = engine.Engine(toy, num_blocks=512).run(sched, reqs)
    expected_steps(run, reqs, max_seqs, budget, chunked=True)


# --------------------------------------------------------------------------- preemption
@pytest.mark.kata_gate(
    "admission reserves KV for max_tokens up front: the over-reservation paging removes"
)
def test_preemption_admits_without_reserving_max_tokens(
    engine: Any, toy: Any, schedulers: Any
) -> None:
    # 6 blocks of 4: both prompts (2 blocks each) fit; prompt + max_tokens (6 blocks) would not.
    two = [req(engine, 0, 0.0, 8, 2), req(engine, 1, 0.0, 8, 2)]
    res = engine.Engine(toy, num_blocks=6, block_size=4).run(schedulers.ContinuousBatcher(), two)
    assert res.steps[0].tokens == {0: 8, 1: 8}, (
        f"ContinuousBatcher() on 6 blocks of 4: step 0 schedules {res.steps[0].tokens}; both 8-token prompts fit (2 blocks each): {{0: 8, 1: 8}}"
    )
    assert times(res.results[1]) == [0.01, 0.02], (
        f"ContinuousBatcher() on 6 blocks of 4: request 1's token times are {times(res.results[1])}, not [0.01, 0.02]"
    )


def test_preemption_swap_falls_back_to_recompute(engine: Any, toy: Any, schedulers: Any) -> None:
    two = [req(engine, 0, 0.0, 6, 8, max_tokens=10), req(engine, 1, 0.0, 5, 8, max_tokens=10)]
    sched = schedulers.ContinuousBatcher(preemption="swap")
    res = engine.Engine(toy, num_blocks=4, block_size=4, num_cpu_blocks=1).run(sched, two)
    assert res.steps[3].preempted == (1,) and not any(s.swapped_in for s in res.steps), (
        f"preemption='swap' with 1 cpu block: step 3 preempts {res.steps[3].preempted} (want (1,)) and nothing may be swapped in"
    )
    assert res.steps[8].tokens == {1: 8}, "no cpu room for its 2 blocks: recomputed instead"


def test_preemption_takes_the_least_important_of_three(
    engine: Any, toy: Any, schedulers: Any
) -> None:
    # 6 blocks of 4; three requests of 6 + 1 tokens hold 2 blocks each. When request 0 needs a
    # third block, request 2 (priority 1 beats arrival order) goes, then request 1 if needed.
    three = [
        req(engine, 0, 0.0, 6, 6, max_tokens=10),
        req(engine, 1, 0.0, 6, 6, max_tokens=10),
        req(engine, 2, 0.0, 6, 6, max_tokens=10, priority=1),
    ]
    res = engine.Engine(toy, num_blocks=6, block_size=4).run(schedulers.ContinuousBatcher(), three)
    first = next(s for s in res.steps if s.preempted)
    assert first.preempted == (2,), f"preempted {first.preempted}, want (2,): the lowest priority"
    assert all(len(r.token_times) == 6 for r in res.results), (
        "every request of the three finishes its 6 tokens after the preemptions"
    )


# --------------------------------------------------------------------------- other traces
def other_trace_budget(
    kata_budget: Any, workload: Any, gen: Any, kind: str, seed: int, make: Any, qs: list[str]
) -> None:
    trace = gen.generate(kind, seed)
    reqs = workload.requests_of(trace)
    mine = workload.engine_for(trace).run(make(None), reqs)
    ref = kata_budget.reference
    ref_wl = ref.module("workload")
    theirs = ref_wl.engine_for(trace).run(make(ref.module("schedulers")), ref_wl.requests_of(trace))
    for q in qs:
        kata_budget.compare(
            lambda q=q: quantity(mine, q), lambda q=q: quantity(theirs, q),
            name=f"{q}-{kind}-{seed}", metric="simulated seconds", ratio=1.05, rounds=1,
        )  # fmt: skip


def test_static_other_trace(kata: Any, kata_budget: Any, workload: Any, schedulers: Any) -> None:
    other_trace_budget(
        kata_budget,
        workload,
        kata.module("gen_traces"),
        "chat",
        31,
        lambda m: (m or schedulers).StaticBatcher(48),
        ["makespan"],
    )


@pytest.mark.kata_gate(
    "ContinuousBatcher(128, 4096): makespan or p99 TPOT over 5 % worse than the rules' on a"
    " generated chat trace"
)
def test_continuous_other_trace(
    kata: Any, kata_budget: Any, workload: Any, schedulers: Any
) -> None:
    other_trace_budget(
        kata_budget,
        workload,
        kata.module("gen_traces"),
        "chat",
        31,
        lambda m: (m or schedulers).ContinuousBatcher(128, 4096),
        ["makespan", "tpot_p99"],
    )


@pytest.mark.kata_gate(
    "ContinuousBatcher(256, 1024, chunked_prefill=True): p99 TPOT or makespan over 5 % worse"
    " than the rules' on a generated rag trace"
)
def test_chunked_other_trace(kata: Any, kata_budget: Any, workload: Any, schedulers: Any) -> None:
    other_trace_budget(
        kata_budget,
        workload,
        kata.module("gen_traces"),
        "rag",
        32,
        lambda m: (m or schedulers).ContinuousBatcher(256, 1024, chunked_prefill=True),
        ["tpot_p99", "makespan"],
    )


@pytest.mark.kata_gate(
    "admission reserves KV for max_tokens up front: the over-reservation paging removes"
)
@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_preemption_other_trace(
    mode: str, kata: Any, kata_budget: Any, workload: Any, schedulers: Any
) -> None:
    other_trace_budget(
        kata_budget,
        workload,
        kata.module("gen_traces"),
        "kv-bound",
        33,
        lambda m: (m or schedulers).ContinuousBatcher(128, 8192, preemption=mode),
        ["makespan", "ttft_p99"],
    )


def test_preemption_interactive_requests_come_first(workload: Any, schedulers: Any) -> None:
    """On the kv-bound trace, priority-0 (interactive) requests wait less than batch ones."""
    trace = workload.load("kv-bound")
    run = workload.engine_for(trace).run(
        schedulers.ContinuousBatcher(128, 8192), workload.requests_of(trace)
    )
    ttft = {
        p: [r.token_times[0] - r.arrival for r in run.results if r.priority == p] for p in (0, 1)
    }
    assert np.mean(ttft[0]) < np.mean(ttft[1]) and math.isfinite(np.mean(ttft[0])), (
        f"ContinuousBatcher on kv-bound: mean TTFT of priority 0 {np.mean(ttft[0])} must be below priority 1's {np.mean(ttft[1])}"
    )


# --------------------------------------------------------------------------- fresh random, KV pressure
def random_setup(rng: Any) -> dict[str, Any]:
    """A random workload for a small KV pool (blocks of 4): requests of 1-40 prompt and 1-20
    output tokens, two priorities, arrivals close together, a pool that holds the biggest
    request but not all of them, sometimes a cpu pool for swapping."""
    rows = []
    for i in range(rng.randint(3, 10)):
        out = rng.randint(1, 20)
        rows.append(
            (i, round(rng.uniform(0, 0.05), 4), rng.randint(1, 40), out,
             out + rng.randint(0, 10), rng.randrange(2))
        )  # fmt: skip
    biggest = max(-(-(p + m) // 4) for _, _, p, _, m, _ in rows)
    chunked = rng.random() < 0.5
    budget = rng.choice([16, 48, 256]) if chunked else max(64, max(r[2] for r in rows))
    return dict(
        rows=rows,
        num_blocks=biggest + rng.randint(0, 4),
        num_cpu_blocks=rng.choice([0, 8, 16, 16, rng.randint(1, 4)]),  # small: swaps overrun it
        max_seqs=rng.randint(1, 6),
        budget=budget,
        chunked=chunked,
        mode=rng.choice(["recompute", "swap", "swap"]),
    )


@pytest.mark.kata_gate(
    "preemption: the steps (tokens, preempted, swapped in) differ from the rules on random"
    " workloads over small KV pools drawn at this run (preemptions, swaps and priorities among"
    " them)"
)
def test_preemption_fresh_random_workloads_step_by_step(
    engine: Any, toy: Any, schedulers: Any, kata_budget: Any
) -> None:
    import random

    ref = kata_budget.reference
    ref_engine, ref_sched = ref.module("engine"), ref.module("schedulers")
    ref_toy = ref_engine.StepCost(**dataclasses.asdict(toy))
    shown = {"preempted": 0, "swapped in": 0}
    runs = []

    @given(st.integers(0, 2**63 - 1))
    @hidden_settings(max_examples=50)
    def run(seed: int) -> None:
        c = random_setup(random.Random(seed))

        def go(eng: Any, sched: Any, cost: Any) -> Any:
            reqs = [eng.Request(*r) for r in c["rows"]]
            batcher = sched.ContinuousBatcher(
                c["max_seqs"], c["budget"], chunked_prefill=c["chunked"], preemption=c["mode"]
            )
            e = eng.Engine(cost, num_blocks=c["num_blocks"], block_size=4,
                           num_cpu_blocks=c["num_cpu_blocks"])  # fmt: skip
            return e.run(batcher, reqs)

        want = go(ref_engine, ref_sched, ref_toy)
        runs.append(1)
        shown["preempted"] += any(s.preempted for s in want.steps)
        shown["swapped in"] += any(s.swapped_in for s in want.steps)
        got = go(engine, schedulers, toy)
        where = (
            f"ContinuousBatcher({c['max_seqs']}, {c['budget']}, chunked_prefill={c['chunked']},"
            f" preemption={c['mode']!r}) on {c['num_blocks']} blocks of 4 ({c['num_cpu_blocks']}"
            f" cpu), requests (id, arrival, prompt, output, max_tokens, priority) {c['rows']}"
        )
        for k, (g, w) in enumerate(zip(got.steps, want.steps, strict=False)):
            mine = (dict(g.tokens), tuple(g.preempted), tuple(g.swapped_in))
            rules = (dict(w.tokens), tuple(w.preempted), tuple(w.swapped_in))
            assert mine == rules, (
                f"{where}: step {k} at t = {w.start:.4f} s (tokens, preempted, swapped in) is"
                f" {mine}; the rules give {rules}"
            )
        assert len(got.steps) == len(want.steps), (
            f"{where}: {len(got.steps)} steps, the rules take {len(want.steps)}"
        )

    run()
    for what, n in shown.items():
        assert n >= len(runs) // 5, (
            f"test data: the rules' runs show a request {what} in only {n} of {len(runs)}"
        )


# --------------------------------------------------------------------------- misuse and overtaking
@pytest.mark.kata_gate(
    "percentile accepts a q outside [0, 100], or request_metrics a request without output"
    " tokens (no ValueError), on values drawn at this run"
)
def test_metrics_misuse_is_a_value_error(metrics: Any, engine: Any, kata_random: Any) -> None:
    for _ in range(10):
        values = [kata_random.uniform(-100, 100) for _ in range(kata_random.randint(1, 20))]
        qs = (-kata_random.uniform(1e-6, 1), -kata_random.uniform(1, 1000),
              100 + kata_random.uniform(1e-6, 1000))  # fmt: skip
        for q in qs:
            with raises(ValueError, f"percentile(values, q={q}) must refuse q outside [0, 100]"):
                metrics.percentile(values, q)
    r = engine.RequestResult(3, 0.5, 10, 0, 0, [])
    with raises(ValueError, "request_metrics of a request without output tokens must refuse it"):
        metrics.request_metrics(r)


def seq_view(engine: Any, rid: int, prompt: int, max_tokens: int, priority: int) -> Any:
    return engine.SeqView(rid, rid * 1e-3, prompt, max_tokens, priority, prompt, 0, 0, 0)


@pytest.mark.kata_gate(
    "static batching starts a request after one (in priority order) whose reservation does not"
    " fit: it overtakes (random waiting queues drawn at this run)"
)
def test_static_stops_at_the_first_that_does_not_fit(
    engine: Any, schedulers: Any, kata_random: Any
) -> None:
    bs = 4
    free = 10
    big, small = seq_view(engine, 0, 30, 20, 0), seq_view(engine, 1, 3, 1, 0)
    view = engine.View(0.0, (big, small), (), (), free, 0, free, bs)
    plan = schedulers.StaticBatcher(4).schedule(view)
    assert plan.tokens == {}, (
        f"StaticBatcher(4).schedule: request 0 needs 13 blocks of 10 free, so nothing starts;"
        f" the plan starts {plan.tokens} (request 1 overtook it)"
    )
    overtaken = 0
    for _ in range(40):
        n = kata_random.randint(1, 8)
        waiting = tuple(
            seq_view(engine, i, kata_random.randint(1, 40), kata_random.randint(1, 30),
                     kata_random.randrange(2))
            for i in range(n)
        )  # fmt: skip
        free, max_batch = kata_random.randint(0, 30), kata_random.randint(1, 6)
        view = engine.View(0.0, waiting, (), (), free, 0, 30, bs)
        want: dict[int, int] = {}
        left = free
        for s in sorted(waiting, key=lambda s: (s.priority, s.arrival, s.id)):
            need = -(-(s.prompt_len + s.max_tokens) // bs)
            if len(want) == max_batch or need > left:
                overtaken += any(
                    -(-(t.prompt_len + t.max_tokens) // bs) <= left
                    for t in waiting
                    if t.id not in want and t.id != s.id
                )
                break
            left -= need
            want[s.id] = s.prompt_len
        got = dict(schedulers.StaticBatcher(max_batch).schedule(view).tokens)
        assert got == want, (
            f"StaticBatcher({max_batch}).schedule with {free} free blocks of {bs}, waiting"
            f" (id, prompt, max_tokens, priority) {[(s.id, s.prompt_len, s.max_tokens, s.priority) for s in waiting]}:"
            f" starts {got}; in priority order up to the first that does not fit: {want}"
        )
    assert overtaken > 0, "test data: no random queue has a later request that could overtake"


@pytest.mark.kata_gate(
    "swap preemption swaps out more blocks in one step than the cpu has free (two victims, one"
    " cpu block)"
)
def test_preemption_swaps_in_one_step_fit_the_cpu(engine: Any, toy: Any, schedulers: Any) -> None:
    reqs = [req(engine, i, 0.0, 4, 3, max_tokens=4) for i in range(3)]
    e = engine.Engine(toy, num_blocks=3, block_size=4, num_cpu_blocks=1)
    res = e.run(schedulers.ContinuousBatcher(preemption="swap"), reqs)
    assert all(len(r.token_times) == 3 for r in res.results), (
        "ContinuousBatcher(preemption='swap') on 3 blocks of 4 and 1 cpu block: every request"
        " finishes its 3 tokens (a second victim in the step is recomputed: the cpu is full)"
    )
