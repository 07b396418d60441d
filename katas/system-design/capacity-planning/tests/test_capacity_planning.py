"""Public tests: worked examples on real models and GPUs (hardware.MODELS, hardware.GPUS), one
group per task. The hidden tests ask the same questions about models, GPUs, workloads and jobs
drawn fresh at every run, and compare with an independent calculation."""

from __future__ import annotations

from typing import Any

import pytest

APPROX = dict(rel=1e-9)


# ------------------------------------------------------------------------------ kv
def test_kv_llama_70b_per_token(cap: Any, hw: Any) -> None:
    m = hw.MODELS["llama-3-70b"]
    assert cap.kv_bytes_per_token(m) == 327_680, "2 x 80 layers x 8 KV heads x 128 x 2 bytes"
    assert cap.kv_bytes_per_token(m, 4) == 81_920, "tp = 4: 2 of the 8 KV heads on each GPU"
    assert cap.kv_bytes_per_token(m, 16) == 40_960, (
        "tp = 16 with 8 KV heads: each GPU still holds one whole head (ceil(8 / 16) = 1)"
    )


def test_kv_weights_per_gpu(cap: Any, hw: Any) -> None:
    m = hw.MODELS["llama-3-70b"]
    assert cap.weight_bytes_per_gpu(m) == 141_107_412_992, "70.55 B params x 2 bytes"
    assert cap.weight_bytes_per_gpu(m, 4) == 35_276_853_248, "a quarter on each GPU"
    assert cap.weight_bytes_per_gpu(hw.MODELS["llama-3.1-405b-fp8"], 8) == 50_731_673_600, (
        "fp8 weights: 1 byte per parameter, 405.85 B / 8"
    )


def test_kv_sequences_that_fit(cap: Any, hw: Any) -> None:
    h100, h200 = hw.GPUS["h100-sxm"], hw.GPUS["h200"]
    m70, m8 = hw.MODELS["llama-3-70b"], hw.MODELS["llama-3-8b"]
    assert cap.max_batch(m70, h100, 4, 8192) == 62, "70B on 4 H100s, 8k-token sequences"
    assert cap.max_batch(m70, h100, 1, 4096) == 0, "141 GB of weights do not fit in 80 GiB"
    assert cap.max_batch(m8, h100, 1, 4096) == 114, "8B on one H100, 4k-token sequences"
    assert cap.max_batch(hw.MODELS["llama-3.1-405b-fp8"], h200, 8, 8192) == 288, (
        "405B fp8 on 8 H200s"
    )
    assert isinstance(cap.max_batch(m8, h100, 1, 4096), int), "a count of sequences is an int"


# ------------------------------------------------------------------------------ step
def test_step_decode_memory_bound(cap: Any, hw: Any) -> None:
    m, g = hw.MODELS["llama-3-70b"], hw.GPUS["h100-sxm"]
    assert cap.decode_step_s(m, g, 4, 1, 4096) == pytest.approx(0.010630566438208955, **APPROX), (
        "batch 1: read a quarter of the weights and one sequence's KV per GPU at 3.35 TB/s"
    )
    assert cap.decode_step_s(m, g, 4, 64, 4096) == pytest.approx(0.016940802903880597, **APPROX), (
        "batch 64 of 4k tokens: the KV reads add 60 % to the step"
    )


def test_step_decode_compute_bound(cap: Any, hw: Any) -> None:
    m, g = hw.MODELS["llama-3-8b"], hw.GPUS["h100-sxm"]
    # 512 sequences of 16 tokens: 2 x 8.03 B x 512 FLOP at 989 TFLOP/s beats the reads.
    assert cap.decode_step_s(m, g, 1, 512, 16) == pytest.approx(0.00831444642866734, **APPROX)


def test_step_prefill(cap: Any, hw: Any) -> None:
    m70, g = hw.MODELS["llama-3-70b"], hw.GPUS["h100-sxm"]
    assert cap.prefill_s(m70, g, 4, 2000) == pytest.approx(0.07133842921739131, **APPROX), (
        "2000 tokens x 2 FLOP x 70.55 B params over 4 x 989 TFLOP/s"
    )
    assert cap.prefill_s(m70, g, 4, 10) == pytest.approx(0.010530403954626866, **APPROX), (
        "a 10-token prompt still reads every weight once"
    )


# ------------------------------------------------------------------------------ plan
def test_plan_llama_70b_on_h100(cap: Any, hw: Any) -> None:
    m, g = hw.MODELS["llama-3-70b"], hw.GPUS["h100-sxm"]
    load = hw.Workload(qps=20, prompt_tokens=2000, output_tokens=500, ttft_s=0.5, tpot_s=0.05)
    assert cap.plan(m, g, 1, load) is None, "tp = 1: the weights do not fit"
    assert cap.plan(m, g, 2, load) == hw.Plan(2, 16, 15, 3, 36)
    assert cap.plan(m, g, 4, load) == hw.Plan(4, 205, 2, 2, 16)
    assert cap.plan(m, g, 8, load) == hw.Plan(8, 582, 1, 1, 16)


def test_plan_best_tp_ties_go_to_the_smaller(cap: Any, hw: Any) -> None:
    m, g = hw.MODELS["llama-3-70b"], hw.GPUS["h100-sxm"]
    load = hw.Workload(qps=20, prompt_tokens=2000, output_tokens=500, ttft_s=0.5, tpot_s=0.05)
    assert cap.best_plan(m, g, load) == hw.Plan(4, 205, 2, 2, 16), "tp 4 and 8 both need 16 GPUs"


def test_plan_best_tp_per_gpu(cap: Any, hw: Any) -> None:
    m = hw.MODELS["llama-3-70b"]
    load = hw.Workload(qps=20, prompt_tokens=2000, output_tokens=500, ttft_s=0.5, tpot_s=0.05)
    want = {
        "a100-80gb": hw.Plan(4, 205, 2, 5, 28),
        "h200": hw.Plan(2, 137, 2, 3, 10),
        "l40s": hw.Plan(8, 249, 3, 2, 40),
    }
    for name, plan in want.items():
        assert cap.best_plan(m, hw.GPUS[name], load) == plan, f"llama-3-70b on {name}"


def test_plan_small_model_small_gpu(cap: Any, hw: Any) -> None:
    m, g = hw.MODELS["llama-3-8b"], hw.GPUS["l40s"]
    load = hw.Workload(qps=5.5, prompt_tokens=1000, output_tokens=200, ttft_s=0.2, tpot_s=0.03)
    assert cap.plan(m, g, 2, load) == hw.Plan(2, 227, 1, 1, 4)
    assert cap.best_plan(m, g, load) == hw.Plan(1, 62, 1, 1, 2)


def test_plan_impossible_slos(cap: Any, hw: Any) -> None:
    m, g = hw.MODELS["llama-3-70b"], hw.GPUS["h100-sxm"]
    slow_prefill = hw.Workload(qps=1, prompt_tokens=100_000, output_tokens=10, ttft_s=0.5, tpot_s=1)
    assert cap.best_plan(m, g, slow_prefill) is None, "a 100k-token prompt cannot prefill in 0.5 s"
    fast_tokens = hw.Workload(qps=1, prompt_tokens=100, output_tokens=10, ttft_s=5, tpot_s=0.001)
    assert cap.best_plan(m, g, fast_tokens) is None, "no replica reads its weights in 1 ms"


# ------------------------------------------------------------------------------ checkpoint
def _job(hw: Any, **changes: Any) -> Any:
    base = dict(
        params=70_553_706_496, weight_bytes=2, master_bytes=4, moments=2, moment_bytes=4,
        gpus=16_384, gpus_per_node=8, nic_bw=25e9, storage_bw=200e9,
        gpu_mtbf_s=50_000 * 3600.0, restart_s=600.0,
    )  # fmt: skip
    base.update(changes)
    return hw.Training(**base)


def test_checkpoint_70b_on_16k_gpus(cap: Any, hw: Any) -> None:
    job = _job(hw)
    assert cap.checkpoint_bytes(job) == 987_751_890_944, "14 bytes per parameter"
    assert cap.checkpoint_write_s(job) == pytest.approx(4.93875945472, **APPROX), (
        "2048 nodes could write 51 TB/s; the storage takes 200 GB/s"
    )
    assert cap.job_mtbf_s(job) == pytest.approx(10986.328125, **APPROX), "50,000 h / 16,384 GPUs"
    assert cap.checkpoint_interval_s(job) == pytest.approx(329.420193370109, **APPROX)
    assert cap.goodput(job, cap.checkpoint_interval_s(job)) == pytest.approx(
        0.9164302413307799, **APPROX
    )
    assert cap.goodput(job, 3600) == pytest.approx(0.7802514886761611, **APPROX), "hourly"
    assert cap.goodput(job, 1e9) == 0.0, "never checkpointing: no progress survives"


def test_checkpoint_small_job_is_nic_bound(cap: Any, hw: Any) -> None:
    job = _job(hw, params=8_030_261_248, gpus=12, nic_bw=10e9, storage_bw=1e12, restart_s=300.0)
    assert cap.checkpoint_write_s(job) == pytest.approx(5.6211828736, **APPROX), (
        "12 GPUs are 2 nodes (ceil(12 / 8)): 20 GB/s of NICs, not the storage's 1 TB/s"
    )
