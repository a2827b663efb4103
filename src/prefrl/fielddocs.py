"""Config fields in `help()`: a field's description is the string right below it in the class
body (what `--help` and the docs site show); `help()` shows only the class docstring, so
`document_fields` appends the fields to it."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import re
import sys
from pathlib import Path


def document_fields(cls: type) -> type:
    """Class decorator, above `@dataclass`: appends an `Attributes:` section to `cls.__doc__`,
    every field with its type and description (`help()` shows the defaults in the signature).
    tyro's `--help` reads the section as the fields' help, the same text it reads from the
    source; the docs site (mkdocstrings) reads the source alone."""
    annotations, docs = field_sources(cls)
    lines = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        text = docs.get(field.name, "").replace("\n", "\n        ")
        lines.append(f"    {field.name} ({annotations.get(field.name, field.type)}): {text}")
    if lines:
        cls.__doc__ = "\n\n".join([inspect.cleandoc(cls.__doc__ or ""), "Attributes:"]) + "\n"
        cls.__doc__ += "\n".join(lines) + "\n"
    return cls


def field_sources(cls: type) -> tuple[dict[str, str], dict[str, str]]:
    """The annotation of each field as written, and its description (empty without source),
    from `cls` and the dataclasses it extends."""
    annotations, docs = {}, {}
    for klass in reversed(cls.__mro__):
        body = _class_body(getattr(sys.modules.get(klass.__module__), "__file__", None),
                           klass.__name__)  # fmt: skip
        for node, after in zip(body, [*body[1:], None]):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            annotations[node.target.id] = ast.unparse(node.annotation)
            value = getattr(after, "value", None)
            if isinstance(after, ast.Expr) and isinstance(value, ast.Constant):
                docs[node.target.id] = inspect.cleandoc(str(value.value))
    return annotations, docs


def _class_body(path: str | None, name: str) -> list[ast.stmt]:
    """The statements of the module-level class `name`, parsed on their own: a whole module
    would cost tens of milliseconds at import."""
    try:
        lines = _source_lines(path)
    except OSError:  # (no source shipped: help() shows the class docstring alone)
        return []
    start = next((i for i, line in enumerate(lines)
                  if re.match(rf"class {name}\b", line)), None)  # fmt: skip
    if start is None:
        return []
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip() and not lines[i][0].isspace()), len(lines))  # fmt: skip
    return ast.parse("".join(lines[start:end])).body[0].body


@functools.lru_cache(maxsize=4)  # (a module's configs are decorated one after another)
def _source_lines(path: str | None) -> list[str]:
    if path is None:
        raise OSError("no source file")
    return Path(path).read_text().splitlines(keepends=True)
