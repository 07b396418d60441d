"""Hidden tests of the SIMT kata: random structured programs against the one-thread oracle.

Hypothesis writes programs from if/else (inline, and with the else moved out of line the way
compilers place cold code), nested ifs, early exits, loops with lane-varying trip counts (top-
and bottom-tested) and breaks. Every lane's registers and executed path must equal
``isa.run_thread``; reconvergence is checked against post-dominators computed here by brute
force (an independent oracle, not the reference's dataflow). Test names put each test under
its kata.toml task. Examples are drawn from the run seed (fresh each run; --kata-seed
reproduces them).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.testing import hidden_settings, raises

SETTINGS = hidden_settings(60)
MAX_STEPS = 50_000  # the reference needs a few hundred issues at most
DATA = [f"r{i}" for i in range(6)]  # what statements read and write
COND = "r10"  # holds a branch condition, written just before its branch
COUNTERS = ["r12", "r13", "r14"]  # one loop counter per nesting depth: bodies never write them
WIDTHS = [32, 32, 8, 5]


# --------------------------------------------------------------------------- program generator
@dataclass(frozen=True)
class Features:
    ifs: bool = True
    nest: int = 1  # how deep statements may nest
    loops: bool = False
    breaks: bool = False
    exits: bool = False
    cold: bool = False  # else blocks placed out of line, after the program's final exit


STRAIGHT = Features(ifs=False, nest=0)
IF_ELSE = Features()
NESTED = Features(nest=3, exits=True, cold=True)
LOOPS = Features(nest=3, loops=True, breaks=True)
EVERYTHING = Features(nest=3, loops=True, breaks=True, exits=True, cold=True)

operands = st.one_of(st.sampled_from([*DATA, "lane", "lane"]), st.integers(-4, 9).map(str))
alu = st.sampled_from(["add", "sub", "mul", "and", "or", "xor", "min", "max", "shr", "slt"])
# Conditions lean on `lane` and on r0/r1 (set per lane by init), so most branches diverge.
conditions = st.tuples(
    st.sampled_from(["slt", "sle", "seq", "sne", "and", "and"]),
    st.sampled_from([*DATA, "lane", "lane", "lane", "r0", "r1"]),
    st.one_of(st.integers(0, 9).map(str), operands),
    st.sampled_from(["bz", "bnz"]),
)


@st.composite
def assignments(draw):
    op, dst = draw(alu), draw(st.sampled_from(DATA))
    return ("op", f"{op} {dst}, {draw(operands)}, {draw(operands)}")


def _block(draw, f: Features, depth: int, loop_depth: int, in_loop: bool, size: int) -> list:
    kinds = ["op", "op"]
    if depth < f.nest:
        kinds += ["if"] * 3 if f.ifs else []
        kinds += ["loop"] * 2 if f.loops and loop_depth < len(COUNTERS) - 1 else []
    kinds += ["break"] if f.breaks and in_loop else []
    kinds += ["exit"] if f.exits and depth > 0 else []
    stmts = []
    for _ in range(draw(st.integers(1, size))):
        kind = draw(st.sampled_from(kinds))
        inner = max(1, size - 1)
        if kind == "op":
            stmts.append(draw(assignments()))
        elif kind == "if":
            then = _block(draw, f, depth + 1, loop_depth, in_loop, inner)
            orelse = None
            if draw(st.booleans()):
                orelse = _block(draw, f, depth + 1, loop_depth, in_loop, inner)
            cold = f.cold and orelse is not None and draw(st.booleans())
            stmts.append(("if", draw(conditions), then, orelse, cold))
        elif kind == "loop":
            src = draw(st.sampled_from([*DATA, "lane", "lane"]))
            mask = draw(st.sampled_from([1, 3, 3, 7] if loop_depth == 0 else [1, 3]))
            body = _block(draw, f, depth + 1, loop_depth + 1, True, inner)
            stmts.append(("loop", src, mask, draw(st.booleans()), body))
        elif kind == "break":
            stmts.append(("break", draw(conditions)))
        else:
            stmts.append(("exit",))
    return stmts


class _Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.cold: list[tuple[str, list, str, tuple[int, str] | None]] = []
        self.labels = 0

    def label(self, stem: str) -> str:
        self.labels += 1
        return f"{stem}{self.labels}"

    def branch(self, cond: tuple, target: str) -> None:
        op, a, b, br = cond
        self.lines += [f"    {op} {COND}, {a}, {b}", f"    {br} {COND}, {target}"]

    def block(self, stmts: list, loop: tuple[int, str] | None) -> None:
        for s in stmts:
            if s[0] == "op":
                self.lines.append(f"    {s[1]}")
            elif s[0] == "exit":
                self.lines.append("    exit")
            elif s[0] == "break":
                self.branch(s[1], loop[1])
            elif s[0] == "if":
                _, cond, then, orelse, cold = s
                end = self.label("endif")
                if orelse is None:
                    self.branch(cond, end)
                    self.block(then, loop)
                elif cold:  # then inline; the else jumps out of line and comes back
                    far = self.label("cold")
                    self.branch(cond, far)
                    self.block(then, loop)
                    self.cold.append((far, orelse, end, loop))
                else:
                    other = self.label("else")
                    self.branch(cond, other)
                    self.block(then, loop)
                    self.lines += [f"    jmp {end}", f"{other}:"]
                    self.block(orelse, loop)
                self.lines.append(f"{end}:")
            else:  # a loop
                _, src, mask, bottom_tested, body = s
                depth = loop[0] + 1 if loop else 0
                counter, head, done = COUNTERS[depth], self.label("loop"), self.label("done")
                self.lines.append(f"    and {counter}, {src}, {mask}")
                if bottom_tested:  # do { body } while (--n): 1..mask+1 trips
                    self.lines += [f"    add {counter}, {counter}, 1", f"{head}:"]
                    self.block(body, (depth, done))
                    self.lines += [f"    sub {counter}, {counter}, 1", f"    bnz {counter}, {head}"]
                else:  # while (n) { body; n-- }: 0..mask trips
                    self.lines += [f"{head}:", f"    bz {counter}, {done}"]
                    self.block(body, (depth, done))
                    self.lines += [f"    sub {counter}, {counter}, 1", f"    jmp {head}"]
                self.lines.append(f"{done}:")

    def program(self, stmts: list) -> str:
        self.block(stmts, None)
        if self.cold:
            self.lines.append("    exit")
        while self.cold:  # cold blocks may hold cold blocks of their own
            far, orelse, end, loop = self.cold.pop(0)
            self.lines.append(f"{far}:")
            self.block(orelse, loop)
            self.lines.append(f"    jmp {end}")
        return "\n".join(self.lines) + "\n"


@st.composite
def programs(draw, f: Features, size: int = 4):
    stmts = _block(draw, f, 0, 0, False, size)
    return _Emitter().program(stmts)


@st.composite
def cases(draw, f: Features, size: int = 4):
    """(program text, width, per-lane init)."""
    text = draw(programs(f, size))
    width = draw(st.sampled_from(WIDTHS))
    # Data registers start lane-dependent (r = a * lane + b), so branches on them diverge;
    # r0 also gets free per-lane noise.
    coeffs = {r: (draw(st.integers(-3, 3)), draw(st.integers(-8, 8))) for r in DATA}
    noise = draw(st.lists(st.integers(-8, 8), min_size=width, max_size=width))
    init = [{r: a * lane + b for r, (a, b) in coeffs.items()} for lane in range(width)]
    for regs, extra in zip(init, noise, strict=True):
        regs["r0"] += extra
    return text, width, init


# --------------------------------------------------------------------------- oracles
def post_dominators(isa, program) -> dict[int, set[int]]:
    """Strict post-dominators of each pc that reaches the exit, straight from the definition:
    d post-dominates n when n cannot reach the exit once d is removed from the graph."""
    n = len(program)
    preds: dict[int, list[int]] = {pc: [] for pc in range(n + 1)}
    for pc in range(n):
        for s in isa.successors(program, pc):
            preds[s].append(pc)

    def reaching_exit(removed: int | None) -> set[int]:
        seen, work = {n}, [n]
        while work:
            for p in preds[work.pop()]:
                if p != removed and p not in seen:
                    seen.add(p)
                    work.append(p)
        return seen

    live = reaching_exit(None) - {n}
    without = {d: reaching_exit(d) for d in live}
    return {pc: {n} | {d for d in live if d != pc and pc not in without[d]} for pc in live}


def ipdoms(isa, program) -> dict[int, int]:
    """The nearest strict post-dominator: the one with the most post-dominators of its own."""
    pdoms = post_dominators(isa, program)
    return {pc: max(ds, key=lambda d: len(pdoms.get(d, ()))) for pc, ds in pdoms.items()}


def listing(program) -> str:
    """The program as the learner should read it: pc, instruction, resolved branch target."""
    rows = [
        (
            f"  {pc:3}: {str(ins):24}" + (f" -> {ins.target}" if ins.target is not None else "")
        ).rstrip()
        for pc, ins in enumerate(program)
    ]
    return "\n".join([*rows, f"  {len(program):3}: (exit)"])


def run(simt, isa, text: str, width: int, init, *, default_ipdoms: bool = False):
    program = isa.parse(text)
    reconverge = None if default_ipdoms else ipdoms(isa, program)
    result = simt.Warp(program, width, init=init, reconverge=reconverge).run(max_steps=MAX_STEPS)
    return program, result


def check_lanes(isa, program, result, init) -> list[list[int]]:
    """Each lane's registers and path equal the lane run alone; returns the paths."""
    paths = []
    everyone = (1 << result.width) - 1
    for issue in result.trace:
        assert issue.mask and issue.mask & ~everyone == 0, (
            f"issued pc {issue.pc} with mask {issue.mask:#x}: a mask must be a non-empty "
            f"subset of the warp's {result.width} lanes"
        )
    for lane in range(result.width):
        alone = isa.run_thread(program, lane, init[lane], max_steps=MAX_STEPS)
        path = [issue.pc for issue in result.trace if issue.mask >> lane & 1]
        assert path == alone.path, (
            f"lane {lane} executed pcs {path} in the warp but {alone.path} alone, in\n"
            f"{listing(program)}"
        )
        assert result.registers[lane] == alone.registers, (
            f"lane {lane} ends with {result.registers[lane]} in the warp but "
            f"{alone.registers} alone, in\n{listing(program)}"
        )
        paths.append(path)
    return paths


def check_lockstep(program, result, paths) -> None:
    """The warp starts whole, and lanes that go to the same pc together issue it together
    (or, having reached their reconvergence pc, together with more lanes): only a divergent
    branch splits a group."""
    if program:
        full = (1 << result.width) - 1
        assert result.trace[:1] == [(0, full)], (
            f"the first issue should be pc 0 with every lane ({full:#x}), got {result.trace[:1]}"
        )
    exit_pc = len(program)
    cursor = [0] * len(paths)
    for i, issue in enumerate(result.trace):
        groups: dict[int, int] = {}
        for lane in range(len(paths)):
            if issue.mask >> lane & 1:
                cursor[lane] += 1
                nxt = paths[lane][cursor[lane]] if cursor[lane] < len(paths[lane]) else exit_pc
                groups[nxt] = groups.get(nxt, 0) | 1 << lane
        for nxt, group in groups.items():
            if nxt == exit_pc:
                continue
            later = next(t for t in result.trace[i + 1 :] if t.mask & group)
            assert later.mask & group == group, (
                f"after issue {i} (pc {issue.pc}) lanes {group:#x} were all at pc {nxt}, but "
                f"the next issue of any of them, pc {later.pc}, had only {later.mask & group:#x} "
                f"of them: lanes that are together stay together until a branch splits them, "
                f"in\n{listing(program)}"
            )


def divergent_issues(program, trace, paths) -> list[tuple[int, int, dict[int, int]]]:
    """(trace index, pc, {next pc: mask}) of every issue whose active lanes split."""
    exit_pc = len(program)
    cursor = [0] * len(paths)
    found = []
    for i, issue in enumerate(trace):
        where: dict[int, int] = {}
        for lane in range(len(paths)):
            if issue.mask >> lane & 1:
                cursor[lane] += 1
                path = paths[lane]
                nxt = path[cursor[lane]] if cursor[lane] < len(path) else exit_pc
                where[nxt] = where.get(nxt, 0) | 1 << lane
        if len(where) > 1:
            found.append((i, issue.pc, where))
    return found


def check_reconvergence(program, result, paths, ipdom: dict[int, int]) -> None:
    """After a split at b, the fall-through side issues first, and the first issue of
    ipdom(b) that holds any of the split lanes holds all of them."""
    exit_pc = len(program)
    for i, pc, _ in divergent_issues(program, result.trace, paths):
        mask = result.trace[i].mask
        join = ipdom[pc]
        first = pc + 1 if pc + 1 != join else program[pc].target
        if first != join:
            assert result.trace[i + 1].pc == first, (
                f"after the divergent branch at pc {pc} (issue {i}) the "
                f"{'fall-through' if first == pc + 1 else 'taken'} side (pc {first}) should "
                f"issue next, but pc {result.trace[i + 1].pc} did, in\n{listing(program)}"
            )
        if join == exit_pc:
            continue
        later = next(
            (j for j in range(i + 1, len(result.trace)) if result.trace[j].pc == join
             and result.trace[j].mask & mask),
            None,
        )  # fmt: skip
        assert later is not None and result.trace[later].mask & mask == mask, (
            f"the lanes {mask:#x} split at pc {pc} (issue {i}) must all issue pc {join}, its "
            f"immediate post-dominator, together; the first issue of {join} was "
            f"{result.trace[later].mask if later is not None else 0:#x}, in\n{listing(program)}"
        )


# --------------------------------------------------------------------------- task 1: lockstep
@SETTINGS
@given(case=cases(STRAIGHT, size=8))
def test_lockstep_random_straight_line(simt, isa, case):
    """Shortcut caught: running each lane alone (run_thread) and reporting its issues one lane
    at a time; the registers are right, but the masks are singletons."""
    text, width, init = case
    program, result = run(simt, isa, text, width, init)
    check_lanes(isa, program, result, init)
    full = (1 << width) - 1
    assert result.trace == [(pc, full) for pc in range(len(program))], (
        "straight-line code issues each instruction once, all lanes together (lockstep); "
        "running lanes one at a time is not a warp"
    )


@pytest.mark.kata_gate(
    "Warp.run's Result is not what stepping the warp gives: after run() the warp must be done and "
    "its own trace must be the Result's (straight-line and branching programs)"
)
@SETTINGS
@given(case=cases(IF_ELSE, size=4), uniform=st.booleans())
def test_lockstep_run_steps_the_warp(simt, isa, case, uniform):
    """Shortcut caught: run() that answers from isa.run_thread (the oracle) instead of stepping:
    the warp object itself must have issued every instruction of the Result."""
    text, width, init = case
    if uniform:  # every lane starts alike: branches on data registers are uniform
        init = [dict(init[0]) for _ in range(width)]
    program = isa.parse(text)
    warp = simt.Warp(program, width, init=init, reconverge=ipdoms(isa, program))
    result = warp.run(max_steps=MAX_STEPS)
    assert warp.done, "after run() the warp must be done (its stack empty)"
    assert list(warp.trace) == list(result.trace), (
        f"run() returned a trace of {len(result.trace)} issues but the warp itself issued "
        f"{len(warp.trace)}: run() must step the warp, in\n{listing(program)}"
    )
    by_hand = simt.Warp(program, width, init=init, reconverge=ipdoms(isa, program))
    while not by_hand.done and len(by_hand.trace) < MAX_STEPS:
        by_hand.step()
    assert list(by_hand.trace) == list(result.trace), (
        f"run() and calling step() until done give different traces, in\n{listing(program)}"
    )


# --------------------------------------------------------------------------- task 2: divergence
@pytest.mark.kata_gate(
    "divergent lanes do not rejoin at the branch's reconvergence pc: the code after the if/else "
    "issues once per side instead of once for the whole group"
)
@SETTINGS
@given(case=cases(IF_ELSE, size=5))
def test_divergence_random_if_else(simt, isa, case):
    """Shortcuts caught: running the taken side first, rejoining at the branch target or the
    program's end, and a stack that forgets to pop lanes that went straight to their rpc."""
    text, width, init = case
    program, result = run(simt, isa, text, width, init)
    paths = check_lanes(isa, program, result, init)
    check_lockstep(program, result, paths)
    check_reconvergence(program, result, paths, ipdoms(isa, program))


def live(stack) -> list[tuple[int, int, int]]:
    """The entries that will issue: an entry whose pc is its rpc only waits to be popped (the
    README's rule and its hint's shortcut of never pushing it keep the same live entries)."""
    return [(e[0], e[1], e[2]) for e in stack if e[0] != e[1]]


def model_stack(isa, program, width, init, reconverge):
    """The README's reconvergence stack, written here: yields (issue, live entries after it)."""
    exit_pc = len(program)
    regs = [isa.fresh_registers(init[lane]) for lane in range(width)]
    stack = [(0, exit_pc, (1 << width) - 1)] if program else []
    while stack:
        pc, rpc, mask = stack.pop()
        where: dict[int, int] = {}
        for lane in range(width):
            if mask >> lane & 1:
                nxt = isa.execute(program, pc, regs[lane], lane)
                where[nxt] = where.get(nxt, 0) | 1 << lane
        if len(where) == 1:
            stack.append((next(iter(where)), rpc, mask))
        else:
            join = reconverge.get(pc, exit_pc)
            stack.append((join, rpc, mask))
            for side in (program[pc].target, pc + 1):
                stack.append((side, join, where[side]))
        while stack and stack[-1][0] == stack[-1][1]:
            stack.pop()
        yield (pc, mask), live(stack)


@pytest.mark.kata_gate(
    "Warp.step's stack (pc, rpc, mask entries) differs from the README's reconvergence stack on "
    "random divergent programs, with reconverge= at the immediate post-dominators or at the exit"
)
@SETTINGS
@given(case=cases(NESTED, size=4), late=st.booleans())
def test_divergence_stack_follows_the_rules(simt, isa, case, late):
    """Shortcut caught: a scheduler without the stack (the lowest pc issues next, groups at one
    pc merge): it rejoins structured code at the right place, but ignores reconverge= and
    keeps no rpc."""
    text, width, init = case
    program = isa.parse(text)
    # at the exit: a valid (if late) reconvergence point for every branch, and nested alike
    reconverge = {pc: len(program) for pc in range(len(program))} if late else ipdoms(isa, program)
    warp = simt.Warp(program, width, init=init, reconverge=reconverge)
    for step, (issue, want) in enumerate(model_stack(isa, program, width, init, reconverge)):
        assert step < MAX_STEPS, "test setup: the model ran away"
        got = warp.step()
        assert tuple(got) == issue, (
            f"step {step}: the warp issued pc {got[0]} with mask {got[1]:#x}; the stack says pc "
            f"{issue[0]} with {issue[1]:#x} (reconverge={reconverge}), in\n{listing(program)}"
        )
        assert live(warp.stack) == want, (
            f"after step {step} (pc {issue[0]}) the stack's live entries (pc, rpc, mask), bottom "
            f"first, are {[(p, r, hex(m)) for p, r, m in live(warp.stack)]}; the README's rules give "
            f"{[(p, r, hex(m)) for p, r, m in want]} (reconverge={reconverge}), in\n{listing(program)}"
        )
    assert warp.done, (
        f"the stack is empty after the last issue, but the warp is not done, in\n{listing(program)}"
    )


# --------------------------------------------------------------------------- task 3: reconvergence
@pytest.mark.kata_gate(
    "immediate_post_dominators disagrees with the definition (the nearest pc on every path to "
    "the exit) on random programs where an exit or an out-of-line else lets a path bypass a "
    "branch's nearest common successor"
)
@SETTINGS
@given(text=programs(EVERYTHING, size=4))
def test_reconvergence_ipdom_random_programs_match_the_definition(simt, isa, text):
    """Shortcut caught: immediate_post_dominators as a pattern match on structured code,
    e.g. "the nearest pc both successors reach" or "the target of the jmp before the else",
    which is right for the public if/else and loops but wrong once an exit inside a branch
    or an out-of-line else block lets a path bypass that pc."""
    program = isa.parse(text)
    expected = ipdoms(isa, program)
    got = simt.immediate_post_dominators(program)
    wrong = {pc: (got.get(pc), d) for pc, d in expected.items() if got.get(pc) != d}
    extra = sorted(set(got) - set(expected))
    assert not wrong and not extra, (
        f"ipdoms wrong at {{pc: (yours, expected)}} {wrong}"
        + (f"; pcs that never reach the exit have none: {extra}" if extra else "")
        + f", in\n{listing(program)}"
    )


@pytest.mark.kata_gate(
    "nested branches do not reconverge at their immediate post-dominators: the split lanes do "
    "not issue their join together"
)
@SETTINGS
@given(case=cases(NESTED, size=4))
def test_reconvergence_nested_random_programs_reconverge_at_ipdoms(simt, isa, case):
    """Shortcut caught: reconverging somewhere other than the immediate post-dominator, e.g.
    at the branch target, at the program's end, or at a pc from a heuristic ipdom. The lanes
    still compute the right registers, but the split lanes do not issue their join together."""
    text, width, init = case
    program, result = run(simt, isa, text, width, init, default_ipdoms=True)
    paths = check_lanes(isa, program, result, init)
    check_lockstep(program, result, paths)
    check_reconvergence(program, result, paths, ipdoms(isa, program))


# --------------------------------------------------------------------------- task 4: loops
@SETTINGS
@given(case=cases(LOOPS, size=3))
def test_loops_random_lane_varying_trip_counts(simt, isa, case):
    """Lanes leave top- and bottom-tested loops, and break out of them, at different
    iterations. Shortcut caught: a stack that loses the lanes that leave early (they must wait
    at the loop exit) or runs them twice."""
    text, width, init = case
    program, result = run(simt, isa, text, width, init)
    paths = check_lanes(isa, program, result, init)
    check_lockstep(program, result, paths)
    check_reconvergence(program, result, paths, ipdoms(isa, program))


def with_spin(text: str, cond: tuple) -> str:
    """`text` with a branch at its top into an endless loop placed after its exit: the lanes
    whose condition holds spin forever; the loop's pcs never reach the exit."""
    op, a, b, br = cond
    return (
        f"    {op} {COND}, {a}, {b}\n    {br} {COND}, spin\n"
        + text
        + "    exit\nspin:\n    add r5, r5, 1\n    jmp spin\n"
    )


@pytest.mark.kata_gate(
    "run(max_steps=k) does not stop an endless program after exactly k issues with StepLimitExceeded"
)
@SETTINGS
@given(case=cases(LOOPS, size=2), k=st.integers(1, 400))
def test_loops_max_steps_stops_endless_programs(simt, isa, case, k):
    text, width, init = case
    program = isa.parse(with_spin(text, ("and", "lane", "0", "bz")))  # every lane spins
    warp = simt.Warp(program, width, init=init)
    with raises(
        isa.StepLimitExceeded, f"Warp.run(max_steps={k}) on a program whose lanes never exit"
    ):
        warp.run(max_steps=k)
    assert len(warp.trace) == k, (
        f"run(max_steps={k}) issued {len(warp.trace)} instructions before raising, not {k}"
    )


@pytest.mark.kata_gate(
    "immediate_post_dominators gives an ipdom to pcs that never reach the exit (an endless loop), "
    "or a wrong one to the pcs that do"
)
@SETTINGS
@given(text=programs(EVERYTHING, size=3), cond=conditions)
def test_reconvergence_ipdom_with_an_endless_loop(simt, isa, text, cond):
    program = isa.parse(with_spin(text, cond))
    expected = ipdoms(isa, program)
    got = simt.immediate_post_dominators(program)
    wrong = {pc: (got.get(pc), d) for pc, d in expected.items() if got.get(pc) != d}
    extra = sorted(set(got) - set(expected))
    assert not wrong and not extra, (
        f"ipdoms wrong at {{pc: (yours, expected)}} {wrong}"
        + (
            f"; pcs of the endless loop never reach the exit and have no ipdom: {extra}"
            if extra
            else ""
        )
        + f", in\n{listing(program)}"
    )


# --------------------------------------------------------------------------- task 5: metrics
def metrics_case(simt, isa, case):
    text, width, init = case
    program, result = run(simt, isa, text, width, init, default_ipdoms=True)
    paths = check_lanes(isa, program, result, init)
    check_lockstep(program, result, paths)
    assert result.issued == len(result.trace), (
        f"issued: the trace holds {len(result.trace)} issues, issued says {result.issued}"
    )
    return program, result, paths, width


@pytest.mark.kata_gate(
    "Result.cycles is not the sum of each issue's instruction cost (isa.COST) on random programs"
)
@SETTINGS
@given(case=cases(EVERYTHING, size=3))
def test_metrics_cycles_are_the_issues_costs(simt, isa, case):
    """Each issue costs its instruction's cost, whatever its mask (a mul costs more than an add)."""
    text, width, init = case
    case = ("    mul r5, r5, lane\n" + text, width, init)  # every program issues a costly mul
    program, result, _, _ = metrics_case(simt, isa, case)
    want = sum(program[pc].cost for pc, _ in result.trace)
    assert result.cycles == want, (
        f"Result.cycles is {result.cycles}; the {result.issued} issues cost {want} "
        f"(each issue costs its instruction's isa.COST, whatever its mask), in\n{listing(program)}"
    )


@pytest.mark.kata_gate(
    "Result.simd_efficiency is not active lane-slots over issued lane-slots on random programs"
)
@SETTINGS
@given(case=cases(EVERYTHING, size=3))
def test_metrics_simd_efficiency_counts_active_lanes(simt, isa, case):
    program, result, paths, width = metrics_case(simt, isa, case)
    slots = sum(len(p) for p in paths)
    expected = slots / (result.issued * width) if result.issued else 1.0
    assert result.simd_efficiency == pytest.approx(expected), (
        f"Result.simd_efficiency is {result.simd_efficiency}: {slots} active lane-slots out of "
        f"{result.issued} issues x {width} lanes is {expected:.4f}, in\n{listing(program)}"
    )


@pytest.mark.kata_gate(
    "Result.divergences is not the number of issues whose active lanes split, on random programs"
)
@SETTINGS
@given(case=cases(EVERYTHING, size=3))
def test_metrics_divergences_count_the_splits(simt, isa, case):
    """Shortcut caught: counting every conditional branch as a divergence."""
    program, result, paths, _ = metrics_case(simt, isa, case)
    splits = len(divergent_issues(program, result.trace, paths))
    assert result.divergences == splits, (
        f"Result.divergences: {splits} branch issues split their lanes, you counted "
        f"{result.divergences}, in\n{listing(program)}"
    )
