"""Public tests of the SIMT kata. Each group is one task of kata.toml; read them as examples.

Masks are ints: bit i is lane i, so with 8 lanes 0x55 = 0b01010101 = the even lanes.
"""

from __future__ import annotations

import pytest

# The README's worked example: odd and even lanes take different sides of an if/else.
IF_ELSE = """
    and  r1, lane, 1        # 0: r1 = 1 for odd lanes
    bnz  r1, odd            # 1: odd lanes jump, even lanes fall through
    mov  r2, 100            # 2: even lanes
    jmp  done               # 3
odd:
    mov  r2, 200            # 4: odd lanes
done:
    add  r3, r2, lane       # 5: everyone again
"""
IF_ELSE_RECONVERGE = {1: 5}  # the branch at pc 1 reconverges at `done`

# A loop whose trip count is lane & 3: lanes leave it at different iterations.
LOOP = """
    and  r1, lane, 3        # 0: trip count 0..3
loop:
    bz   r1, done           # 1: leave when the count hits zero
    add  r2, r2, 10         # 2
    sub  r1, r1, 1          # 3
    jmp  loop               # 4
done:
    add  r3, r2, 1          # 5
"""
LOOP_RECONVERGE = {1: 5}  # lanes that leave early wait at `done` for the rest

# Collatz: n = lane + 1; count steps until n == 1. Lane 26 (n = 27) needs 111 of them.
COLLATZ = """
    add  r1, lane, 1        # 0: n
loop:
    seq  r2, r1, 1          # 1
    bnz  r2, done           # 2: while n != 1
    and  r3, r1, 1          # 3
    bz   r3, even           # 4
    mul  r1, r1, 3          # 5: odd: n = 3n + 1
    add  r1, r1, 1          # 6
    jmp  next               # 7
even:
    shr  r1, r1, 1          # 8: even: n = n / 2
next:
    add  r4, r4, 1          # 9: steps += 1
    jmp  loop               # 10
done:
"""
COLLATZ_RECONVERGE = {2: 11, 4: 9}


def column(result, reg: str) -> list[int]:
    """One register across all lanes."""
    return [regs[reg] for regs in result.registers]


def masks_at(result, pc: int) -> list[int]:
    """The mask of every issue of `pc`, in order."""
    return [issue.mask for issue in result.trace if issue.pc == pc]


def assert_matches_threads(isa, result, program: str, init=None) -> None:
    """Every lane ends with the registers and path of the same lane run alone (isa.run_thread)."""
    for lane in range(result.width):
        alone = isa.run_thread(program, lane, init[lane] if init else None)
        path = [issue.pc for issue in result.trace if issue.mask >> lane & 1]
        assert path == alone.path, (
            f"lane {lane} executed pcs {path} in the warp, but {alone.path} alone: a warp may "
            f"delay a lane, never change what it executes"
        )
        assert result.registers[lane] == alone.registers, f"lane {lane}: registers differ"


# --------------------------------------------------------------------------- task 1: lockstep
STRAIGHT = """
    mov  r1, lane
    mul  r2, r1, 3
    add  r2, r2, 1
    sub  r3, r2, r1
"""


def test_lockstep_straight_line_registers(simt):
    result = simt.Warp(STRAIGHT).run()
    assert column(result, "r2") == [3 * lane + 1 for lane in range(32)], "r2 = 3 * lane + 1"
    assert column(result, "r3") == [2 * lane + 1 for lane in range(32)], "r3 = r2 - lane"


def test_lockstep_one_issue_per_instruction_for_all_lanes(simt):
    result = simt.Warp(STRAIGHT).run()
    everyone = 0xFFFF_FFFF
    assert result.trace == [simt.Issue(pc, everyone) for pc in range(4)], (
        "with no branches the warp issues each instruction once, all 32 lanes active: "
        "that is lockstep"
    )


def test_lockstep_step_moves_the_top_of_the_stack(simt):
    warp = simt.Warp(STRAIGHT, width=4)
    assert warp.stack == [simt.StackEntry(pc=0, rpc=4, mask=0b1111)], "given by __init__"
    assert warp.step() == simt.Issue(0, 0b1111), "step() returns what it issued"
    assert warp.stack == [simt.StackEntry(1, 4, 0b1111)], "after one step the group is at pc 1"
    warp.step()
    warp.step()
    assert not warp.done
    warp.step()
    assert warp.stack == [], "at the exit pc (4) the bottom entry reaches its rpc and is popped"
    assert warp.done


def test_lockstep_width_sets_the_lanes(simt):
    result = simt.Warp(STRAIGHT, width=8).run()
    assert column(result, "r1") == list(range(8)), "`lane` is 0..width-1"
    assert {issue.mask for issue in result.trace} == {0xFF}, "8 lanes: mask 0xFF"


def test_lockstep_init_gives_each_lane_its_data(simt):
    data = [5, -2, 7, 0]
    result = simt.Warp("add r1, r0, r0", width=4, init=[{"r0": x} for x in data]).run()
    assert column(result, "r1") == [2 * x for x in data], "init[lane] sets that lane's registers"
    assert column(result, "r0") == data


def test_lockstep_matches_run_thread(simt, isa):
    program = """
        mul  r1, lane, lane
        shl  r2, lane, 28       # wraps: registers are 32-bit
        xor  r3, r1, r2
        min  r4, r3, 100
        slt  r5, r4, r1
    """
    assert_matches_threads(isa, simt.Warp(program).run(), program)


def test_lockstep_uniform_jump_and_exit(simt):
    program = """
        mov  r1, 1          # 0
        jmp  skip           # 1
        mov  r1, 99         # 2: never runs
    skip:
        add  r2, r1, lane   # 3
        exit                # 4
        mov  r2, -1         # 5: never runs
    """
    result = simt.Warp(program, width=4).run()
    assert [issue.pc for issue in result.trace] == [0, 1, 3, 4], "jmp and exit move every lane"
    assert column(result, "r2") == [1, 2, 3, 4]


def test_lockstep_uniform_branch_keeps_the_warp_together(simt):
    program = """
        slt  r1, lane, 100  # 0: true on every lane
        bnz  r1, yes        # 1: so every lane jumps
        mov  r2, 1          # 2
    yes:
        add  r2, r2, 5      # 3
    """
    warp = simt.Warp(program, width=8)
    depths = []
    while not warp.done:
        warp.step()
        depths.append(len(warp.stack))
    assert [issue.pc for issue in warp.trace] == [0, 1, 3]
    assert {issue.mask for issue in warp.trace} == {0xFF}, "lanes that agree stay together"
    assert max(depths) == 1, "a branch on which all lanes agree pushes nothing"


def test_lockstep_empty_program(simt):
    warp = simt.Warp("# nothing", width=4)
    assert warp.done, "an empty program has exited before it starts"
    result = warp.run()
    assert result.trace == [], "nothing to issue"
    assert len(result.registers) == 4, "one register file per lane, even with nothing to run"
    assert all(v == 0 for regs in result.registers for v in regs.values()), "registers start at 0"


# --------------------------------------------------------------------------- task 2: divergence
def test_divergence_if_else_trace(simt):
    result = simt.Warp(IF_ELSE, width=8, reconverge=IF_ELSE_RECONVERGE).run()
    assert result.trace == [
        simt.Issue(0, 0xFF),
        simt.Issue(1, 0xFF),  # the branch: odd lanes (0xAA) go to 4, even lanes (0x55) to 2
        simt.Issue(2, 0x55),  # the fall-through side runs first...
        simt.Issue(3, 0x55),  # ...up to its jmp to `done`, where it stops and waits
        simt.Issue(4, 0xAA),  # then the taken side
        simt.Issue(5, 0xFF),  # and at `done` (the reconvergence pc) they are one warp again
    ], "see the README's trace of this program"


def test_divergence_if_else_stack(simt):
    warp = simt.Warp(IF_ELSE, width=8, reconverge=IF_ELSE_RECONVERGE)
    warp.step()
    warp.step()  # the divergent branch
    E = simt.StackEntry
    assert warp.stack == [E(5, 6, 0xFF), E(4, 5, 0xAA), E(2, 5, 0x55)], (
        "after the split: the whole warp waits at 5 (its own rpc is the exit, 6); above it the "
        "taken side (4), and on top the fall-through side (2); both rejoin at 5"
    )
    warp.step()
    warp.step()  # jmp done: the even lanes reach 5 == their rpc, and that entry is popped
    assert warp.stack == [E(5, 6, 0xFF), E(4, 5, 0xAA)]
    warp.step()  # mov r2, 200 falls through to 5: the odd lanes are done too
    assert warp.stack == [E(5, 6, 0xFF)]


def test_divergence_if_else_registers(simt):
    result = simt.Warp(IF_ELSE, reconverge=IF_ELSE_RECONVERGE).run()
    expected = [(200 if lane % 2 else 100) + lane for lane in range(32)]
    assert column(result, "r3") == expected, "each side's lanes keep their own r2"


def test_divergence_if_without_else(simt):
    program = """
        slt  r1, lane, 4    # 0
        bz   r1, skip       # 1: lanes 4.. skip the body
        mov  r2, 7          # 2
        add  r2, r2, lane   # 3
    skip:
        add  r3, r2, 1      # 4
    """
    result = simt.Warp(program, width=8, reconverge={1: 4}).run()
    assert result.trace == [
        simt.Issue(0, 0xFF),
        simt.Issue(1, 0xFF),
        simt.Issue(2, 0x0F),
        simt.Issue(3, 0x0F),
        simt.Issue(4, 0xFF),
    ], "the lanes that jump straight to the reconvergence pc just wait there"
    assert column(result, "r3") == [8, 9, 10, 11, 1, 1, 1, 1]


def test_divergence_one_lane_costs_a_whole_path(simt):
    program = """
        seq  r1, lane, 5    # 0
        bnz  r1, special    # 1: only lane 5 jumps
        mov  r2, 1          # 2
        jmp  done           # 3
    special:
        mov  r2, 2          # 4
    done:
    """
    result = simt.Warp(program, reconverge={1: 5}).run()
    assert masks_at(result, 4) == [1 << 5], "one lane's path still takes a full issue slot"
    assert masks_at(result, 2) == [0xFFFF_FFFF & ~(1 << 5)]


def test_divergence_data_dependent_branch_matches_run_thread(simt, isa):
    program = """
        slt  r1, r0, 0      # 0: negative?
        bz   r1, positive   # 1
        sub  r0, 0, r0      # 2: r0 = -r0
    positive:
        mul  r2, r0, 2      # 3
    """
    init = [{"r0": (lane * 7) % 11 - 5} for lane in range(32)]
    result = simt.Warp(program, init=init, reconverge={1: 3}).run()
    assert column(result, "r0") == [abs(x["r0"]) for x in init]
    assert_matches_threads(isa, result, program, init)


# --------------------------------------------------------------------------- task 3: ipdoms
def test_reconvergence_ipdom_straight_line(simt):
    ipdom = simt.immediate_post_dominators("mov r1, 1\nadd r1, r1, 1")
    assert ipdom == {0: 1, 1: 2}, "without branches, each pc's ipdom is the next pc (2 = exit)"


def test_reconvergence_ipdom_if_else(simt):
    ipdom = simt.immediate_post_dominators(IF_ELSE)
    assert ipdom == {0: 1, 1: 5, 2: 3, 3: 5, 4: 5, 5: 6}, (
        "both sides of the branch at 1 must pass `done` (5) on their way to the exit (6)"
    )


def test_reconvergence_ipdom_loop(simt):
    ipdom = simt.immediate_post_dominators(LOOP)
    assert ipdom == {0: 1, 1: 5, 2: 3, 3: 4, 4: 1, 5: 6}, (
        "the loop test (1) is post-dominated by the loop exit (5); the back edge (4) by the test"
    )


def test_reconvergence_ipdom_exit_inside_a_branch(simt):
    program = """
        slt  r1, lane, 16   # 0
        bnz  r1, low        # 1
        exit                # 2: lanes 16.. leave here
    low:
        add  r2, lane, 1    # 3
    """
    ipdom = simt.immediate_post_dominators(program)
    assert ipdom == {0: 1, 1: 4, 2: 4, 3: 4}, (
        "a path from 1 can skip 3 (through the exit at 2), so only the exit pc (4) "
        "post-dominates the branch"
    )


def test_reconvergence_ipdom_leaves_out_pcs_that_never_exit(simt):
    program = """
        bz   lane, spin     # 0: lane 0 goes to spin
        exit                # 1
    spin:
        jmp  spin           # 2: forever
    """
    assert simt.immediate_post_dominators(program) == {0: 1, 1: 3}, (
        "pc 2 never reaches the exit, so it has no post-dominator; every path from 0 that "
        "does reach the exit goes through 1"
    )


NESTED = """
    and  r1, lane, 1        # 0
    and  r2, lane, 2        # 1
    bnz  r1, odd            # 2: outer if
    bnz  r2, even_hi        # 3:   inner if (even lanes only)
    mov  r3, 0              # 4:     lane 0
    jmp  even_done          # 5
even_hi:
    mov  r3, 2              # 6:     lane 2
even_done:
    add  r3, r3, 10         # 7:   the inner join: lanes 0 and 2
    jmp  done               # 8
odd:
    mov  r3, 1              # 9:   lanes 1 and 3
done:
    add  r4, r3, 100        # 10: the outer join: everyone
"""


def test_reconvergence_nested_if_else_trace(simt):
    result = simt.Warp(NESTED, width=4).run()  # reconvergence pcs from your ipdoms
    assert result.trace == [
        simt.Issue(0, 0b1111),
        simt.Issue(1, 0b1111),
        simt.Issue(2, 0b1111),  # outer split: even 0b0101 / odd 0b1010
        simt.Issue(3, 0b0101),  # inner split of the even lanes
        simt.Issue(4, 0b0001),
        simt.Issue(5, 0b0001),
        simt.Issue(6, 0b0100),
        simt.Issue(7, 0b0101),  # the inner branch reconverged at its ipdom...
        simt.Issue(8, 0b0101),
        simt.Issue(9, 0b1010),
        simt.Issue(10, 0b1111),  # ...and the outer one at its own
    ], "each branch reconverges at its own immediate post-dominator"
    assert [regs["r4"] for regs in result.registers] == [110, 101, 112, 101]


def test_reconvergence_nested_inner_join_comes_before_the_outer_join(simt):
    result = simt.Warp(NESTED).run()
    even = sum(1 << lane for lane in range(0, 32, 2))
    assert masks_at(result, 7) == [even], (
        "pc 7 should issue once, for all even lanes: the inner if reconverges there, not at the "
        "outer join (10) and not at the end of the program"
    )
    assert masks_at(result, 10) == [0xFFFF_FFFF]


def test_reconvergence_nested_exit_inside_a_branch(simt, isa):
    program = """
        and  r1, lane, 3    # 0
        seq  r2, r1, 3      # 1
        bz   r2, keep       # 2: lanes with lane & 3 == 3 exit early
        exit                # 3
    keep:
        mul  r3, lane, 2    # 4
        slt  r4, lane, 8    # 5
        bz   r4, big        # 6
        add  r3, r3, 1      # 7
    big:
        add  r5, r3, lane   # 8
    """
    result = simt.Warp(program).run()
    left = sum(1 << lane for lane in range(32) if lane & 3 == 3)
    assert masks_at(result, 3) == [left], "lanes 3, 7, 11, ... run `exit`"
    assert masks_at(result, 8) == [0xFFFF_FFFF & ~left], (
        "pc 8 issues once, for every lane that did not exit: lanes that exited are gone for good"
    )
    assert_matches_threads(isa, result, program)


# --------------------------------------------------------------------------- task 4: loops
def test_loops_lane_varying_trip_count(simt):
    result = simt.Warp(LOOP, reconverge=LOOP_RECONVERGE).run()
    assert column(result, "r2") == [10 * (lane & 3) for lane in range(32)]
    assert column(result, "r3") == [10 * (lane & 3) + 1 for lane in range(32)]


def test_loops_mask_shrinks_each_iteration(simt):
    result = simt.Warp(LOOP, width=8, reconverge=LOOP_RECONVERGE).run()
    assert masks_at(result, 2) == [0xEE, 0xCC, 0x88], (
        "trip counts are lane & 3: every lane but 0 and 4 runs the body once (0xEE), "
        "lanes 2, 3, 6, 7 twice (0xCC), lanes 3 and 7 three times (0x88)"
    )
    assert result.trace[-1] == simt.Issue(5, 0xFF), "after the loop the warp is whole again"


def test_loops_uniform_trip_count_never_splits(simt):
    program = LOOP.replace("and  r1, lane, 3", "mov  r1, 3")
    result = simt.Warp(program, width=8, reconverge=LOOP_RECONVERGE).run()
    assert {issue.mask for issue in result.trace} == {0xFF}, "same trip count: lockstep"
    assert column(result, "r3") == [31] * 8


def test_loops_do_while(simt, isa):
    program = """
        and  r1, lane, 3    # 0
        add  r1, r1, 1      # 1: 1..4 trips
    body:
        add  r2, r2, lane   # 2
        sub  r1, r1, 1      # 3
        bnz  r1, body       # 4: the back edge is the divergent branch
        mul  r3, r2, 2      # 5
    """
    result = simt.Warp(program, width=8, reconverge={4: 5}).run()
    assert column(result, "r2") == [lane * ((lane & 3) + 1) for lane in range(8)]
    assert masks_at(result, 2) == [0xFF, 0xEE, 0xCC, 0x88]
    assert_matches_threads(isa, result, program)


def test_loops_break(simt, isa):
    program = """
        mov  r1, 10         # 0: at most 10 iterations
    loop:
        bz   r1, done       # 1
        add  r2, r2, 1      # 2
        seq  r3, r2, lane   # 3
        bnz  r3, done       # 4: break once r2 == lane
        sub  r1, r1, 1      # 5
        jmp  loop           # 6
    done:
        add  r4, r2, 0      # 7
    """
    result = simt.Warp(program, reconverge={1: 7, 4: 7}).run()
    assert column(result, "r4") == [lane if 1 <= lane <= 10 else 10 for lane in range(32)]
    assert_matches_threads(isa, result, program)


def test_loops_collatz(simt, isa):
    result = simt.Warp(COLLATZ, reconverge=COLLATZ_RECONVERGE).run(max_steps=100_000)
    steps = column(result, "r4")
    assert steps[:8] == [0, 1, 7, 2, 5, 8, 16, 3], "Collatz steps of n = 1..8"
    assert steps[26] == 111, "n = 27 takes 111 steps"
    assert_matches_threads(isa, result, COLLATZ)


class RanPastMaxSteps(AssertionError):
    pass


class BoundedTrace(list):
    """A warp's trace that fails the test once `bound` issues are in it: a run() that does not
    stop at max_steps fails at once instead of spinning until the test's time limit."""

    def __init__(self, bound: int) -> None:
        super().__init__()
        self.bound = bound

    def _check(self, more: int) -> None:
        if len(self) + more > self.bound:
            raise RanPastMaxSteps(
                f"run() issued more than {self.bound} instructions of an endless program: stop "
                "once len(self.trace) reaches max_steps and raise StepLimitExceeded (task 4)"
            )

    def append(self, item) -> None:
        self._check(1)
        super().append(item)

    def extend(self, items) -> None:
        items = list(items)
        self._check(len(items))
        super().extend(items)

    def __iadd__(self, items):
        self.extend(items)
        return self


def bounded(warp, max_steps: int):
    """`warp` with a trace that stops a runaway run() a little past max_steps."""
    warp.trace = BoundedTrace(max_steps + 10)
    return warp


def test_loops_endless_loop_raises(simt, isa):
    warp = bounded(simt.Warp("loop: jmp loop", width=4), 50)
    with pytest.raises(isa.StepLimitExceeded):
        warp.run(max_steps=50)
    assert len(warp.trace) == 50, "run issues up to max_steps instructions, then raises"


def test_loops_max_steps_is_inclusive(simt):
    result = simt.Warp(STRAIGHT).run(max_steps=4)
    assert result.issued == 4, "a program that needs exactly max_steps issues finishes"


def test_loops_one_spinning_lane_holds_the_warp(simt, isa):
    program = """
        bz   lane, spin     # 0: lane 0 goes to spin
        exit                # 1
    spin:
        jmp  spin           # 2
    """
    warp = bounded(simt.Warp(program, width=4, reconverge={0: 1}), 100)
    with pytest.raises(isa.StepLimitExceeded):
        warp.run(max_steps=100)
    assert warp.trace[1:] == [simt.Issue(2, 0b0001)] * 99, (
        "lanes 1-3 wait at the reconvergence pc (1) for lane 0, which never comes: lane 0 "
        "spins alone until max_steps, and the others starve"
    )


# --------------------------------------------------------------------------- task 5: metrics
def test_metrics_straight_line_is_fully_efficient(simt):
    result = simt.Warp(STRAIGHT).run()
    assert result.issued == 4
    assert result.cycles == 1 + 4 + 1 + 1, "mul costs 4 cycles (isa.COST), the rest 1"
    assert result.simd_efficiency == 1.0, "all 32 lanes did useful work in every issue"
    assert result.divergences == 0


def test_metrics_if_else(simt):
    result = simt.Warp(IF_ELSE, width=8, reconverge=IF_ELSE_RECONVERGE).run()
    assert result.cycles == 6
    assert result.divergences == 1
    assert result.simd_efficiency == pytest.approx(36 / 48), (
        "6 issues x 8 lanes = 48 lane-slots; 8+8+4+4+4+8 = 36 were active"
    )


BOTH_SIDES = """
    bnz  r0, cheap          # 0
    mul  r1, lane, 3        # 1: 4 cycles
    mul  r1, r1, 3          # 2: 4 cycles
    jmp  done               # 3
cheap:
    add  r1, lane, 1        # 4
done:
    add  r2, r1, 0          # 5
"""


@pytest.mark.parametrize(
    ("r0_of_lane", "cycles", "divergences"),
    [
        (lambda lane: 0, 1 + 4 + 4 + 1 + 1, 0),  # everyone takes the expensive side
        (lambda lane: 1, 1 + 1 + 1, 0),  # everyone takes the cheap side
        (lambda lane: lane & 1, 1 + 4 + 4 + 1 + 1 + 1, 1),  # split: the warp pays for both
    ],
    ids=["all-expensive", "all-cheap", "mixed"],
)
def test_metrics_divergence_pays_for_both_sides(simt, r0_of_lane, cycles, divergences):
    init = [{"r0": r0_of_lane(lane)} for lane in range(32)]
    result = simt.Warp(BOTH_SIDES, init=init, reconverge={0: 5}).run()
    assert result.cycles == cycles, "cycles add up every issue, whatever its mask"
    assert result.divergences == divergences, "only a branch whose lanes split is a divergence"


def test_metrics_loop(simt):
    result = simt.Warp(LOOP, width=8, reconverge=LOOP_RECONVERGE).run()
    assert result.divergences == 3, (
        "the loop test splits the warp at trip checks 0, 1 and 2; at check 3 every lane left "
        "is done, so that branch is uniform"
    )
    assert result.issued == result.cycles == 15
    assert result.simd_efficiency == pytest.approx(72 / 120)


def test_metrics_warp_is_as_slow_as_its_slowest_lane(simt, isa):
    result = simt.Warp(COLLATZ, reconverge=COLLATZ_RECONVERGE).run(max_steps=100_000)
    paths = [len(isa.run_thread(COLLATZ, lane).path) for lane in range(32)]
    assert result.issued >= max(paths), "the warp runs until its slowest lane is done"
    assert result.simd_efficiency == pytest.approx(sum(paths) / (32 * result.issued)), (
        "each lane executes each instruction of its path once: the active lane-slots add up "
        "to the lanes' path lengths"
    )
    assert result.simd_efficiency < 0.5, "Collatz wastes most of the warp's lanes"


def test_metrics_empty_program(simt):
    result = simt.Warp("", width=4).run()
    assert (result.issued, result.cycles, result.divergences) == (0, 0, 0)
    assert result.simd_efficiency == 1.0, "nothing issued, nothing wasted"
