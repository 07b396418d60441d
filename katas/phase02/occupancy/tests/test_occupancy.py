"""Public tests of the occupancy kata. Each group is one task of kata.toml.

calculator: your block_limits() against numbers NVIDIA documents.
predict:    your predictions.py against ptxas (compiled here, cached) and the calculator.
tune:       your max_potential_block_size() on kernels with known resources.
"""

from __future__ import annotations

import pytest

from harness.cuda import static

KIB = 1024


# --------------------------------------------------------------------------- calculator
# Documented results: CUDA C++ Best Practices Guide ("Calculating Occupancy", 37 registers),
# Programming Guide ("Multiprocessor Level": 64 vs 65 registers at 512 threads) and the
# per-compute-capability limits table (warps, blocks, shared memory per SM and per block).
@pytest.mark.parametrize(
    ("arch", "threads", "regs", "smem", "blocks", "occupancy", "limiter"),
    [
        ("sm_80", 128, 37, 0, 12, 0.75, "registers"),
        ("sm_80", 320, 37, 0, 4, 0.625, "registers"),
        ("sm_80", 512, 64, 0, 2, 0.5, "registers"),
        ("sm_80", 512, 65, 0, 1, 0.25, "registers"),
        ("sm_75", 1024, 32, 0, 1, 1.0, "warps"),
        ("sm_86", 1024, 32, 0, 1, 2 / 3, "warps"),
        ("sm_86", 512, 32, 0, 3, 1.0, "warps"),
        ("sm_80", 32, 16, 0, 32, 0.5, "blocks"),
        ("sm_75", 32, 16, 0, 16, 0.5, "blocks"),
        ("sm_89", 32, 16, 0, 24, 0.5, "blocks"),
        ("sm_75", 256, 32, 32 * KIB, 2, 0.5, "shared_memory"),
        ("sm_80", 256, 32, 48 * KIB, 3, 0.375, "shared_memory"),
        ("sm_90", 128, 32, 227 * KIB, 1, 4 / 64, "shared_memory"),
        ("sm_90", 128, 32, 227 * KIB + 1, 0, 0.0, "shared_memory"),
        ("sm_75", 128, 256, 0, 0, 0.0, "registers"),
        ("sm_80", 1025, 16, 0, 0, 0.0, "warps"),
    ],
)
def test_calculator_documented_examples(occ, arch, threads, regs, smem, blocks, occupancy, limiter):
    o = occ.occupancy(arch, threads, regs, smem)
    assert o.active_blocks_per_sm == blocks, o.block_limits
    assert o.occupancy == pytest.approx(occupancy)
    assert limiter in o.limiters, o.block_limits


def test_calculator_limit_of_each_resource(occ):
    # A100, 256 threads (8 warps), 32 registers, 48 KiB shared: 64 warp slots / 8 = 8 blocks;
    # 32 x 32 = 1024 registers per warp, 16 warps per quarter of the file: 64 / 8 = 8 blocks;
    # 48 KiB + 1 KiB reserved = 49 KiB, 164 KiB / 49 KiB = 3 blocks.
    assert occ.block_limits("sm_80", 256, 32, 48 * KIB) == {
        "warps": 8,
        "blocks": 32,
        "registers": 8,
        "shared_memory": 3,
    }


def test_calculator_register_allocation_unit(occ):
    # 37 registers x 32 lanes = 1184 registers, handed out as 1280 (5 units of 256) per warp:
    # a quarter of the file (16384) holds 12 such warps, the SM 48: 12 blocks of 4 warps.
    assert occ.block_limits("sm_80", 128, 37)["registers"] == 12
    # The same warp count with 40 registers (1280 exactly): nothing is lost to rounding.
    assert occ.block_limits("sm_80", 128, 40)["registers"] == 12
    assert occ.block_limits("sm_80", 128, 41)["registers"] == 10  # 1312 -> 1536 per warp


def test_calculator_unused_resources_do_not_limit(occ):
    lim = occ.block_limits("sm_75", 64, 0, 0)
    assert lim["registers"] is None and lim["shared_memory"] is None
    # From sm_80 on, every block costs 1 KiB of shared memory even when it declares none.
    assert occ.block_limits("sm_80", 64, 16, 0)["shared_memory"] == 164


def test_calculator_rejects_bad_input(occ):
    with pytest.raises(ValueError, match="sm_75"):
        occ.block_limits("sm_61", 128, 32)  # the message lists the known architectures
    with pytest.raises(ValueError):
        occ.block_limits("sm_80", 0, 32)
    with pytest.raises(ValueError):
        occ.block_limits("sm_80", 128, -1)
    with pytest.raises(ValueError):
        occ.block_limits("sm_80", 128, 32, -4)


# --------------------------------------------------------------------------- predict
def _tolerance(registers: int) -> int:
    """Register counts move by a few between CUDA releases; shared memory does not."""
    return max(2, registers // 8)


@pytest.fixture(scope="module")
def predicted(kata):
    return kata.module("predictions")


def test_predict_covers_every_kernel_and_launch(predicted, given):
    res = predicted.resources()
    assert sorted(res) == sorted(given.ARCHS), "resources(): one entry per arch"
    for arch in given.ARCHS:
        assert sorted(res[arch]) == sorted(given.KERNELS), f"resources()[{arch!r}]"
        for kernel, r in res[arch].items():
            assert set(r) == {"registers", "shared_bytes"}, f"resources()[{arch!r}][{kernel!r}]"
    assert sorted(predicted.launches()) == sorted(given.LAUNCHES)


def test_predict_static_shared_memory(predicted, given, ptxas):
    wrong = []
    for arch in given.ARCHS:
        for kernel in given.KERNELS:
            guess = predicted.resources()[arch][kernel]["shared_bytes"]
            actual = ptxas[arch][kernel].shared_bytes
            if guess != actual:
                wrong.append(
                    f"{kernel} on {arch}: {guess} B is too {'high' if guess > actual else 'low'}"
                )
    assert not wrong, "static shared memory (ptxas 'smem'): " + "; ".join(wrong)


def test_predict_registers(predicted, given, ptxas):
    wrong = []
    for arch in given.ARCHS:
        for kernel in given.KERNELS:
            guess = predicted.resources()[arch][kernel]["registers"]
            actual = ptxas[arch][kernel].registers
            if abs(guess - actual) > _tolerance(actual):
                wrong.append(
                    f"{kernel} on {arch}: {guess} is too {'high' if guess > actual else 'low'}"
                )
    assert not wrong, "registers per thread (ptxas 'Used N registers'): " + "; ".join(wrong)


def test_predict_occupancy(predicted, given, ptxas):
    """Blocks per SM and occupancy of each launch, from ptxas's numbers on this machine."""
    wrong = []
    for name, launch in given.LAUNCHES.items():
        r = ptxas[launch.arch][launch.kernel]
        truth = static.occupancy(
            launch.arch,
            launch.threads_per_block,
            r.registers,
            r.shared_bytes + launch.dynamic_shared_bytes,
        )
        guess = predicted.launches()[name]
        if guess["blocks_per_sm"] != truth.active_blocks_per_sm:
            wrong.append(f"{name}: {guess['blocks_per_sm']} blocks per SM")
        elif guess["occupancy"] != pytest.approx(truth.occupancy):
            wrong.append(f"{name}: occupancy {guess['occupancy']}")
    assert not wrong, "wrong predictions: " + "; ".join(wrong)


# --------------------------------------------------------------------------- tune
def test_tune_small_kernel_takes_the_biggest_block(tune):
    # 8 registers limit nothing: 1024 threads fill a T4 SM (32 warps) with one block, an H200
    # SM (64 warps) with two. min_grid_size = blocks per SM x SMs (40 on T4, 132 on H200).
    assert tune.max_potential_block_size("T4", 8) == (40, 1024)
    assert tune.max_potential_block_size("H200", 8) == (264, 1024)


def test_tune_registers_can_favour_an_odd_block_size(tune):
    # 56 registers -> 1792 per warp -> 9 warps per quarter of the register file, 36 per SM.
    # 256 threads: 4 blocks = 32 warps; 1024 threads: 1 block = 32 warps; 576 threads (18
    # warps): 2 blocks = 36 warps, the most that fit, and the largest block that gets there.
    assert tune.max_potential_block_size("H200", 56) == (2 * 132, 576)


def test_tune_block_size_limit(tune):
    # __launch_bounds__(100) or a kernel that needs at most 100 threads: try 100, then 64, 32.
    # 100 threads = 4 warps (the last one partial): 8 blocks = 800 threads; 64 threads: the
    # 16-block cap = 1024 threads.
    assert tune.max_potential_block_size("T4", 8, block_size_limit=100) == (16 * 40, 64)


def test_tune_dynamic_shared_memory_that_grows_with_the_block(tune):
    # 72 bytes of dynamic shared memory per thread on a T4 (64 KiB per SM and per block): a
    # 1024-thread block (72 KiB) cannot launch at all; 896 threads (63 KiB) fit once, and
    # no smaller block puts more threads on the SM.
    per_thread = lambda block: 72 * block
    assert tune.max_potential_block_size("T4", 16, 0, per_thread) == (40, 896)
    # A fixed 63 KiB instead allows any block up to 1024 threads: one block, all 32 warps.
    assert tune.max_potential_block_size("T4", 16, 0, 63 * KIB) == (40, 1024)


def test_tune_heavy_kernel_from_ptxas(tune, ptxas):
    """heavy40 as this machine's ptxas compiles it: no block size may beat yours."""
    regs = ptxas["sm_90"]["heavy40"].registers
    _, block = tune.max_potential_block_size("H200", regs)
    threads = lambda b: b * static.occupancy("sm_90", b, regs).active_blocks_per_sm
    best = max(threads(b) for b in range(32, 1025, 32))
    assert threads(block) == best, (
        f"{block} threads/block: {threads(block)} resident, {best} possible"
    )


def test_tune_rejects_unknown_devices(tune):
    with pytest.raises(ValueError, match="H200"):
        tune.max_potential_block_size("V100", 32)  # the message lists the known devices
