"""Public tests of the nvcc-pipeline kata: your parsers on this machine's real toolchain output.

Each group is one task of kata.toml. Where a fact can be checked another way, the test does:
against the harness's own parsers (harness.cuda.static, the instructors' tools), against what
the source says (a 64-entry uint32 array is 256 bytes), or against the toolchain's data flow
(the .ptx cicc writes is the file ptxas reads). Nothing here depends on one nvcc version.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path

import pytest

from harness.cuda import static

SM75, SM90 = "sm_75", "sm_90"
PTXAS_O0 = ["-Xptxas", "-O0"]
REGISTER_CAP = ["-maxrregcount=24"]


def source_line(path: Path, text: str) -> int:
    """The 1-based line of `path` that contains `text` (exactly one)."""
    hits = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(hits) == 1, f"{path.name}: {text!r} found on lines {hits}"
    return hits[0]


# --------------------------------------------------------------------------- stages
def tools(found) -> list[str]:
    return [s.tool for s in found]


def test_stages_compile_only(stages, tc, kernels_cu):
    found = stages.parse_dryrun(tc.dryrun(kernels_cu, ["-c", "-arch=sm_75"]))
    names = tools(found)
    assert names, "no stages found: commands are the lines that start with '#$ '"
    assert not [n for n in names if "=" in n], f"variable settings are not commands: {names}"
    for tool in ("cudafe++", "cicc", "ptxas", "fatbinary"):
        assert names.count(tool) == 1, f"expected one {tool} stage, got {names}"
    order = [names.index(t) for t in ("cudafe++", "cicc", "ptxas", "fatbinary")]
    assert order == sorted(order), f"the device chain runs cudafe++ -> cicc -> ptxas: {names}"
    assert "nvlink" not in names, "-c compiles only: nothing is linked"
    assert names[-1] == "gcc" and found[-1].output == "kernels.o", (
        "the last step compiles the host code, with the fatbin embedded, into kernels.o"
    )


def test_stages_data_flow(stages, tc, kernels_cu):
    """The .ptx that cicc writes is what ptxas reads; the cubin ptxas writes goes into the
    fatbin: follow the files, not the order of lines."""
    found = {s.tool: s for s in stages.parse_dryrun(tc.dryrun(kernels_cu, ["-c", "-arch=sm_75"]))}
    cicc, ptxas = found["cicc"], found["ptxas"]
    assert (cicc.arch, ptxas.arch) == ("compute_75", "sm_75"), (
        "cicc compiles for a virtual arch (compute_75), ptxas for a real one (sm_75)"
    )
    assert cicc.output and cicc.output.endswith(".ptx"), f"cicc writes PTX, output={cicc.output}"
    assert cicc.output in ptxas.args, "ptxas's input is cicc's output"
    assert ptxas.output and ptxas.output.endswith(".cubin")
    assert any(ptxas.output in arg for arg in found["fatbinary"].args), "the cubin is embedded"
    assert not [a for s in found.values() for a in s.args if '"' in a], "unquote the arguments"


def test_stages_link_adds_nvlink(stages, tc, kernels_cu):
    found = stages.parse_dryrun(tc.dryrun(kernels_cu, ["-arch=sm_75", "-o", "app"]))
    names = tools(found)
    assert "nvlink" in names, f"building an executable links device code with nvlink: {names}"
    nvlink = found[names.index("nvlink")]
    assert nvlink.arch == "sm_75", f"nvlink --arch=sm_75, got arch={nvlink.arch}"
    assert names.index("nvlink") > names.index("ptxas")
    assert found[-1].output == "app", "the host linker writes the executable last"


def test_stages_two_gencodes(stages, tc, kernels_cu):
    args = [
        "-c",
        "-gencode",
        "arch=compute_75,code=sm_75",
        "-gencode",
        "arch=compute_90,code=sm_90",
    ]
    found = stages.parse_dryrun(tc.dryrun(kernels_cu, args))
    archs = [(s.tool, s.arch) for s in found if s.tool in ("cicc", "ptxas")]
    assert archs == [
        ("cicc", "compute_75"),
        ("ptxas", "sm_75"),
        ("cicc", "compute_90"),
        ("ptxas", "sm_90"),
    ], "one cicc + ptxas pair per -gencode, in order"
    assert stages.fatbin_images(found) == [("elf", 75), ("elf", 90)], (
        "code=sm_XX embeds SASS only: no PTX for the driver to JIT"
    )


def test_stages_arch_shorthand_embeds_ptx(stages, tc, kernels_cu):
    found = stages.parse_dryrun(tc.dryrun(kernels_cu, ["-c", "-arch=sm_90"]))
    assert stages.fatbin_images(found) == [("elf", 90), ("ptx", 90)], (
        "-arch=sm_90 means -gencode arch=compute_90,code=[sm_90,compute_90]: SASS and PTX"
    )
    assert stages.fatbin_images([]) == []


# --------------------------------------------------------------------------- resources
FIELDS = {  # ours -> harness.cuda.static.Resources
    "arch": "arch",
    "registers": "registers",
    "stack_frame": "stack_bytes",
    "spill_stores": "spill_stores",
    "spill_loads": "spill_loads",
    "shared_bytes": "shared_bytes",
    "const_bytes": "const_bytes",
    "barriers": "barriers",
}


def assert_same_resources(resources, log: str) -> None:
    ours = resources.parse_ptxas(log)
    theirs = static.parse_ptxas_verbose(log)
    assert sorted(ours) == sorted(theirs), "every kernel (and only kernels) of the report"
    for name, r in ours.items():
        assert r.name == name
        for mine, harness_field in FIELDS.items():
            want = getattr(theirs[name], harness_field)
            assert getattr(r, mine) == want, f"{name}.{mine}: got {getattr(r, mine)}, want {want}"


def test_resources_sm_75(resources, tc, kernels_cu):
    assert_same_resources(resources, tc.ptxas_log(kernels_cu, SM75))


def test_resources_sm_90(resources, tc, kernels_cu):
    """sm_90's report has no cmem[0] field: const_bytes stays 0."""
    assert_same_resources(resources, tc.ptxas_log(kernels_cu, SM90))


def test_resources_spills_under_a_register_cap(resources, tc, kernels_cu):
    log = tc.ptxas_log(kernels_cu, SM75, REGISTER_CAP)
    assert_same_resources(resources, log)
    hist = resources.parse_ptxas(log)["_Z15histogram_localPKjPjii"]
    assert hist.registers <= 24 and hist.spill_stores > 0 and hist.spill_loads > 0


def test_resources_local_array_is_stack_not_spill(resources, tc, kernels_cu):
    hist = resources.parse_ptxas(tc.ptxas_log(kernels_cu, SM75))["_Z15histogram_localPKjPjii"]
    assert (hist.stack_frame, hist.spill_stores) == (64 * 4, 0), (
        "uint32_t bins[64] is 256 bytes of local memory: a stack frame, not a spill"
    )
    block_sum = resources.parse_ptxas(tc.ptxas_log(kernels_cu, SM75))["_Z9block_sumPKfPfi"]
    assert (block_sum.shared_bytes, block_sum.barriers) == (256 * 4, 1), "float tile[256]"


def test_resources_demangle(resources, tc, kernels_cu):
    names = list(static.parse_ptxas_verbose(tc.ptxas_log(kernels_cu, SM75)))
    got = resources.demangle(names)
    # c++filt and NVIDIA's cu++filt spell names differently (`float const*` / `const float *`):
    # either is right, compared in c++filt's spelling.
    assert {n: static.gnu_spelling(s) for n, s in got.items()} == static.demangle(names)
    assert got["saxpy"] == "saxpy", 'extern "C" names are not mangled'


def test_resources_kernel_name(resources):
    cases = {
        "void stencil::blur<3, float>(float const*, float*, int)": "stencil::blur<3, float>",
        "block_sum(float const*, float*, int)": "block_sum",
        "saxpy": "saxpy",
        # NVIDIA's cu++filt spells the same names this way:
        "void stencil::blur<3, float>(const T2 *, T2 *, int)": "stencil::blur<3, float>",
        "void ns::apply<ns::Pair<int, float>>(T1 *, int)": "ns::apply<ns::Pair<int, float>>",
    }
    for signature, want in cases.items():
        assert resources.kernel_name(signature) == want, signature


# --------------------------------------------------------------------------- lineinfo
@pytest.fixture(scope="module")
def kernels_ptx(tc, kernels_cu) -> str:
    return tc.ptx(kernels_cu, SM75, ["-lineinfo"])


def opcodes(instructions) -> list[str]:
    return [re.sub(r"^@!?%\w+\s+", "", i.text).split()[0] for i in instructions]


def test_lineinfo_files(lineinfo, kernels_ptx):
    files = lineinfo.parse_files(kernels_ptx)
    assert files[1] == "kernels.cu", f"file 1 is the source itself (base name), got {files}"


def test_lineinfo_saxpy_statement(lineinfo, kernels_ptx, kernels_cu):
    line = source_line(kernels_cu, "y[i] = a * x[i] + y[i];")
    ops = Counter(opcodes(lineinfo.parse_lineinfo(kernels_ptx).for_line("kernels.cu", line)))
    assert ops["ld.global.f32"] == 2 and ops["fma.rn.f32"] == 1 and ops["st.global.f32"] == 1, (
        f"line {line} (y[i] = a * x[i] + y[i]) compiles to two loads, an fma and a store: {ops}"
    )


def test_lineinfo_every_instruction_attributed(lineinfo, kernels_ptx):
    """With -lineinfo each function starts with a .loc, so every instruction has a line."""
    got = Counter(i.function for i in lineinfo.parse_lineinfo(kernels_ptx).instructions)
    want = {name: len(ops) for name, ops in static.parse_ptx(kernels_ptx).items()}
    assert dict(got) == want


def test_lineinfo_instruction_fields(lineinfo, kernels_ptx):
    lines = kernels_ptx.splitlines()
    for insn in lineinfo.parse_lineinfo(kernels_ptx).instructions:
        assert " ".join(lines[insn.ptx_line - 1].split()) == insn.text, (
            f"ptx_line {insn.ptx_line} is {lines[insn.ptx_line - 1]!r}, not {insn.text!r}"
        )


def test_lineinfo_inlined_device_function(lineinfo, kernels_ptx, kernels_cu):
    body = source_line(kernels_cu, "return v / (1.0f + fabsf(v));")
    call = source_line(kernels_cu, "x[i] = softsign(x[i]);")
    inlined = lineinfo.parse_lineinfo(kernels_ptx).for_line("kernels.cu", body)
    assert inlined and "div.rn.f32" in opcodes(inlined), "softsign's division is on its line"
    assert {i.function for i in inlined} == {"squash"}
    assert {i.inlined_at for i in inlined} == {("kernels.cu", call)}, "inlined at the call"


def test_lineinfo_shared_memory_loop(lineinfo, kernels_ptx, kernels_cu):
    line = source_line(kernels_cu, "tile[t] += tile[t + stride];")
    ops = opcodes(lineinfo.parse_lineinfo(kernels_ptx).for_line("kernels.cu", line))
    assert ops.count("ld.shared.f32") == 2 and ops.count("st.shared.f32") == 1, ops


# --------------------------------------------------------------------------- sass
def oracle_trim(insns: list) -> list:
    """Padding, by the rule the task states: trailing NOPs, then a BRA to its own address."""
    end = len(insns)
    while end and insns[end - 1].base == "NOP":
        end -= 1
    last = insns[end - 1] if end else None
    if last is not None and last.base == "BRA" and last.operands == f"{last.address:#x}":
        end -= 1
    return insns[:end]


def as_tuples(insns) -> list[tuple]:
    return [(i.address, i.predicate, i.opcode, i.operands) for i in insns]


@pytest.mark.parametrize("arch", [SM75, SM90])
def test_sass_parse(sass, tc, kernels_cu, arch):
    text = tc.sass_text(kernels_cu, arch)
    ours = sass.parse_sass(text)
    theirs = static.parse_sass(text)
    assert [f.name for f in ours] == list(theirs), "every function, in dump order"
    for f in ours:
        assert f.arch == arch, f"{f.name}: arch {f.arch!r}, the dump says `code for {arch}`"
        assert as_tuples(f.instructions) == as_tuples(theirs[f.name]), f.name


def test_sass_padding(sass, tc, kernels_cu):
    for f in static.parse_sass(tc.sass_text(kernels_cu, SM75)).values():
        mine = [sass.Instruction(i.address, i.opcode, i.operands, i.predicate) for i in f]
        assert as_tuples(sass.trim_padding(mine)) == as_tuples(oracle_trim(f))


def test_sass_classify(sass, tc, kernels_cu):
    examples = {
        "LDG.E.SYS": "global_memory",
        "STG.E.64": "global_memory",
        "LDS.U": "shared_memory",
        "STS": "shared_memory",
        "LDL.128": "local_memory",
        "STL": "local_memory",
        "LDC": "constant_memory",
        "ULDC.64": "constant_memory",
        "FFMA": "float",
        "IMAD.WIDE": "integer",
        "EXIT": "control",
        "BAR.SYNC.DEFER_BLOCKING": "sync",
        "NOT_AN_OPCODE": "other",
    }
    for opcode, want in examples.items():
        assert sass.classify(opcode) == want, opcode
    for arch in (SM75, SM90):
        for f in static.parse_sass(tc.sass_text(kernels_cu, arch)).values():
            for i in f:
                assert sass.classify(i.opcode) == static.classify_sass(i.opcode), i.opcode


def test_sass_count_classes(sass, tc, kernels_cu):
    for options in ([], PTXAS_O0):
        text = tc.sass_text(kernels_cu, SM75, options)
        theirs = static.parse_sass(text)
        for f in sass.parse_sass(text):
            want = Counter(static.classify_sass(i.opcode) for i in oracle_trim(theirs[f.name]))
            assert sass.count_classes(f) == want, f"{f.name} {options}"


def test_sass_local_memory_of_a_local_array(sass, tc, kernels_cu):
    (hist,) = [f for f in sass.parse_sass(tc.sass_text(kernels_cu, SM75)) if "histogram" in f.name]
    counts = sass.count_classes(hist)
    assert counts["local_memory"] > 0 and counts["global_memory"] > 0, counts


# --------------------------------------------------------------------------- answers
@pytest.fixture(scope="module")
def answered(kata, questions_cu) -> dict:
    return kata.module("answers").answers(questions_cu)


def readable(mangled: str) -> str:
    """Oracle for kernel_name: the demangled signature minus the return type and parameters."""
    sig = static.demangle([mangled])[mangled]
    depth, cut = 0, len(sig)
    for i in range(len(sig) - 1, -1, -1):  # the parameter list is the last top-level (...)
        depth += {")": 1, "(": -1}.get(sig[i], 0)
        if depth == 0 and sig[i] == "(":
            cut = i
            break
    head, depth = sig[:cut], 0
    for i in range(len(head) - 1, -1, -1):  # the return type ends at the last top-level space
        depth += {">": 1, "<": -1, ")": 1, "(": -1}.get(head[i], 0)
        if depth == 0 and head[i] == " ":
            return head[i + 1 :]
    return head


def truth(tc, source: Path) -> dict:
    """What answers(source) must say, from the harness's parsers and the raw tool output."""
    names = {m: readable(m) for m in static.ptxas_resources(source, SM75, cache=tc.CACHE)}
    res = {a: static.ptxas_resources(source, a, cache=tc.CACHE) for a in (SM75, SM90)}
    regs = {names[m]: {a: res[a][m].registers for a in res} for m in names}
    capped = static.ptxas_resources(source, SM75, REGISTER_CAP, cache=tc.CACHE)

    def sizes(options: list[str]) -> dict[str, int]:
        return {names[m]: len(oracle_trim(f)) for m, f in code(options).items()}

    def code(options: list[str]):
        return static.parse_sass(tc.sass_text(source, SM75, options))

    def dry(args: list[str]) -> list[list[str]]:
        text = tc.dryrun(source, args)
        return [shlex.split(ln[3:]) for ln in text.splitlines() if ln.startswith("#$ ")]

    o0, o3 = sizes(PTXAS_O0), sizes([])
    writer = next(w[0] for w in dry(["-c", "-arch=sm_75"]) if w[-1].endswith(".ptx") and "-o" in w)
    fatbin = next(" ".join(w) for w in dry(["-c", "-arch=sm_90"]) if w[0].endswith("fatbinary"))
    stores: dict[str, set[int]] = {n: set() for n in names.values()}
    ptx = tc.ptx(source, SM75, ["-lineinfo"]).splitlines()
    for name, loc_line, _text in _stores(ptx):
        stores[names[name]].add(loc_line)
    return {
        "ptx_writer": Path(writer).name,
        "images_sm_90": [
            (k, int(s)) for k, s in re.findall(r"--image3=kind=(\w+),sm=(\d+)", fatbin)
        ],
        "nvcc_O0_changes_sass": [
            (n, [(i.opcode, i.operands) for i in f]) for n, f in code([]).items()
        ]
        != [(n, [(i.opcode, i.operands) for i in f]) for n, f in code(["-O0"]).items()],
        "registers": regs,
        "more_registers_on": {
            k: "same" if v[SM75] == v[SM90] else max(v, key=v.get) for k, v in regs.items()
        },
        "instructions": {k: {"O0": o0[k], "O3": o3[k]} for k in regs},
        "spill_stores_maxrreg24": {names[m]: capped[m].spill_stores for m in names},
        "store_lines": {k: sorted(v) for k, v in stores.items()},
    }


def _stores(ptx: list[str]):
    """(function, .loc line, text) of every st.global in -lineinfo PTX."""
    function, line = None, None
    for raw in ptx:
        text = raw.strip()
        if m := re.search(r"\.entry\s+([\w$]+)", text):
            function, line = m.group(1), None
        elif m := re.match(r"\.loc\s+\d+\s+(\d+)", text):
            line = int(m.group(1))
        elif re.match(r"(@!?%\w+\s+)?st\.global", text):
            yield function, line, text


@pytest.fixture(scope="module")
def expected(tc, questions_cu) -> dict:
    return truth(tc, questions_cu)


ANSWER_KEYS = [
    "ptx_writer",
    "images_sm_90",
    "nvcc_O0_changes_sass",
    "registers",
    "more_registers_on",
    "instructions",
    "spill_stores_maxrreg24",
    "store_lines",
]


def test_answers_shape(answered):
    assert isinstance(answered, dict), f"answers() returns a dict, not {type(answered).__name__}"
    missing = [k for k in ANSWER_KEYS if k not in answered]
    assert not missing, f"answers() lacks {missing} (README.md, 'answers')"


@pytest.mark.parametrize("key", ANSWER_KEYS)
def test_answers_questions_cu(answered, expected, key):
    got = answered.get(key)
    if isinstance(got, list):
        got = [tuple(x) if isinstance(x, list) else x for x in got]
    assert got == expected[key], (
        f"answers()[{key!r}] does not match what the toolchain says for questions.cu "
        f"(README.md, 'answers', explains how to measure it)"
    )
