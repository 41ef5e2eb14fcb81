"""Small value classes without :mod:`dataclasses`.

``dataclasses`` costs the CLI about 20 ms of start-up (it imports ``inspect``,
which imports ``tokenize``, ``dis`` …, and each decorated class runs several
``exec`` calls), and a frozen dataclass's ``__init__`` goes through
``object.__setattr__`` for every field, three times slower than a plain
slotted class. The analysis creates many small values, and a one-shot
``gradguard check`` pays every import, so the core's value types use this
instead:

    @record
    class Position:
        line: int
        character: int = 0

gives a ``__slots__`` class with ``__init__`` (positional or keyword), ``__repr__``,
``__eq__``/``__hash__`` over the fields (``eq=False``: identity), ordering
(``order=True``: field tuples compared in order), pickling, and
:func:`replace`. ``frozen=True`` (the default) makes assignment raise;
``Factory(dict)`` is a per-instance default; ``compare=("a", "b")`` limits
equality, hashing and ordering to those fields.
"""

from __future__ import annotations

from operator import attrgetter

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover  (type checkers only: no typing import on the CLI's start-up path)
    from typing import Any, Callable, TypeVar

    from typing_extensions import dataclass_transform

    _T = TypeVar("_T")
else:
    def dataclass_transform(**_):
        return lambda fn: fn


_MISSING = object()


class FrozenError(AttributeError):
    """Assignment to a field of a frozen record."""


class _Factory:
    """A default built per instance (``Factory(dict)``), like ``field(default_factory=...)``."""

    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


if TYPE_CHECKING:  # pragma: no cover
    def Factory(make: Callable[[], _T]) -> _T:  # noqa: N802  (a type checker sees the value it makes)
        ...
else:
    Factory = _Factory


def _frozen_setattr(self, name, value=None):  # also serves as __delattr__(self, name)
    raise FrozenError(f"cannot assign to field {name!r} of frozen {type(self).__name__}")


@dataclass_transform(frozen_default=True)  # what type checkers see: a dataclass-like transform (PEP 681)
def record(cls=None, *, frozen: bool = True, eq: bool = True, order: bool = False, compare=None):
    def wrap(c):
        return _build(c, frozen, eq, order, compare)

    return wrap if cls is None else wrap(cls)


def _build(cls, frozen, eq, order, compare):
    annotations = cls.__dict__.get("__annotations__", {})
    fields = tuple(n for n, t in annotations.items() if not str(t).startswith("ClassVar"))
    defaults = {}
    for name in fields:
        if name in cls.__dict__:
            defaults[name] = cls.__dict__[name]
    ns = {k: v for k, v in cls.__dict__.items() if k not in defaults and k not in ("__dict__", "__weakref__")}
    ns["__slots__"] = fields
    ns["_fields"] = fields

    init: Any = _init_from_template(cls, fields, defaults, frozen)
    if init is None:
        init = _init_from_source(cls, fields, defaults, frozen)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    ns["__init__"] = init

    get_all: Any = attrgetter(*fields) if fields else (lambda self: ())
    if len(fields) == 1:
        get_all = (lambda g: lambda self: (g(self),))(get_all)  # always a tuple

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{n}={v!r}" for n, v in zip(fields, get_all(self))) + ")"

    def __reduce__(self):
        return (type(self), get_all(self))

    ns.setdefault("__repr__", __repr__)
    ns["__reduce__"] = __reduce__
    if frozen:
        ns["__setattr__"] = _frozen_setattr
        ns["__delattr__"] = _frozen_setattr

    if eq:
        cmp_fields = tuple(compare) if compare is not None else fields
        key: Any = attrgetter(*cmp_fields) if cmp_fields else (lambda self: ())
        if len(cmp_fields) == 1:
            key = (lambda g: lambda self: (g(self),))(key)

        def __eq__(self, other):
            if other.__class__ is not self.__class__:
                return NotImplemented
            return self is other or key(self) == key(other)

        def __ne__(self, other):
            if other.__class__ is not self.__class__:
                return NotImplemented
            return not (self is other or key(self) == key(other))

        ns["__eq__"] = __eq__
        ns["__ne__"] = __ne__
        if frozen:
            def __hash__(self):
                return hash(key(self))

            ns["__hash__"] = __hash__
        else:
            ns["__hash__"] = None  # mutable and compared by value: unhashable, like a dataclass
        if order:
            def _cmp(op):
                def method(self, other):
                    if other.__class__ is not self.__class__:
                        return NotImplemented
                    return op(key(self), key(other))

                return method

            import operator

            for name, op in (("__lt__", operator.lt), ("__le__", operator.le),
                             ("__gt__", operator.gt), ("__ge__", operator.ge)):
                ns[name] = _cmp(op)
    new = type(cls)(cls.__name__, cls.__bases__, ns)
    new.__qualname__ = cls.__qualname__
    return new


def _init_from_source(cls, fields, defaults, frozen):
    """``__init__`` written as source and compiled (one exec per class: a record
    with a ``Factory`` default, or more fields than the templates have)."""
    env = {"_MISSING": _MISSING, "_set": object.__setattr__}
    params, body = [], []
    seen_default = False
    for i, name in enumerate(fields):
        if name in defaults:
            seen_default = True
            d = defaults[name]
            env[f"_d{i}"] = d
            if isinstance(d, _Factory):
                params.append(f"{name}=_MISSING")
                value = f"(_d{i}.make() if {name} is _MISSING else {name})"
            else:
                params.append(f"{name}=_d{i}")
                value = name
        else:
            if seen_default:
                raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one with a default")
            params.append(name)
            value = name
        body.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
    src = f"def __init__(self, {', '.join(params)}):\n    " + ("\n    ".join(body) or "pass") + "\n"
    exec(src, env)  # noqa: S102  (our own generated source, from field names)
    return env["__init__"]


def _init_from_template(cls, fields, defaults, frozen):
    """``__init__`` without compiling anything: the template of
    :mod:`gradguard.model._record_inits` for this many fields (already compiled
    with the package), its parameter and attribute names replaced by the fields'
    (``CodeType.replace``) and its defaults given as the function's. Compiling
    one ``__init__`` per class was 18 M instructions of every ``gradguard check``'s
    start-up (26 classes), more than a one-line file's analysis. None when there
    is no template (a ``Factory`` default, more fields than the templates have, or
    an interpreter whose code objects do not take the replacement)."""
    if any(isinstance(d, _Factory) for d in defaults.values()):
        return None
    seen_default = False
    for name in fields:
        if name in defaults:
            seen_default = True
        elif seen_default:
            raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one with a default")
    from gradguard.model import _record_inits

    template = getattr(_record_inits, f"{'frozen' if frozen else 'plain'}_{len(fields)}", None)
    if template is None:
        return None
    rename = {f"f{i}": name for i, name in enumerate(fields)}
    code = template.__code__
    try:
        code = code.replace(
            co_varnames=tuple(rename.get(v, v) for v in code.co_varnames),
            co_names=tuple(rename.get(n, n) for n in code.co_names),
            co_consts=tuple(rename.get(c, c) if c.__class__ is str else c for c in code.co_consts),
            co_name="__init__",
        )
        import types

        init = types.FunctionType(code, {"_set": object.__setattr__}, "__init__",
                                  tuple(defaults[n] for n in fields if n in defaults) or None)
    except (TypeError, ValueError, AttributeError):  # pragma: no cover  (another interpreter's code objects)
        return None
    return init


def template_source(largest: int = 24) -> str:
    """The text of :mod:`gradguard.model._record_inits` (a test holds the file to it)."""
    out = ['"""Templates of record ``__init__`` methods, one per number of fields: generated by\n'
           '``gradguard.model.record.template_source()`` (a test holds this file to it), compiled\n'
           'with the package, so that :func:`gradguard.model.record.record` renames one instead of\n'
           'compiling an ``__init__`` per class at start-up."""\n',
           "# fmt: off\n", "_set = object.__setattr__\n"]
    for frozen in (False, True):
        for n in range(largest + 1):
            params = "".join(f", f{i}" for i in range(n))
            lines = [f"_set(self, 'f{i}', f{i})" if frozen else f"self.f{i} = f{i}" for i in range(n)] or ["pass"]
            out.append(f"\n\ndef {'frozen' if frozen else 'plain'}_{n}(self{params}):  # noqa: E501\n")
            out.extend(f"    {line}\n" for line in lines)
    return "".join(out)


def replace(obj, **changes):
    """A copy of record ``obj`` with some fields changed."""
    fields = type(obj)._fields
    for k in changes:
        if k not in fields:
            raise TypeError(f"{type(obj).__name__} has no field {k!r}")
    return type(obj)(*[changes[n] if n in changes else getattr(obj, n) for n in fields])


def is_record(obj) -> bool:
    """Is ``obj`` an instance (not the class) of a :func:`record` class?"""
    cls = type(obj)
    return not isinstance(obj, type) and isinstance(cls.__dict__.get("_fields"), tuple) and "__slots__" in cls.__dict__
