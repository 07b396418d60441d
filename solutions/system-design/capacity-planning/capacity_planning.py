"""Capacity planning for a GPU platform: the numbers a design review asks for.

Every function follows the model its docstring states (the README explains where each term
comes from); results are compared with an independent calculation on models, GPUs and
workloads drawn fresh at every run.
"""

from __future__ import annotations

import math

from .hardware import USABLE_DEN, USABLE_NUM, Gpu, Model, Plan, Training, Workload


# --------------------------------------------------------------------------- kv
def kv_bytes_per_token(model: Model, tp: int = 1) -> int:
    """KV-cache bytes that ONE GPU of a `tp`-way tensor-parallel replica holds per token:
    2 (K and V) x layers x (KV heads on that GPU) x head_dim x model.kv_bytes. Tensor parallelism
    splits the KV heads across the GPUs; a head is never split, so when tp > kv_heads each GPU
    still holds one whole head (replicated): KV heads on a GPU = ceil(kv_heads / tp)."""
    heads_here = -(-model.kv_heads // tp)
    return 2 * model.layers * heads_here * model.head_dim * model.kv_bytes


def weight_bytes_per_gpu(model: Model, tp: int = 1) -> int:
    """Bytes of weights on each GPU of a `tp`-way replica: ceil(params x bytes_per_param / tp)."""
    return -(-model.params * model.bytes_per_param // tp)


def max_batch(model: Model, gpu: Gpu, tp: int, context: int) -> int:
    """How many sequences of `context` cached tokens one replica holds at once: on each GPU,
    usable = hbm_bytes x 9 // 10 (hardware.USABLE_NUM / USABLE_DEN), minus the GPU's weights,
    divided (rounded down) by what one sequence needs there, context x kv_bytes_per_token(model,
    tp). 0 when the weights alone do not fit."""
    usable = gpu.hbm_bytes * USABLE_NUM // USABLE_DEN
    free = usable - weight_bytes_per_gpu(model, tp)
    if free <= 0:
        return 0
    return free // (context * kv_bytes_per_token(model, tp))


# --------------------------------------------------------------------------- step
def decode_step_s(model: Model, gpu: Gpu, tp: int, batch: int, context: int) -> float:
    """Seconds of one decode step (one new token for each of `batch` sequences of `context`
    cached tokens) on a `tp`-way replica: the roofline's larger side. Memory: each GPU reads its
    weights once and every sequence's KV cache, (weight_bytes_per_gpu + batch x context x
    kv_bytes_per_token) / hbm_bw. Compute: 2 FLOP per parameter per token, split over the tp
    GPUs, 2 x params x batch / tp / flops."""
    read = weight_bytes_per_gpu(model, tp) + batch * context * kv_bytes_per_token(model, tp)
    memory = read / gpu.hbm_bw
    compute = 2 * model.params * batch / tp / gpu.flops
    return max(memory, compute)


def prefill_s(model: Model, gpu: Gpu, tp: int, prompt: int) -> float:
    """Seconds to prefill one prompt of `prompt` tokens on a `tp`-way replica: the larger of the
    compute, 2 x params x prompt / tp / flops, and one read of the GPU's weights,
    weight_bytes_per_gpu / hbm_bw."""
    compute = 2 * model.params * prompt / tp / gpu.flops
    memory = weight_bytes_per_gpu(model, tp) / gpu.hbm_bw
    return max(compute, memory)


# --------------------------------------------------------------------------- plan
def plan(model: Model, gpu: Gpu, tp: int, load: Workload) -> Plan | None:
    """The fleet of `tp`-GPU replicas that serves `load` within its SLOs, or None when no such
    fleet exists at this tp.

    - Prefill: a prompt must prefill within ttft_s (prefill_s <= ttft_s, else None); a prefill
      replica serves one prompt at a time, so prefill_replicas = ceil(qps x prefill_s).
    - Decode: every sequence is planned at its longest, context = prompt_tokens + output_tokens.
      batch = the largest b with 1 <= b <= max_batch and decode_step_s(b) <= tpot_s (None when
      there is none). A decode replica then makes batch / decode_step_s(batch) tokens per second,
      and the service needs qps x output_tokens of them: decode_replicas = ceil(need / rate).
    - gpus = tp x (decode_replicas + prefill_replicas)."""
    first = prefill_s(model, gpu, tp, load.prompt_tokens)
    if first > load.ttft_s:
        return None
    context = load.prompt_tokens + load.output_tokens
    lo, hi = 0, max_batch(model, gpu, tp, context)  # decode_step_s grows with the batch
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if decode_step_s(model, gpu, tp, mid, context) <= load.tpot_s:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return None
    rate = lo / decode_step_s(model, gpu, tp, lo, context)
    decode = math.ceil(load.qps * load.output_tokens / rate)
    prefill = math.ceil(load.qps * first)
    return Plan(tp, lo, decode, prefill, tp * (decode + prefill))


def best_plan(
    model: Model, gpu: Gpu, load: Workload, tps: tuple[int, ...] = (1, 2, 4, 8)
) -> Plan | None:
    """The plan with the fewest GPUs over the tensor-parallel sizes `tps`; on a tie, the smaller
    tp. None when no tp has a plan."""
    best = None
    for tp in sorted(tps):
        p = plan(model, gpu, tp, load)
        if p is not None and (best is None or p.gpus < best.gpus):
            best = p
    return best


# --------------------------------------------------------------------------- checkpoint
def checkpoint_bytes(job: Training) -> int:
    """Bytes of one full checkpoint: params x (weight_bytes + master_bytes + moments x
    moment_bytes). (bf16 weights, an fp32 master copy and Adam's two fp32 moments: 14 bytes per
    parameter; the gradients are not saved.)"""
    return job.params * (job.weight_bytes + job.master_bytes + job.moments * job.moment_bytes)


def checkpoint_write_s(job: Training) -> float:
    """Seconds to write a checkpoint, every node writing its shard at once: bytes / the smaller
    of nodes x nic_bw and storage_bw, with nodes = ceil(gpus / gpus_per_node)."""
    nodes = -(-job.gpus // job.gpus_per_node)
    return checkpoint_bytes(job) / min(nodes * job.nic_bw, job.storage_bw)


def job_mtbf_s(job: Training) -> float:
    """Mean time between failures of the whole job: any GPU's failure stops it, and failures are
    independent (exponential), so gpu_mtbf_s / gpus."""
    return job.gpu_mtbf_s / job.gpus


def checkpoint_interval_s(job: Training) -> float:
    """Young's optimal compute time between checkpoints, sqrt(2 x C x M), with C =
    checkpoint_write_s and M = job_mtbf_s."""
    return math.sqrt(2 * checkpoint_write_s(job) * job_mtbf_s(job))


def goodput(job: Training, interval_s: float) -> float:
    """The share of wall-clock time that makes progress when the job computes `interval_s`
    seconds between checkpoints, each of which stops it for C = checkpoint_write_s (first-order
    model): a period is interval_s + C long, and a failure (rate 1/M, M = job_mtbf_s) costs the
    restart R = restart_s plus on average half a period of lost work. goodput = interval_s /
    (interval_s + C) x (1 - (R + (interval_s + C) / 2) / M), and 0 when that is below 0."""
    c, m = checkpoint_write_s(job), job_mtbf_s(job)
    period = interval_s + c
    g = interval_s / period * (1 - (job.restart_s + period / 2) / m)
    return max(g, 0.0)
