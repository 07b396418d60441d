"""The type-exact boundary (harness/boundary.py): what learner code returns to a test or to given
code is plain, or the test fails with one sentence naming the function and the value.

A kata tree in tmp (a learner `calc.py` full of values that lie, a given `sim.py` with a
dataclass and a simulator that calls learner callbacks) loaded through the loader as the `kata`
fixture does; then the learner view through pytester, inline and in a subprocess.
"""

from __future__ import annotations

import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness import boundary, hangs
from harness.boundary import BoundaryError
from harness.loader import KataContext
from harness.manifest import load_manifest

from .conftest import DEMO_CONFTEST, KataRepo

MANIFEST = """\
id = "{id}"
title = "Boundary demo"
phase = 1
summary = "values that lie"
languages = ["python"]
files = ["calc.py"]
given = ["sim.py"]
time_limit = 10

[[tasks]]
id = "count"
title = "Count"
points = 10
tests = ["test_*"]
"""

SIM = """\
from dataclasses import dataclass


@dataclass
class Outcome:
    total: int
    names: list


def run(policy, n):
    return [policy(i) for i in range(n)]


def run_obj(obj, n):
    return [obj.choose(i) for i in range(n)]


def agrees(policy, expected):
    # a given checker that trusts ==, as many do
    return all(policy(i) == e for i, e in enumerate(expected))
"""

CALC = """\
from __future__ import annotations

import unittest.mock
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness import todo

from . import sim
from .sim import Outcome
from .sim import agrees as sim_agrees


class Liar(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class FloatLiar(float):
    def __eq__(self, other):
        return True


class ListLiar(list):
    def __eq__(self, other):
        return True


class Obj:
    def __eq__(self, other):
        return True


class Near:
    def __rsub__(self, other):
        return 0.0

    def __abs__(self):
        return 0.0


@dataclass
class Point:
    x: int
    y: int


class Policy:
    def __init__(self) -> None:
        self.calls = 0

    def choose(self, i: int) -> int:
        self.calls += 1
        return Liar(i) if i == 2 else i

    def honest(self, i: int) -> int:
        return self._helper(i)

    def _helper(self, i: int) -> int:
        return Liar(i)  # internal: learner code calling its own is not checked

    @property
    def size(self) -> int:
        return Liar(4)


def honest(a: int) -> int:
    return a + 1


def liar_int() -> int:
    return Liar(3)


def liar_float() -> float:
    return FloatLiar(0.5)


def liar_list() -> list[int]:
    return ListLiar([1, 2])


def liars_in_list() -> list[int]:
    return [1, 2, Liar(3)]


def lying_key() -> dict[int, int]:
    return {Liar(1): 2}


def lying_object():
    return Obj()


def mock_any() -> int:
    return unittest.mock.ANY


def near() -> float:
    return Near()


def object_array():
    return np.array([Liar(1)], dtype=object)


def lying_field() -> Outcome:
    return Outcome(Liar(1), ["a"])


def missing_return() -> int:
    total = 1 + 1


def wrong_type() -> int:
    return 2.5


def fraction_for_float() -> float:
    import fractions

    return fractions.Fraction(1, 3)


def point() -> Point:
    return Point(1, 2)


def plain_values() -> dict[str, object]:
    return {
        "ints": list(range(1000)),
        "pairs": [(i, float(i)) for i in range(100)],
        "array": np.arange(10.0),
        "scalar": np.float64(1.5),
        "point": Point(1, 2),
        "outcome": Outcome(3, ["a", "b"]),
        "nested": {"a": [{"b": (1, 2, frozenset({3}))}]},
        "none": None,
    }


def anything() -> Any:
    return object()


def numpy_int() -> int:
    return np.int64(3)


def internal() -> int:
    return int(liar_int() == 99)  # the liar stays inside learner code: 1, a plain int


def gen():
    yield 1
    yield Liar(2)


def closure():
    return lambda: Liar(1)


def policy_fn(i: int) -> int:
    return Liar(i)


def not_started() -> int:
    todo("not_started")


def _helper() -> int:
    return None  # wrong for its annotation, but only learner code calls it


class Builder:
    def __init__(self) -> None:
        self.value = _helper()  # __init__ runs as learner code: _helper is not checked


def make_class():
    class Made:
        def get(self) -> int:
            return Liar(1)

    return Made()


def raises(x: int) -> int:
    raise ValueError(f"x must be positive, got {x}")


def lambda_to_checker() -> bool:
    return sim.agrees(lambda i: Liar(i), [5, 6])  # the given checker trusts ==


def closure_to_checker() -> bool:
    def policy(i):
        return Liar(i)

    return sim_agrees(policy, [5, 6])  # the given name as imported into calc.py


def method_to_checker() -> bool:
    class Chooser:
        def choose(self, i):
            return Liar(i)

    return sim.agrees(Chooser().choose, [5, 6])


def honest_lambda() -> bool:
    return sim.agrees(lambda i: 2 * i, [0, 2, 4]) and sim.run(lambda i: i, 3) == [0, 1, 2]
"""


def write_kata(root: Path, kata_id: str = "bnd", calc: str = CALC) -> Path:
    kata = root / "katas" / "phase01" / kata_id
    (kata / "tests").mkdir(parents=True, exist_ok=True)
    (root / "solutions" / "phase01" / kata_id).mkdir(parents=True, exist_ok=True)
    (kata / "kata.toml").write_text(MANIFEST.format(id=kata_id))
    (kata / "sim.py").write_text(SIM)
    (kata / "calc.py").write_text(textwrap.dedent(calc))
    (root / "solutions" / "phase01" / kata_id / "calc.py").write_text(textwrap.dedent(calc))
    return kata


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    kata = write_kata(tmp_path_factory.mktemp("boundary"))
    ctx = KataContext(kata, load_manifest(kata), "learner")
    return ctx.module("calc"), ctx.module("sim")


LIARS = {
    "liar_int": "calc.liar_int returned an int subclass (Liar, defined in calc.py); "
    "return a plain int",
    "liar_float": "calc.liar_float returned a float subclass (FloatLiar, defined in calc.py); "
    "return a plain float",
    "liar_list": "calc.liar_list returned a list subclass (ListLiar, defined in calc.py); "
    "return a plain list",
    "liars_in_list": "calc.liars_in_list returned a list whose item [2] is an int subclass "
    "(Liar, defined in calc.py)",
    "lying_key": "calc.lying_key returned a dict whose key 1 is an int subclass (Liar",
    "lying_object": "calc.lying_object returned an Obj (defined in calc.py) whose class defines "
    "__eq__",
    "mock_any": "calc.mock_any returned an _ANY (from unittest.mock) whose class defines __eq__",
    "near": "calc.near returned a Near (defined in calc.py) whose class defines __",
    "object_array": "calc.object_array returned a numpy array of dtype object",
    "lying_field": "calc.lying_field returned an Outcome object whose attribute .total is an int "
    "subclass (Liar, defined in calc.py)",
}


@pytest.mark.parametrize("name", sorted(LIARS))
def test_a_value_that_lies_fails_with_one_sentence(modules: tuple[Any, Any], name: str) -> None:
    calc, _ = modules
    with pytest.raises(BoundaryError) as e:
        getattr(calc, name)()
    assert str(e.value).startswith(LIARS[name]), str(e.value)
    assert "\n" not in str(e.value)


def test_a_liar_no_longer_fools_a_comparison_in_a_given_checker(modules: tuple[Any, Any]) -> None:
    calc, sim = modules
    with pytest.raises(BoundaryError, match=r"^calc\.policy_fn returned an int subclass"):
        sim.agrees(calc.policy_fn, [7, 7, 7])


def test_a_missing_return_is_named_with_the_stubs_annotation(modules: tuple[Any, Any]) -> None:
    calc, _ = modules
    with pytest.raises(BoundaryError) as e:
        calc.missing_return()
    assert str(e.value) == (
        "calc.missing_return returned None; expected int (the stub says `-> int`): "
        "does it end without a `return`?"
    )


def test_a_wrong_type_is_named_with_what_was_expected(modules: tuple[Any, Any]) -> None:
    calc, _ = modules
    with pytest.raises(BoundaryError) as e:
        calc.wrong_type()
    assert str(e.value) == (
        "calc.wrong_type returned a float (2.5); expected int (the stub says `-> int`)"
    )


def test_a_fraction_for_a_float_is_named_in_plain_english(modules: tuple[Any, Any]) -> None:
    calc, _ = modules
    with pytest.raises(BoundaryError) as e:
        calc.fraction_for_float()
    assert str(e.value).endswith("is neither a float nor an int"), str(e.value)


def test_plain_values_pass_unchanged(modules: tuple[Any, Any]) -> None:
    calc, _ = modules
    assert calc.honest(1) == 2
    values = calc.plain_values()
    assert values["ints"] == list(range(1000)) and values["point"] == calc.Point(1, 2)
    assert calc.point() == calc.Point(1, 2)  # a learner dataclass's generated __eq__ is fine
    assert calc.numpy_int() == 3  # a numpy integer for `-> int`: accepted
    assert calc.internal() == 1
    assert type(calc.anything()) is object  # `-> Any`: nothing to check


def test_c_implemented_value_methods_of_a_library_are_honest() -> None:
    from google.protobuf import descriptor_pb2  # grpcio-tools' protobuf: upb's C Message

    assert boundary.problem(descriptor_pb2.FileDescriptorProto(name="x.proto")) is None
    assert (
        boundary.problem(__import__("re").compile("x")) is None
    )  # the liar stayed inside; a plain int came out


def test_a_todo_and_an_honest_exception_pass_through_unchanged(modules: tuple[Any, Any]) -> None:
    from harness import KataTodo

    calc, _ = modules
    with pytest.raises(KataTodo):
        calc.not_started()
    with pytest.raises(ValueError, match="x must be positive, got -1"):
        calc.raises(-1)


def test_methods_properties_generators_and_returned_callables_are_checked(
    modules: tuple[Any, Any],
) -> None:
    calc, _ = modules
    policy = calc.Policy()
    assert policy.choose(1) == 1
    with pytest.raises(BoundaryError, match=r"^calc\.Policy\.choose returned an int subclass"):
        policy.choose(2)
    with pytest.raises(BoundaryError, match=r"^calc\.Policy\.honest returned an int subclass"):
        policy.honest(1)  # _helper's liar is unchecked inside, but honest() hands it out
    with pytest.raises(BoundaryError, match=r"^calc\.Policy\.size returned an int subclass"):
        _ = policy.size
    it = calc.gen()
    assert next(it) == 1
    with pytest.raises(BoundaryError, match=r"^calc\.gen yielded an int subclass"):
        next(it)
    fn = calc.closure()
    with pytest.raises(BoundaryError, match=r"closure.<locals>.<lambda> \(returned by calc"):
        fn()


def test_learner_code_calling_its_own_is_unchecked_even_from_init(
    modules: tuple[Any, Any],
) -> None:
    calc, _ = modules
    assert calc.Builder().value is None


def test_a_class_first_met_in_a_returned_value_is_guarded_then(modules: tuple[Any, Any]) -> None:
    calc, _ = modules
    made = calc.make_class()
    with pytest.raises(
        BoundaryError, match=r"^calc\.make_class.<locals>.Made\.get returned an int"
    ):
        made.get()


def test_a_call_from_another_thread_is_checked(modules: tuple[Any, Any]) -> None:
    import threading

    calc, _ = modules
    caught: list[BaseException] = []

    def call() -> None:
        try:
            calc.liar_int()
        except BaseException as e:  # noqa: BLE001
            caught.append(e)

    t = threading.Thread(target=call)
    t.start()
    t.join()
    assert len(caught) == 1 and isinstance(caught[0], BoundaryError), caught


def test_a_given_simulator_calling_learner_code_gets_checked_values(
    modules: tuple[Any, Any],
) -> None:
    calc, sim = modules
    with pytest.raises(BoundaryError, match=r"^calc\.policy_fn returned an int subclass"):
        sim.run(calc.policy_fn, 2)
    with pytest.raises(BoundaryError, match=r"^calc\.Policy\.choose returned an int subclass"):
        sim.run_obj(calc.Policy(), 3)


@pytest.mark.parametrize(
    "name, label",
    [
        ("lambda_to_checker", "calc.lambda_to_checker.<locals>.<lambda> (passed to sim.agrees)"),
        ("closure_to_checker", "calc.closure_to_checker.<locals>.policy (passed to sim.agrees)"),
        ("method_to_checker", "calc.method_to_checker.<locals>.Chooser.choose (passed to "
         "sim.agrees)"),
    ],
)  # fmt: skip
def test_a_learner_callable_handed_to_given_code_is_checked_there(
    modules: tuple[Any, Any], name: str, label: str
) -> None:
    """Learner code handing a lambda, a closure or a bound method to a given checker: the checker
    calls it as given code, so what it returns crosses the boundary (a Liar would make the
    checker's `==` true); honest callables pass through with their values unchanged."""
    calc, _ = modules
    with pytest.raises(BoundaryError) as e:
        getattr(calc, name)()
    assert str(e.value).startswith(f"{label} returned an int subclass (Liar"), str(e.value)
    assert calc.honest_lambda() is True


def test_signatures_wrapped_and_inspect_still_work(modules: tuple[Any, Any]) -> None:
    calc, _ = modules
    assert boundary.guarded(calc.honest) and boundary.guarded(calc.Policy().choose)
    assert str(inspect.signature(calc.honest)) == "(a: 'int') -> 'int'"
    assert inspect.getsource(calc.honest.__wrapped__).startswith("def honest(a: int)")
    assert inspect.isgeneratorfunction(calc.gen)
    assert calc.honest.__name__ == "honest" and calc.honest.__module__.endswith(".calc")


def test_the_budgets_profile_hook_sees_through_the_wrapper(modules: tuple[Any, Any]) -> None:
    from harness.sandbox import fence

    calc, _ = modules
    result, ran = fence.reference_calls(calc.__name__.rsplit(".", 1)[0], calc.honest, 4)
    assert (result, ran) == (5, [])


def test_a_hung_learner_function_behind_the_boundary_is_fenced(modules: tuple[Any, Any]) -> None:
    calc, _ = modules
    hang = hangs.Hang(hangs.CALL, "k", "honest() in calc.py", "test_x", "exceeded 2 s")
    original = calc.honest
    try:
        assert hangs.fence(calc, "honest", hang)
        with pytest.raises(hangs.KnownHang, match="honest\\(\\) in calc.py hung in test_x"):
            calc.honest(1)
    finally:
        calc.honest = original


# --------------------------------------------------------------------------- the learner view
PUBLIC = """\
import pytest


def test_count_formats(calc):
    assert f"{calc.missing_return():,}" == "2"


def test_liar(calc):
    assert calc.liar_int() == 3


def test_started(calc):
    assert calc.not_started() == 1


def test_raises(calc):
    with pytest.raises(ValueError):
        calc.raises(-1)


@pytest.mark.kata_gate("count is checked on a value no public test uses")
def test_gate(calc):
    assert calc.wrong_type() == 2
"""


def _repo(repo: KataRepo) -> None:
    write_kata(repo.root, "bnd")
    repo.write("katas/phase01/bnd/tests/conftest.py", DEMO_CONFTEST)
    repo.write("katas/phase01/bnd/tests/test_bnd.py", PUBLIC)


def _tests(repo: KataRepo) -> dict[str, dict[str, Any]]:
    data = json.loads((repo.root / ".kata" / "last-run.json").read_text())
    return {r["name"]: r for t in data["katas"][0]["tasks"] for r in t["tests"]}


def _check_view(repo: KataRepo, out: str) -> None:
    tests = _tests(repo)
    assert "unsupported format string" not in out, out
    assert tests["test_count_formats"]["outcome"] == "failed"
    assert tests["test_count_formats"]["message"].startswith(
        "calc.missing_return returned None; expected int (the stub says `-> int`)"
    ), tests["test_count_formats"]
    assert tests["test_liar"]["message"].startswith(
        "calc.liar_int returned an int subclass (Liar, defined in calc.py); return a plain int"
    )
    assert tests["test_started"]["outcome"] == "not_started", tests["test_started"]
    assert tests["test_raises"]["outcome"] == "passed"
    # the gate's test failed on the value's type, not on the gate's property: no gate
    assert tests["test_gate"]["outcome"] == "failed"
    assert "gate of task" not in out and "count is checked" not in out, out
    # each records the refused value as the learner's (kata verify --mutants: an honest mistake)
    assert tests["test_count_formats"]["raised"].startswith(
        "BoundaryError: calc.missing_return returned None"
    ), tests["test_count_formats"]
    assert tests["test_gate"]["raised"].startswith("BoundaryError: calc.wrong_type"), tests


def test_the_learner_view_names_the_value_inline(repo: KataRepo) -> None:
    _repo(repo)
    result = repo.pytester.runpytest("katas")
    _check_view(repo, result.stdout.str())


def test_the_learner_view_names_the_value_in_a_subprocess(repo: KataRepo) -> None:
    _repo(repo)
    result = repo.pytester.runpytest_subprocess("katas", "-n", "2")
    out = result.stdout.str()
    _check_view(repo, out)
    assert "calc.missing_return returned None; expected int" in out
