"""Frozen config dataclasses <-> JSON-able dicts (the run's resolved config.json), and the
names settings are given as: command-line flags or Python arguments."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def config_to_dict(config: Any) -> dict:
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            value = config_to_dict(value)
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def config_from_dict(cls: type[T], data: dict) -> T:
    """Rebuild `cls` from `config_to_dict` output; unknown keys are an error, missing keys take
    their defaults, and fields renamed since (`cls.RENAMED`, old name -> new) are read under
    their new names: configs written by older versions still load."""
    renamed = getattr(cls, "RENAMED", {})
    data = {renamed.get(key, key): value for key, value in data.items()}
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"unknown {cls.__name__} fields {sorted(unknown)}; known: {sorted(names)}")
    kwargs = {name: _convert(hints[name], value) for name, value in data.items()}
    return cls(**kwargs)


def _convert(hint, value):
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(args[0], value) if len(args) == 1 else value
    if dataclasses.is_dataclass(hint):
        return config_from_dict(hint, value)
    if hint is Path:
        return Path(value)
    if origin is tuple:
        return tuple(value)
    return value


def check_fields(config: Any, checks: dict[str, tuple[bool, str]], label: str) -> None:
    """Refuse the first field whose check fails: `{label}{name}={value!r} is invalid: expected
    {accepted}`. A `label` ending in "-" names the field with dashes after the label's text
    ("CPL -" -> "CPL bias-..."); a label ending in "--" names it as a command-line flag ("--" ->
    "--bias-...", "piano task --" -> "piano task --stretch-...")."""
    prefix = label if label.endswith("--") else label.rstrip("-")
    for name, (ok, accepted) in checks.items():
        if not ok:
            shown = name.replace("_", "-") if label.endswith("-") else name
            value = getattr(config, name)
            value = str(value) if isinstance(value, Path) else repr(value)
            raise ValueError(f"{prefix}{shown}={value} is invalid: expected {accepted}")


IDENTITY = ("env", "algo")
"""What a resumed run keeps: flags giving another value are refused."""


def check_same_identity(resume: Path | str, stored: dict, given: dict) -> None:
    """Refuse `given` values of `IDENTITY` fields (None: not given) that differ from the run's
    `stored` config, naming both."""
    for field in IDENTITY:
        was, now = stored.get(field), given.get(field)
        if was is not None and now is not None and now != was:
            raise ValueError(
                f"--{field} {now}: {resume} was run with --{field} {was}, and a resumed run "
                f"keeps its {field}; leave out --{field}, or start a new run with it"
            )


def type_problem(hint, value) -> str | None:
    """What a field typed `hint` takes, when `value` is not that; None when it is, or when these
    checks do not know the hint. A float is not an int (300.5 steps), nor is True a number."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        problems = [type_problem(a, value) for a in args]
        return None if None in problems else " or ".join(problems)
    if origin is typing.Literal:
        return None if value in args else f"one of {', '.join(map(repr, args))}"
    if origin is tuple:
        item = args[0] if len(args) == 2 and args[1] is Ellipsis else None
        if item is str and isinstance(value, str):
            return None  # (one name for a tuple of names: the configs take it so)
        ok = isinstance(value, tuple | list) and (
            item is None or all(type_problem(item, x) is None for x in value)
        )
        return None if ok else f"a tuple of {item.__name__} values" if item else "a tuple"
    if hint in _TYPES:
        name, types_ = _TYPES[hint]
        ok = isinstance(value, types_) and (hint is bool or not isinstance(value, bool))
        return None if ok else name
    if isinstance(hint, type):  # (a config dataclass, dict, ...)
        return None if isinstance(value, hint) else _article(hint.__name__)
    return None


_TYPES = {  # a field's type -> (what it is called, the types taken for it)
    int: ("an int", int | np.integer),
    float: ("a number", int | float | np.integer | np.floating),
    bool: ("True or False", bool | np.bool_),
    str: ("a str", str),
    Path: ("a path (str or Path)", str | os.PathLike),
    type(None): ("None", type(None)),
}


def _article(name: str) -> str:
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def check_types(cls, values: dict, who: str) -> dict:
    """Refuse the first of `values` (fields of the dataclass `cls`) whose type is not its
    field's, naming it as the Python argument it was given as; returns the values, paths given
    as str made Path."""
    hints = typing.get_type_hints(cls)
    for name, value in values.items():
        expected = type_problem(hints[name], value)
        if expected is not None:
            example = ""
            if isinstance(value, dict) and dataclasses.is_dataclass(hints[name]):
                args = ", ".join(f"{k}={v!r}" for k, v in value.items())
                example = f", e.g. {hints[name].__name__}({args})"
            raise TypeError(f"{who}: {name}={value!r} is {_article(type(value).__name__)}; "
                            f"expected {expected}{example}")  # fmt: skip
    paths = (Path, Path | None)
    return {name: Path(value) if hints[name] in paths and isinstance(value, str) else value
            for name, value in values.items()}  # fmt: skip


def check_own_types(config) -> None:
    """`check_types` over every field of the dataclass object `config` (from its
    `__post_init__`), naming them as arguments of its class; paths are left as given."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    check_types(type(config), values, type(config).__name__)


_FROM_CONFIG = contextvars.ContextVar("from_config", default=False)


@contextlib.contextmanager
def from_config():
    """Errors raised inside name settings as flags: the `prefrl` command, and a learner built
    from a config (as `prefrl train` does)."""
    token = _FROM_CONFIG.set(True)
    try:
        yield
    finally:
        _FROM_CONFIG.reset(token)


_FLAG = re.compile(r"--([a-z][a-z0-9-]*)((?:\.[a-z][a-z0-9-]*)*)")


def python_arguments(names=None):
    """Decorates a function or method: the errors it raises name settings as the Python
    arguments they are (`steps=-5`), not as the command line's flags (`--steps=-5`) in which
    the checks, serving both, name them (flags stay within `from_config`). `names`: the
    arguments, as a dataclass (its fields: a learner's config) or names; None: the decorated
    function's own parameters. Flags that are none of them stay."""

    def decorate(function):
        if names is None:
            known = set(inspect.signature(function).parameters)
        elif dataclasses.is_dataclass(names):
            known = {f.name for f in dataclasses.fields(names)}
        else:
            known = set(names)

        def python_name(flag: re.Match) -> str:
            name = flag.group(1).replace("-", "_")
            return name + flag.group(2).replace("-", "_") if name in known else flag.group(0)

        @functools.wraps(function)
        def checked(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except (ValueError, TypeError, LookupError, OSError) as e:
                if _FROM_CONFIG.get():
                    raise
                e.args = tuple(_FLAG.sub(python_name, a) if isinstance(a, str) else a
                               for a in e.args)  # fmt: skip
                raise

        return checked

    return decorate
