"""bra.uni in the PTX interpreter: a promise that the branch does not diverge within a warp.

On hardware a divergent bra.uni is undefined behaviour (threads may follow the wrong path), so
the interpreter reports it instead of quietly running both sides. nvcc emits bra.uni only where
the guard is warp-uniform; compilers written in the katas get it wrong on bounds checks.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.ptx import PtxRuntimeError, run_kernel

KERNEL = """
.version 7.8
.target sm_75
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 n)
{
	.reg .pred %p<1>;
	.reg .b32 %r<3>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd0, [out];
	cvta.to.global.u64 %rd0, %rd0;
	ld.param.u32 %r0, [n];
	mov.u32 %r1, %tid.x;
	setp.ge.u32 %p0, %r1, %r0;
	@%p0 BRA $done;
	mul.wide.u32 %rd1, %r1, 4;
	add.s64 %rd2, %rd0, %rd1;
	st.global.u32 [%rd2], %r1;
$done:
	ret;
}
"""


@pytest.mark.parametrize("n", [32, 64, 96])
def test_uniform_bra_uni_runs(n: int) -> None:
    out = np.zeros(96, np.uint32)
    run_kernel(KERNEL.replace("BRA", "bra.uni"), "k", [out, np.uint32(n)], grid=1, block=96)
    assert out.tolist() == list(range(n)) + [0] * (96 - n), "whole warps branch together: fine"


def test_divergent_bra_uni_is_an_error_naming_the_thread() -> None:
    out = np.zeros(96, np.uint32)
    with pytest.raises(
        PtxRuntimeError, match=r"bra.uni diverges: in the warp of thread \(40, 0, 0\)"
    ):
        run_kernel(KERNEL.replace("BRA", "bra.uni"), "k", [out, np.uint32(40)], grid=1, block=96)


def test_divergent_plain_bra_is_fine_and_blocks_count_separately() -> None:
    out = np.zeros(96, np.uint32)
    run_kernel(KERNEL.replace("BRA", "bra"), "k", [out, np.uint32(40)], grid=1, block=96)
    assert out.tolist() == list(range(40)) + [0] * 56
    # 48-thread blocks: warps are 32 + 16 threads per block, never spanning two blocks.
    out = np.zeros(48, np.uint32)
    run_kernel(KERNEL.replace("BRA", "bra.uni"), "k", [out, np.uint32(32)], grid=2, block=48)
    assert out[:32].tolist() == list(range(32))
