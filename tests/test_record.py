"""The core's value classes (gradguard.model.record) keep the dataclass
behaviour the rest of the code relies on: value equality and hashing, order,
immutability, per-instance defaults, pickling (the CLI's worker processes send
findings back), and replace()."""

import pickle

import pytest

from gradguard.model.findings import Finding, Fix, Position, Range, Severity, TextEdit
from gradguard.model.record import Factory, FrozenError, is_record, record, replace


@record(order=True)
class P:
    a: int
    b: str = "x"


@record(frozen=False)
class M:
    items: list = Factory(list)
    n: int = 0


@record(compare=("k",))
class K:
    k: int
    note: object = None


def test_value_equality_hash_and_repr():
    assert P(1) == P(1, "x") == P(a=1, b="x")
    assert P(1) != P(2)
    assert hash(P(1, "y")) == hash(P(1, "y"))
    assert len({P(1), P(1), P(2)}) == 2
    assert repr(P(3, "z")) == "P(a=3, b='z')"
    assert P(1).__eq__(1) is NotImplemented


def test_order_compares_fields_in_order():
    assert P(1, "z") < P(2, "a")
    assert P(1, "a") < P(1, "b")
    assert sorted([P(2), P(1, "b"), P(1, "a")]) == [P(1, "a"), P(1, "b"), P(2)]
    with pytest.raises(TypeError):
        P(1) < 3  # noqa: B015


def test_frozen_records_refuse_assignment():
    p = P(1)
    with pytest.raises(FrozenError):
        p.a = 2
    with pytest.raises(AttributeError):
        del p.b
    assert p.a == 1


def test_factory_defaults_are_per_instance_and_mutable_records_are_unhashable():
    a, b = M(), M()
    a.items.append(1)
    assert b.items == [] and a.items == [1]
    a.n = 5
    assert a.n == 5
    with pytest.raises(TypeError):
        hash(a)


def test_compare_subset_ignores_other_fields():
    assert K(1, "a") == K(1, "b")
    assert hash(K(1, object())) == hash(K(1, None))
    assert K(1) != K(2)


def test_missing_argument_and_unknown_field_are_errors():
    with pytest.raises(TypeError):
        P()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        replace(P(1), c=3)
    with pytest.raises(TypeError):
        @record
        class Bad:  # noqa: F841
            a: int = 0
            b: int


def test_pickle_and_replace_round_trip_core_types():
    rng = Range(Position(1, 2), Position(1, 9))
    fix = Fix({"en": "t", "zh": "标题"}, (TextEdit(rng, "h = h.detach()\n"),), True)
    f = Finding("GG101", rng, {"en": "m", "zh": "消息"}, Severity.ERROR, (), (fix,), {"variable": "h"})
    back = pickle.loads(pickle.dumps(f))
    assert back == f and back.data == {"variable": "h"} and back.fixes[0].edits[0].new_text == "h = h.detach()\n"
    moved = f.shifted(3)
    assert moved.range.start == Position(4, 2) and moved.fixes[0].edits[0].range.end == Position(4, 9)
    assert f.range.start == Position(1, 2)  # the original is untouched
    assert replace(f, severity=Severity.WARNING).severity is Severity.WARNING
    # data is not part of a finding's identity (it is free-form detail)
    assert replace(f, data={"other": 1}) == f
    assert is_record(f) and not is_record(Finding) and not is_record((1, 2))


def test_init_is_a_renamed_template_not_compiled_per_class(monkeypatch):
    """A record's ``__init__`` is the template for its number of fields, renamed
    (no ``exec`` at start-up); it takes its fields by position and by name, says
    which is missing by its name, applies defaults (shared, as a default is), and
    refuses an unknown keyword. A Factory default, and more fields than the
    templates have, still compile one."""
    import builtins
    from pathlib import Path

    from gradguard.model import record as R

    compiled = []
    real_exec = builtins.exec
    monkeypatch.setattr(builtins, "exec", lambda *a: (compiled.append(a[0]), real_exec(*a))[1])

    @record
    class Frozen3:
        名字: str
        line: int
        items: tuple = ()

    @record(frozen=False, eq=False)
    class Plain2:
        a: object
        b: object = None

    assert compiled == []
    assert Frozen3("x", 1) == Frozen3(line=1, 名字="x") == Frozen3("x", 1, ())
    assert Frozen3("x", 1).items is Frozen3("y", 2).items
    assert Frozen3.__init__.__qualname__.endswith("Frozen3.__init__")
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'line'"):
        Frozen3("x")
    with pytest.raises(TypeError, match="unexpected keyword argument 'lines'"):
        Frozen3("x", lines=1)
    with pytest.raises(FrozenError):
        Frozen3("x", 1).line = 2  # type: ignore[misc]
    p = Plain2(1)
    p.b = 5
    assert (p.a, p.b) == (1, 5) and pickle.loads(pickle.dumps(P(1, "y"))) == P(1, "y")

    @record(frozen=False)
    class WithFactory:
        items: list = Factory(list)

    wide = {"__annotations__": {f"x{i}": "int" for i in range(30)}}
    Wide = record(type("Wide", (), wide))
    assert len(compiled) == 2 and WithFactory().items is not WithFactory().items
    assert Wide(*range(30)).x29 == 29
    with pytest.raises(TypeError, match="without a default follows"):
        record(type("Bad", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 1}))
    # the templates' file is the one the generator writes
    text = (Path(R.__file__).parent / "_record_inits.py").read_text(encoding="utf-8")
    assert text == R.template_source(), "regenerate: python -c \"from gradguard.model.record import " \
        "template_source; print(template_source(), end='')\" > server/gradguard/model/_record_inits.py"
