"""Frozen config dataclasses <-> JSON-able dicts (the run's resolved config.json)."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

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
