"""Public tests of gpu-sharing, tasks "sharing" (sharing.py) and "kubernetes" (k8s_sharing.py).

The analytic cases are worked out in README.md "Sharing".
"""

from __future__ import annotations

from typing import Any

import pytest


def approx(d: dict[str, float]) -> Any:
    return pytest.approx(d, rel=1e-9, abs=1e-9)


# --------------------------------------------------------------------------- sharing
def test_sharing_time_slicing_two_half_jobs(sharing: Any, workloads: Any) -> None:
    # Each alone: 10 / 0.5 = 20 ms = 10 slices of 2 ms. a runs slices 1, 3, ..., 19: 19 slices
    # and 18 switches of 0.1 ms; b ends after all 20 slices and 19 switches.
    jobs = [workloads.Job("a", 10.0, 0.5), workloads.Job("b", 10.0, 0.5)]
    out = sharing.time_slicing(jobs, slice_ms=2.0, switch_ms=0.1)
    assert out.finish_ms == approx({"a": 39.8, "b": 41.9})


def test_sharing_time_slicing_partial_slice_and_no_switch_alone(
    sharing: Any, workloads: Any
) -> None:
    # a: 3 ms alone, b: 1 ms alone. a 2, switch, b 1 (done), switch, a 1.
    jobs = [workloads.Job("a", 3.0, 1.0), workloads.Job("b", 1.0, 1.0)]
    out = sharing.time_slicing(jobs, slice_ms=2.0, switch_ms=0.5)
    assert out.finish_ms == approx({"b": 3.5, "a": 5.0})
    # One job: never a switch, whatever the slice.
    assert sharing.time_slicing(jobs[:1], 0.25, 9.0).finish_ms == approx({"a": 3.0})


def test_sharing_mps_runs_small_jobs_side_by_side(sharing: Any, workloads: Any) -> None:
    jobs = [workloads.Job("a", 10.0, 0.5), workloads.Job("b", 10.0, 0.5)]
    assert sharing.mps(jobs).finish_ms == approx({"a": 20.0, "b": 20.0})  # as fast as alone
    # Four jobs of fill 0.2: 0.8 of the GPU, all at full speed.
    out = sharing.mps(workloads.FOUR_SMALL)
    assert out.finish_ms == approx({f"small-{i}": 20.0 for i in range(4)})
    assert out.throughput_per_s == pytest.approx(200.0)


def test_sharing_mps_oversubscribed_and_percentages(sharing: Any, workloads: Any) -> None:
    # infer fill 0.25 x2 + train 1.0 = 1.5: all scaled by 2/3. The inference jobs finish at
    # 5 / (0.25 * 2/3) = 30 ms; train did 20 of its 60 by then, the last 40 take 40 ms at 1.0.
    out = sharing.mps(workloads.INFERENCE_AND_TRAINING)
    assert out.finish_ms == approx({"infer-a": 30.0, "infer-b": 30.0, "train": 70.0})
    # CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 for train: 0.25 + 0.25 + 0.5 = 1.0, the inference
    # jobs run as if alone (20 ms); but train stays capped at half the GPU once alone too:
    # 10 done by 20 ms, 50 more at 0.5 = 100 ms.
    out = sharing.mps(workloads.INFERENCE_AND_TRAINING, {"train": 50})
    assert out.finish_ms == approx({"infer-a": 20.0, "infer-b": 20.0, "train": 120.0})
    with pytest.raises(ValueError):
        sharing.mps(workloads.INFERENCE_AND_TRAINING, {"train": 0})


def test_sharing_mig_instances_are_fixed(sharing: Any, workloads: Any, gpus: Any) -> None:
    a = gpus.A100_40GB
    jobs = [workloads.Job("a", 10.0, 0.5), workloads.Job("b", 10.0, 0.5)]
    out = sharing.mig(jobs, a, {"a": "3g.20gb", "b": "3g.20gb"})
    # 42 of 108 SMs = 0.389 < fill 0.5: 10 / (42 / 108) = 25.71 ms each.
    assert out.finish_ms == approx({"a": 10 * 108 / 42, "b": 10 * 108 / 42})
    # Even 7g.40gb is 98 of the 108 SMs: MIG mode costs a full-GPU job 10 %.
    solo = sharing.mig([workloads.Job("t", 98.0, 1.0)], a, {"t": "7g.40gb"})
    assert solo.finish_ms == approx({"t": 108.0})


def test_sharing_memory_isolation(sharing: Any, workloads: Any) -> None:
    Job = workloads.Job
    jobs = [Job("greedy", 1.0, 1.0, 35.0), Job("x", 1.0, 1.0, 4.0), Job("y", 1.0, 1.0, 3.0)]
    # Time-slicing and plain MPS: one 40 GB pool. The greedy job leaves 5 GB: x fits, y not.
    assert sharing.oom_failures(jobs, 40.0) == ["y"]
    # MPS with CUDA_MPS_PINNED_DEVICE_MEM_LIMIT of 10 GB each: the greedy job fails alone.
    assert sharing.oom_failures(jobs, 40.0, {n: 10.0 for n in ("greedy", "x", "y")}) == ["greedy"]


def test_sharing_compare_the_three(
    sharing: Any, workloads: Any, gpus: Any, kata_metrics: Any
) -> None:
    """The README's table: the mix of two inference servers and a training job."""
    jobs = workloads.INFERENCE_AND_TRAINING
    ts = sharing.time_slicing(jobs, 2.0, 0.1)
    mp = sharing.mps(jobs)
    mg = sharing.mig(
        jobs, gpus.A100_40GB, {"infer-a": "1g.10gb", "infer-b": "2g.10gb", "train": "4g.20gb"}
    )
    assert ts.finish_ms == approx({"infer-a": 58.7, "infer-b": 60.8, "train": 102.9})
    assert mp.mean_latency_ms < ts.mean_latency_ms
    assert mp.makespan_ms < ts.makespan_ms
    # MIG: the inference jobs keep their latency whatever train does, but train gets 4/7.
    assert mg.finish_ms["infer-a"] == pytest.approx(5 / (14 / 108))
    assert mg.finish_ms["train"] == pytest.approx(60 / (56 / 108))
    for label, out in (("time-slicing", ts), ("MPS", mp), ("MIG", mg)):
        kata_metrics[f"{label}: mean latency (ms)"] = round(out.mean_latency_ms, 2)
        kata_metrics[f"{label}: jobs/s"] = round(out.throughput_per_s, 1)


# --------------------------------------------------------------------------- kubernetes
TIME_SLICING = {
    "version": "v1",
    "sharing": {
        "timeSlicing": {
            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
        }
    },
}


def test_kubernetes_time_slicing_replicas(k8s: Any) -> None:
    assert k8s.advertised({"version": "v1"}, 8) == {"nvidia.com/gpu": 8}
    assert k8s.advertised(TIME_SLICING, 8) == {"nvidia.com/gpu": 32}
    renamed = {
        "sharing": {
            "timeSlicing": {**TIME_SLICING["sharing"]["timeSlicing"], "renameByDefault": True}
        }
    }
    assert k8s.advertised(renamed, 2) == {"nvidia.com/gpu.shared": 8}
    share = k8s.replica_share(TIME_SLICING, 80.0)
    assert share == {"compute_percent": None, "memory_gb": None, "isolated": False}


def test_kubernetes_fail_requests_greater_than_one(k8s: Any) -> None:
    assert k8s.admit(TIME_SLICING, 2)  # allowed, but two replicas are not twice the GPU
    strict = {
        "sharing": {
            "timeSlicing": {
                **TIME_SLICING["sharing"]["timeSlicing"],
                "failRequestsGreaterThanOne": True,
            }
        }
    }
    assert k8s.admit(strict, 1)
    assert not k8s.admit(strict, 2)


def test_kubernetes_mps_replicas(k8s: Any) -> None:
    mps = {"sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    assert k8s.advertised(mps, 2) == {"nvidia.com/gpu": 8}
    assert k8s.replica_share(mps, 80.0) == {
        "compute_percent": 25.0,
        "memory_gb": 20.0,
        "isolated": False,
    }
    assert k8s.replica_share({"version": "v1"}, 80.0)["isolated"] is True
