"""Hidden tests of the nvcc-pipeline kata: the shortcuts that pass the public tests.

Each test's docstring names the shortcut it catches. Real toolchain output throughout (other
flags, other sources, a two-arch fatbin), plus synthetic ptxas reports built from the real line
formats (hypothesis), compared with the harness's parsers or with an oracle written here.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cuda import static
from harness.cuda.static.opcodes import SASS_CLASSES
from harness.native.cache import hash_parts
from harness.testing import fresh_module, hidden_settings, random_for, watch_calls
from harness.toolchain import require_tool, tool_version_text

SM75, SM90 = "sm_75", "sm_90"
# The harness's own parsers, demangler and classifier (harness.cuda.static), which grade this
# kata: a parser must not hand its text to them. (Finding c++filt with harness.toolchain is fine.)
ORACLES = ("harness.cuda", "harness.native")
SETTINGS = hidden_settings(40)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("nvcc-pipeline-hidden")


def write(workdir: Path, name: str, text: str) -> Path:
    path = workdir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- stages
def oracle_commands(text: str) -> list[list[str]]:
    return [
        shlex.split(line[3:])
        for line in text.splitlines()
        if line.startswith("#$ ") and not re.match(r"[A-Za-z_]\w*=", line[3:])
    ]


def test_stages_hidden_paths_with_spaces(stages, tc, kernels_cu, workdir):
    """Shortcut: splitting commands on whitespace instead of unquoting them like the shell
    (a source in "my kernels/" and an output "out dir/k.o")."""
    source = write(workdir, "my kernels/k.cu", kernels_cu.read_text())
    found = stages.parse_dryrun(tc.dryrun(source, ["-c", "-arch=sm_75", "-o", "out dir/k.o"]))
    assert found[-1].output == "out dir/k.o", (
        f"parse_dryrun of `nvcc -o 'out dir/k.o'`: the last stage's output is {found[-1].output!r}"
    )
    cudafe = next(s for s in found if s.tool == "cudafe++")
    assert str(source) in cudafe.args, "--orig_src_path_name is one argument, spaces and all"


@pytest.mark.parametrize(
    "args",
    [
        ["-c", "-G", "-arch=sm_75"],
        ["-c", "-rdc=true", "-arch=sm_90"],
        ["-arch=sm_75", "-o", "app"],
        ["-c", "-arch=compute_75"],
        ["-c", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"],
    ],
)
def test_stages_hidden_every_command(stages, tc, kernels_cu, args):
    """Shortcut: dropping commands that look uninteresting (rm, the host compiler) or lines
    that contain '=' anywhere, instead of only NAME=value settings."""
    text = tc.dryrun(kernels_cu, args)
    want = oracle_commands(text)
    found = stages.parse_dryrun(text)
    assert [s.tool for s in found] == [Path(w[0]).name for w in want], (
        f"parse_dryrun(nvcc --dryrun {' '.join(args)}): tools {[s.tool for s in found]}, "
        f"expected every command's: {[Path(w[0]).name for w in want]}"
    )
    assert [list(s.args) for s in found] == [w[1:] for w in want], "arguments, unquoted"


def test_stages_hidden_flags_reach_the_right_tool(stages, tc, kernels_cu):
    """Shortcut: keeping tool names only. -G makes cicc build at -O0 and ptxas emit debug
    info (-g); -Xptxas -O0 reaches ptxas and not cicc; nvcc's own -O0 reaches neither."""
    by_tool = {
        flags: {s.tool: s.args for s in stages.parse_dryrun(tc.dryrun(kernels_cu, list(flags)))}
        for flags in (("-c", "-G"), ("-c", "-Xptxas", "-O0"), ("-c", "-O0"))
    }
    g, xptxas, o0 = by_tool["-c", "-G"], by_tool["-c", "-Xptxas", "-O0"], by_tool["-c", "-O0"]
    assert "-O0" in g["cicc"] and "-g" in g["ptxas"], "nvcc -G: cicc gets -O0, ptxas gets -g"
    assert "-O0" in xptxas["ptxas"], f"nvcc -Xptxas -O0: ptxas's arguments {xptxas['ptxas']}"
    assert "-O0" not in xptxas["cicc"], "nvcc -Xptxas -O0: cicc's arguments have no -O0"
    assert "-O0" not in o0["cicc"] + o0["ptxas"], "nvcc -O0 (host code): neither cicc nor ptxas"


def test_stages_hidden_virtual_arch_only(stages, tc, kernels_cu):
    """Shortcut: assuming every build has a ptxas stage and a cubin. -arch=compute_75 embeds
    PTX only: the driver compiles it when the program loads."""
    found = stages.parse_dryrun(tc.dryrun(kernels_cu, ["-c", "-arch=compute_75"]))
    assert "ptxas" not in [s.tool for s in found], "-arch=compute_75: no ptxas stage"
    images = stages.fatbin_images(found)
    assert images == [("ptx", 75)], f"-arch=compute_75 embeds PTX only: fatbin_images {images}"
    linked = stages.parse_dryrun(tc.dryrun(kernels_cu, ["-arch=sm_90", "-o", "app"]))
    assert stages.fatbin_images(linked) == [("elf", 90), ("ptx", 90)], (
        "the first fatbinary (the object's), not the device-link one"
    )


# --------------------------------------------------------------------------- resources
FIELDS = {
    "arch": "arch",
    "registers": "registers",
    "stack_frame": "stack_bytes",
    "spill_stores": "spill_stores",
    "spill_loads": "spill_loads",
    "shared_bytes": "shared_bytes",
    "const_bytes": "const_bytes",
    "barriers": "barriers",
}


def same_as_harness(resources, log: str) -> None:
    ours, theirs = resources.parse_ptxas(log), static.parse_ptxas_verbose(log)
    assert sorted(ours) == sorted(theirs), "every kernel, and no device function"
    for name, r in ours.items():
        for mine, field in FIELDS.items():
            want = getattr(theirs[name], field)
            assert getattr(r, mine) == want, f"{name}.{mine}: got {getattr(r, mine)}, want {want}"


def test_resources_hidden_device_functions(resources, tc, kernels_cu):
    """Shortcut: attaching every "Function properties" block to the last kernel. Under -G the
    non-inlined atomicAdd helper (a device function) reports 20 bytes of spill stores after
    the last kernel's report: they are not that kernel's."""
    log = tc.ptxas_log(kernels_cu, SM75, ["-G"])
    assert re.search(r"Function properties for (?!.*Compiling)\S*atomicAdd", log), (
        "this nvcc's -G report has no properties block for the atomicAdd device function"
    )  # the test's own premise, about the toolchain
    same_as_harness(resources, log)


KERNEL_NAMES = [
    "saxpy",
    "_Z9block_sumPKfPfi",
    "_ZN7stencil4blurILi3EfEEvPKT0_PS1_i",
    "_ZN7stencil4blurILi2EdEEvPKT0_PS1_i",
    "_Z15histogram_localPKjPjii",
    "_Z6hornerILi48EEvPKfS1_Pfi",
]


@st.composite
def ptxas_reports(draw):
    """A report in ptxas's line formats: kernels in any order, zero fields left out the way
    ptxas leaves them out, device-function blocks and register-cap notes in between."""
    arch = draw(st.sampled_from([SM75, SM90]))
    names = draw(st.lists(st.sampled_from(KERNEL_NAMES), min_size=1, max_size=6, unique=True))
    lines = ["ptxas info    : 0 bytes gmem"]
    for name in names:
        if draw(st.booleans()):
            lines.append(
                f"ptxas info    : Overriding maximum register limit 256 for '{name}' with  "
                f"24 of maxrregcount option"
            )
    for name in names:
        stack, stores, loads = (draw(st.integers(0, 512)) for _ in range(3))
        regs, bars = draw(st.integers(2, 255)), draw(st.integers(0, 16))
        used = f"ptxas info    : Used {regs} registers, used {bars} barriers"
        if stack:
            used += f", {stack} bytes cumulative stack size"
        if smem := draw(st.sampled_from([0, 0, 1024, 4224, 49152])):
            used += f", {smem} bytes smem"
        if arch == SM75:
            used += f", {draw(st.integers(352, 400))} bytes cmem[0]"
        lines += [
            f"ptxas info    : Compiling entry function '{name}' for '{arch}'",
            f"ptxas info    : Function properties for {name}",
            f"    {stack} bytes stack frame, {stores} bytes spill stores, {loads} bytes spill loads",
            used,
            f"ptxas info    : Compile time = {draw(st.integers(1, 999))}.5 ms",
        ]
        if draw(st.booleans()):
            helper = draw(st.sampled_from(["__uAtomicAdd", "_Z6helperPf", "_Z5debugv"]))
            lines += [
                f"ptxas info    : Function properties for {helper}",
                f"    {draw(st.integers(8, 64))} bytes stack frame, "
                f"{draw(st.integers(1, 64))} bytes spill stores, 20 bytes spill loads",
                "ptxas info    : Compile time = 0.861 ms",
            ]
    return "\n".join(lines) + "\n"


@SETTINGS
@given(log=ptxas_reports())
def test_resources_hidden_synthetic_reports(resources, log):
    """Shortcuts: a parser that handles the first kernel only, a regex that needs every field
    (smem and cmem[0] are left out when absent), one that misses `spill stores` or confuses
    them with `spill loads`, and one that reads kernel names off any quoted name."""
    same_as_harness(resources, log)


REPORT = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4blurPKfPfi' for 'sm_75'
ptxas info    : Function properties for _Z4blurPKfPfi
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 31 registers, 4224 bytes smem, 368 bytes cmem[0]
"""


@pytest.mark.kata_gate(
    "parse_ptxas' or demangle's answers come from calls into the grader's ptxas parser or "
    "demangler (harness.cuda.static), not from parsing the text"
)
def test_resources_hidden_parsed_not_delegated(resources):
    """Shortcut: parse_ptxas returning harness.cuda.static.parse_ptxas_verbose's answer and
    demangle returning static.demangle's (running c++filt yourself is the task)."""
    with watch_calls(*ORACLES, processes=False) as log:
        mine = fresh_module(resources)
        found = mine.parse_ptxas(REPORT)
        names = mine.demangle(["_Z4blurPKfPfi", "plain"])
    assert not log, f"resources.py called {log}"
    blur = found["_Z4blurPKfPfi"]
    got = (blur.registers, blur.spill_stores, blur.shared_bytes)
    assert got == (31, 4, 4224), f"parse_ptxas(REPORT): (registers, spill stores, smem) {got}"
    want = {"_Z4blurPKfPfi": "blur(float const*, float*, int)", "plain": "plain"}
    spelt = {
        n: static.gnu_spelling(s) for n, s in names.items()
    }  # cu++filt's spelling is right too
    assert spelt == want, f"demangle(['_Z4blurPKfPfi', 'plain']) gave {names}, expected {want}"


TEMPLATES = """
namespace ns {
template <typename A, typename B> struct Pair { A a; B b; };
template <typename P> __global__ void apply(P *p, int n) {
    int i = threadIdx.x;
    if (i < n) p[i].a += 1;
}
template __global__ void apply<Pair<int, float> >(Pair<int, float> *, int);
namespace inner {
template <short N> __global__ void k(float *x) { x[threadIdx.x] *= N; }
template __global__ void k<3>(float *);
}  // namespace inner
}  // namespace ns
extern "C" __global__ void plain(float *x) { x[threadIdx.x] = 0.0f; }
"""


def test_resources_hidden_template_names(resources, tc, workdir):
    """Shortcuts: splitting the signature on spaces (`ns::Pair<int, float>` has one) and cutting
    at the first '(' (`k<(short)3>`: a non-type template argument is printed with a cast)."""
    source = write(workdir, "templates.cu", TEMPLATES)
    names = list(resources.parse_ptxas(tc.ptxas_log(source, SM75)))
    readable = resources.demangle(names)
    want = static.demangle(names)
    spelt = {n: static.gnu_spelling(s) for n, s in readable.items()}
    assert spelt == want, f"demangle({names}) gave {readable}, expected {want} (either spelling)"
    got = sorted(static.gnu_spelling(resources.kernel_name(readable[n])) for n in names)
    expected = ["ns::apply<ns::Pair<int, float> >", "ns::inner::k<(short)3>", "plain"]
    assert got == expected, (
        f"kernel_name of {sorted(readable.values())}: {got}, expected {expected}"
    )


# --------------------------------------------------------------------------- lineinfo
def oracle_lines(ptx: str) -> list[tuple]:
    """(function, PTX line, file, source line, inlined_at) for every instruction: a second
    implementation (inlined_at: (file, line) of the call for inlined code, else None)."""
    files = {
        int(n): Path(p).name for n, p in re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', ptx, re.M)
    }
    out, function, pending, loc, depth = [], None, None, None, 0
    for number, raw in enumerate(ptx.splitlines(), 1):
        code = raw.split("//")[0].strip()
        if depth == 0:
            if m := re.search(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)", code):
                pending = m.group(1)
            if "{" in code:
                function, pending, loc = pending, None, None
            depth += code.count("{") - code.count("}")
            continue
        if m := re.match(r"\.loc\s+(\d+)\s+(\d+)", code):
            at = re.search(r"inlined_at\s+(\d+)\s+(\d+)", code)
            loc = (files[int(m.group(1))], int(m.group(2)))
            loc += ((files[int(at.group(1))], int(at.group(2))) if at else None,)
            continue
        depth += code.count("{") - code.count("}")
        if depth == 0:
            function = None
        skip = not code or code in "{}" or code.startswith(".") or code.endswith(":")
        if not skip and function and loc:
            out.append((function, number, *loc))
    return out


def ours(lineinfo, ptx: str) -> list[tuple]:
    return [
        (i.function, i.ptx_line, i.file, i.line, i.inlined_at)
        for i in lineinfo.parse_lineinfo(ptx).instructions
    ]


def same_table(lineinfo, ptx: str, what: str) -> None:
    """parse_lineinfo's table against the oracle's, failing with the instructions that differ:
    the first ones missing, extra or attributed otherwise, named by function and PTX line."""
    got, want = ours(lineinfo, ptx), oracle_lines(ptx)
    if got == want:
        return
    lines = ptx.splitlines()
    mine = {(r[0], r[1]): r for r in got}
    theirs = {(r[0], r[1]): r for r in want}
    fields = ("function", "PTX line", "file", "line", "inlined_at")

    def show(row: tuple) -> str:
        text = lines[row[1] - 1].strip() if 0 < row[1] <= len(lines) else "?"
        return f"{row[0]} PTX line {row[1]} `{text}`"

    missing = [theirs[k] for k in theirs if k not in mine]
    extra = [mine[k] for k in mine if k not in theirs]
    wrong = [(mine[k], theirs[k]) for k in theirs if k in mine and mine[k] != theirs[k]]
    parts = [f"{what}: parse_lineinfo's table has {len(got)} instructions, expected {len(want)}"]
    if missing:
        parts.append(f"{len(missing)} missing, first: " + "; ".join(map(show, missing[:3])))
    if extra:
        parts.append(f"{len(extra)} not instructions or unattributed, first: " + "; ".join(map(show, extra[:3])))  # fmt: skip
    for g, w in wrong[:3]:
        diff = ", ".join(
            f"{f} {a!r} (expected {b!r})" for f, a, b in zip(fields, g, w, strict=True) if a != b
        )
        parts.append(f"{show(w)}: {diff}")
    if len(wrong) > 3:
        parts.append(f"... {len(wrong)} instructions attributed otherwise in all")
    if not (missing or extra or wrong):
        parts.append("the same instructions in another order (PTX order expected)")
    raise AssertionError("\n".join(parts))


def test_lineinfo_hidden_device_debug(lineinfo, tc, kernels_cu):
    """Shortcuts: losing track of the function at the inner braces of a call sequence
    (`{ .param .b64 param0; ... call.uni ... }`), skipping non-kernel `.func` bodies, and
    carrying the last .loc of one function into the next. -G PTX has all three, and four
    .file entries."""
    ptx = tc.ptx(kernels_cu, SM75, ["-G"])
    assert re.search(r"^\s*\.func", ptx, re.M) and "call.uni" in ptx, (
        "this nvcc's -G PTX has no .func body or call sequence"
    )  # the test's own premise, about the toolchain
    files, entries = lineinfo.parse_files(ptx), re.findall(r"^\s*\.file", ptx, re.M)
    assert len(files) == len(entries), f"-G PTX: parse_files {files}, {len(entries)} .file lines"
    same_table(lineinfo, ptx, "-G PTX")


def test_lineinfo_hidden_without_lineinfo(lineinfo, tc, kernels_cu):
    """Shortcut: attributing instructions with no .loc before them (to line 0, or to the last
    .loc of the previous function). Without -lineinfo there is nothing to attribute."""
    ptx = tc.ptx(kernels_cu, SM75)
    assert not re.search(r"^\s*\.loc\s", ptx, re.M) and ".local" in ptx, "(.local is no .loc)"
    assert lineinfo.parse_files(ptx) == {}, "PTX without -lineinfo: parse_files finds no file"
    got = lineinfo.parse_lineinfo(ptx).instructions
    assert got == [], f"PTX without -lineinfo: no instruction has a line, got {got[:3]}"


@pytest.mark.kata_gate(
    "parse_lineinfo's table (function, PTX line, file, line, inlined_at of each instruction) "
    "differs from a second parser's on real -lineinfo PTX with inlined code"
)
@pytest.mark.parametrize("arch", [SM75, SM90])
def test_lineinfo_hidden_every_instruction_and_where_it_was_inlined(
    lineinfo, tc, kernels_cu, questions_cu, arch
):
    """Shortcuts: never reading inlined_at (inlined code then looks like the callee's own
    lines), or dropping the instructions of call sequences: every instruction of every
    function of both given sources, -lineinfo at sm_75 and sm_90, against a second parser."""
    for source in (kernels_cu, questions_cu):
        ptx = tc.ptx(source, arch, ["-lineinfo"])
        assert "inlined_at" in ptx, f"{source.name}: this nvcc's PTX has no inlined code"
        same_table(lineinfo, ptx, f"{source.name} -lineinfo {arch}")


LINE_DIRECTIVES = """#line 1 "helpers.cuh"
__device__ float smooth(float v) {
    return v * v * (3.0f - 2.0f * v);
}
#line 1 "main.cu"
extern "C" __global__ void shade(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = smooth(x[i]);
    }
}
"""


def test_lineinfo_hidden_second_file(lineinfo, tc, workdir):
    """Shortcuts: assuming one source file, and a .loc regex anchored after the column, which
    drops `.loc 2 3 5, function_name ..., inlined_at 1 4 9` and leaves inlined code on the
    caller's line."""
    source = write(workdir, "shade.cu", LINE_DIRECTIVES)
    ptx = tc.ptx(source, SM75, ["-lineinfo"])
    files = lineinfo.parse_files(ptx)
    assert sorted(files.values()) == ["helpers.cuh", "main.cu"], f"parse_files: {files}"
    mapped = lineinfo.parse_lineinfo(ptx)
    body = mapped.for_line("helpers.cuh", 2)
    assert body, "smooth's return statement is helpers.cuh line 2"
    inlined = {i.inlined_at for i in body}
    assert inlined == {("main.cu", 4)}, f"smooth is inlined at main.cu line 4, got {inlined}"
    assert [i.text.split()[0] for i in body].count("mul.f32") == 2, "v * v * (3 - 2v)"
    same_table(lineinfo, ptx, "two files' PTX")


# --------------------------------------------------------------------------- sass
def oracle_trim(insns: list) -> list:
    end = len(insns)
    while end and insns[end - 1].base == "NOP":
        end -= 1
    last = insns[end - 1] if end else None
    if last is not None and last.base == "BRA" and last.operands == f"{last.address:#x}":
        end -= 1
    return insns[:end]


def as_tuples(insns) -> list[tuple]:
    return [(i.address, i.predicate, i.opcode, i.operands) for i in insns]


@pytest.fixture(scope="module")
def fatbin_dump(tc, kernels_cu) -> str:
    """cuobjdump of an object built for sm_75 and sm_90: two cubins in one fatbin (the object
    is kept in the harness's build cache, so nvcc runs once)."""
    nvcc, text = require_tool("nvcc"), kernels_cu.read_text()
    gencodes = ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_90,code=sm_90"]

    def produce(tmp: Path) -> None:
        (tmp / "kernels.cu").write_text(text)
        subprocess.run(
            [str(nvcc), "-c", *gencodes, "kernels.cu", "-o", "multi.o"],
            cwd=tmp, check=True, capture_output=True, timeout=300,
        )  # fmt: skip

    key = hash_parts(
        ["nvcc-pipeline-fatbin", str(nvcc), tool_version_text("nvcc"), *gencodes, text]
    )
    entry = tc.CACHE.get_or_create(key, produce, label="nvcc-pipeline two-arch object")
    dump = subprocess.run(
        [str(require_tool("cuobjdump")), "--dump-sass", str(entry.path / "multi.o")],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return dump.stdout


def test_sass_hidden_fatbin_with_two_archs(sass, tc, kernels_cu, fatbin_dump):
    """Shortcuts: keying functions by name (the sm_90 copy overwrites or extends the sm_75 one)
    and taking the arch from the first `code for` line only."""
    functions = sass.parse_sass(fatbin_dump)
    for arch in (SM75, SM90):
        alone = static.parse_sass(tc.sass_text(kernels_cu, arch))
        mine = [f for f in functions if f.arch == arch]
        assert [f.name for f in mine] == list(alone), f"each kernel once for {arch}"
        for f in mine:
            assert as_tuples(f.instructions) == as_tuples(alone[f.name]), f"{arch} {f.name}"


def test_sass_hidden_device_debug_dump(sass, tc, kernels_cu):
    """Shortcuts: counting the encoding lines or the header lines as instructions, a classify
    that knows only the public examples' opcodes. -G code is long, with many more opcodes."""
    text = tc.sass_text(kernels_cu, SM75, ["-G"])
    theirs = static.parse_sass(text)
    for f in sass.parse_sass(text):
        assert as_tuples(f.instructions) == as_tuples(theirs[f.name]), f.name
        want = Counter(static.classify_sass(i.opcode) for i in oracle_trim(theirs[f.name]))
        assert sass.count_classes(f) == want, f.name


def test_sass_hidden_classify_every_opcode(sass, tc, kernels_cu, questions_cu):
    """Shortcut: a class table with only the opcodes of kernels.cu at -O3."""
    opcodes = set()
    builds = [(SM75, []), (SM75, ["-Xptxas", "-O0"]), (SM75, ["-maxrregcount=24"]), (SM90, [])]
    for source in (kernels_cu, questions_cu):
        for arch, options in builds:
            for f in static.parse_sass(tc.sass_text(source, arch, options)).values():
                opcodes |= {i.opcode for i in f}
    wrong = {
        op: sass.classify(op) for op in opcodes if sass.classify(op) != static.classify_sass(op)
    }
    assert not wrong, f"misclassified: {wrong}"


@pytest.mark.kata_gate(
    "classify puts opcodes of the Volta..Hopper instruction-set tables in the wrong class "
    "(opcodes that kernels.cu and questions.cu do not compile to, with random modifiers)"
)
def test_sass_hidden_classify_the_whole_table(sass):
    """Every opcode of every class of the instruction-set tables (harness.cuda.static.opcodes),
    with modifiers drawn fresh each run, and opcodes in no table ("other"): compiled kernels
    use a few dozen of them, so a class table missing or moving one (the given float and
    integer classes included: DSETP, VABSDIFF) is only seen here."""
    rng = random_for("sass classify table")
    wrong = {}
    for cls, members in sorted(SASS_CLASSES.items()):
        for base in sorted(members):
            mods = "".join(
                "." + rng.choice(("E", "SYS", "64", "U32", "STRONG", "GPU", "F32", "RZ", "X"))
                for _ in range(rng.randrange(3))
            )
            got = sass.classify(base + mods)
            if got != cls:
                wrong[base + mods] = f"{got!r}, expected {cls!r}"
    for other in ("QSPC", "XYZW", "R2B"):
        if sass.classify(other) != "other":
            wrong[other] = f"{sass.classify(other)!r}, expected 'other' (in no table)"
    assert not wrong, f"classify: {len(wrong)} opcodes misclassified: {wrong}"


DUMP = """
\tcode for sm_75
\t\tFunction : _Z3fooPf
\t.headerflags    @"EF_CUDA_SM75 EF_CUDA_PTX_SM(EF_CUDA_SM75)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E.SYS R0, [R2] ;
        /*0020*/              @P0  STS [R4], R0 ;
        /*0030*/                   EXIT ;
        /*0040*/                   BRA 0x40;
        /*0050*/                   NOP;
"""


@pytest.mark.kata_gate(
    "parse_sass' or classify's answers come from calls into the grader's SASS parser or "
    "classifier (harness.cuda.static), not from reading cuobjdump's text"
)
def test_sass_hidden_classified_not_delegated(sass):
    """Shortcut: classify returning harness.cuda.static.classify_sass's class, parse_sass
    returning static.parse_sass's instructions."""
    with watch_calls(*ORACLES, processes=False) as log:
        mine = fresh_module(sass)
        functions = mine.parse_sass(DUMP)
        classes = [mine.classify(op) for op in ("LDG.E.SYS", "STS", "FFMA", "BAR.SYNC", "LDL")]
        counts = mine.count_classes(functions[0])
    assert not log, f"sass.py called {log}"
    want = [static.classify_sass(op) for op in ("LDG.E.SYS", "STS", "FFMA", "BAR.SYNC", "LDL")]
    assert classes == want, f"classify(LDG.E.SYS, STS, FFMA, BAR.SYNC, LDL): {classes}, not {want}"
    assert sum(counts.values()) == 4, (
        "MOV, LDG, STS, EXIT: the BRA to itself and the NOP are padding"
    )


def test_sass_hidden_padding_rules(sass):
    """Shortcuts: dropping every trailing BRA, or everything after the last EXIT. A loop's
    back-branch can sit at the end of a function (after an EXIT); only a BRA to its own
    address is padding, and only after the NOPs are gone."""
    I = sass.Instruction  # noqa: E741, N806
    body = [I(0x0, "S2R", "R0, SR_TID.X"), I(0x10, "EXIT", ""), I(0x20, "IADD3", "R0, R0, 0x1, RZ")]
    loop_back = I(0x30, "BRA", "0x20")
    pad = [I(0x40, "BRA", "0x40"), I(0x50, "NOP", ""), I(0x60, "NOP", "")]
    got = sass.trim_padding([*body, loop_back, *pad])
    assert got == [*body, loop_back], f"a loop's back-branch, then padding: kept {got}"
    got = sass.trim_padding([*body, loop_back])
    assert got == [*body, loop_back], f"a back-branch after EXIT is code, not padding: {got}"
    got = sass.trim_padding([*body, I(0x30, "BRA", "0x30")])
    assert got == body, f"a BRA to its own address is padding: kept {got}"
    assert sass.trim_padding([]) == [], "trim_padding([])"


# --------------------------------------------------------------------------- answers
OTHER = """// Kernels the answers task has not shown.
namespace physics {
template <int DIM>
__global__ void verlet(float *pos, float *vel, const float *acc, float dt, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        for (int d = 0; d < DIM; ++d) {
            vel[i * DIM + d] += acc[i * DIM + d] * dt;
            pos[i * DIM + d] += vel[i * DIM + d] * dt;
        }
    }
}
template __global__ void verlet<3>(float *, float *, const float *, float, int);
}  // namespace physics

__global__ void scan_block(const int *in, int *out, int n) {
    __shared__ int buf[2][128];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t, cur = 0;
    buf[0][t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int offset = 1; offset < 128; offset *= 2) {
        buf[1 - cur][t] = buf[cur][t] + (t >= offset ? buf[cur][t - offset] : 0);
        cur = 1 - cur;
        __syncthreads();
    }
    if (i < n) {
        out[i] = buf[cur][t];
    }
}

extern "C" __global__ void fir40(const float *taps, const float *x, float *y, int n) {
    float h[40];
#pragma unroll
    for (int k = 0; k < 40; ++k) {
        h[k] = taps[k];
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i + 40 <= n; i += gridDim.x * blockDim.x) {
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < 40; ++k) {
            acc += h[k] * x[i + k];
        }
        y[i] = acc;
    }
}
"""


def readable(mangled: str) -> str:
    sig = static.demangle([mangled])[mangled]
    head = sig[: sig.rindex("(")] if sig.endswith(")") else sig
    depth = 0
    for i in range(len(head) - 1, -1, -1):
        depth += {">": 1, "<": -1}.get(head[i], 0)
        if depth == 0 and head[i] == " ":
            return head[i + 1 :]
    return head


def truth(tc, source: Path) -> dict:
    names = {m: readable(m) for m in static.ptxas_resources(source, SM75, cache=tc.CACHE)}
    res = {a: static.ptxas_resources(source, a, cache=tc.CACHE) for a in (SM75, SM90)}
    regs = {names[m]: {a: res[a][m].registers for a in res} for m in names}
    capped = static.ptxas_resources(source, SM75, ["-maxrregcount=24"], cache=tc.CACHE)
    code = {o: static.parse_sass(tc.sass_text(source, SM75, o)) for o in ((), ("-Xptxas", "-O0"), ("-O0",))}  # fmt: skip
    stores: dict[str, set[int]] = {n: set() for n in names.values()}
    function, line = None, None
    for raw in tc.ptx(source, SM75, ["-lineinfo"]).splitlines():
        text = raw.strip()
        if m := re.search(r"\.entry\s+([\w$]+)", text):
            function = m.group(1)
        elif m := re.match(r"\.loc\s+\d+\s+(\d+)", text):
            line = int(m.group(1))
        elif re.match(r"(@!?%\w+\s+)?st\.global", text):
            stores[names[function]].add(line)
    dry = oracle_commands(tc.dryrun(source, ["-c", "-arch=sm_75"]))
    fatbin = next(" ".join(w) for w in oracle_commands(tc.dryrun(source, ["-c", "-arch=sm_90"])) if w[0].endswith("fatbinary"))  # fmt: skip

    def listing(o):
        return {n: [(i.opcode, i.operands) for i in f] for n, f in code[o].items()}

    return {
        "ptx_writer": next(Path(w[0]).name for w in dry if w[-1].endswith(".ptx")),
        "images_sm_90": [(k, int(s)) for k, s in re.findall(r"kind=(\w+),sm=(\d+)", fatbin)],
        "nvcc_O0_changes_sass": listing(()) != listing(("-O0",)),
        "registers": regs,
        "more_registers_on": {
            k: "same" if v[SM75] == v[SM90] else max(v, key=v.get) for k, v in regs.items()
        },
        "instructions": {
            names[m]: {"O0": len(oracle_trim(code["-Xptxas", "-O0"][m])), "O3": len(oracle_trim(f))}
            for m, f in code[()].items()
        },
        "spill_stores_maxrreg24": {names[m]: capped[m].spill_stores for m in names},
        "store_lines": {k: sorted(v) for k, v in stores.items()},
    }


@pytest.fixture(scope="module")
def other_cu(workdir) -> Path:
    return write(workdir, "other.cu", OTHER)


@pytest.fixture(scope="module")
def other_run(kata, tc, other_cu) -> tuple[dict, object]:
    """answers(other.cu), and the calls it made into the grader's packages other than through
    the given toolchain.py (whose own use of them builds and dumps the code)."""
    with watch_calls(*ORACLES, processes=False, allow=(tc,)) as log:
        found = kata.module("answers").answers(other_cu)
    return found, log


@pytest.fixture(scope="module")
def other_answers(other_run) -> dict:
    return other_run[0]


@pytest.mark.kata_gate(
    "answers(source) comes from calls into the grader's parsers or demangler "
    "(harness.cuda.static) made by answers.py or its parsers, not from the kata's own parsers"
)
def test_answers_hidden_measured_not_delegated(other_run):
    """Shortcut: answers() taking the grader's ptxas_resources, parse_sass and demangle (from
    sys.modules or any other route) instead of the parsers of the other tasks. Calls made
    in any thread count; the given toolchain.py's own calls do not."""
    assert not other_run[1], f"answers(other.cu) called {other_run[1]} (outside toolchain.py)"


@pytest.fixture(scope="module")
def other_truth(tc, other_cu) -> dict:
    return truth(tc, other_cu)


@pytest.mark.kata_gate(
    "answers(source) are wrong for a source other than questions.cu (kernels the task has not "
    "shown, measured with the real tools)"
)
@pytest.mark.parametrize(
    "key",
    [
        "registers",
        "more_registers_on",
        "instructions",
        "spill_stores_maxrreg24",
        "store_lines",
        "images_sm_90",
        "nvcc_O0_changes_sass",
    ],
)
def test_answers_hidden_another_source(other_answers, other_truth, key):
    """Shortcut: answers typed in for questions.cu pass the public tests; on another source
    (a namespaced template, a shared-memory scan, a 40-tap filter that spills under a register
    cap) only measured answers are right."""
    got = other_answers.get(key)
    if isinstance(got, list):
        got = [tuple(x) if isinstance(x, list) else x for x in got]
    assert got == other_truth[key], (
        f"answers()[{key!r}] is wrong for a source other than questions.cu"
    )
