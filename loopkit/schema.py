"""The published JSON Schemas: find, load, and validate against them.

Schemas ship inside the wheel as ``loopkit/schemas``; in a source checkout they are read
from the top-level ``schemas/`` folder. ``$ref`` resolves through a local registry:
nothing is ever fetched over the network. jsonschema is imported only when a document is
actually validated (it costs ~95 ms at start-up).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from loopkit import loader
from loopkit.errors import BadInput

BASE_URI = "https://loopkit.dev/schema/v1/"


@functools.cache
def schema_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "schemas", here.parent / "schemas"):
        if (candidate / "attempt.json").is_file():
            return candidate
    raise FileNotFoundError("loopkit's schemas are missing from this installation")


def names() -> list[str]:
    return sorted(p.stem for p in schema_dir().glob("*.json"))


@functools.cache
def load(name: str) -> dict[str, Any]:
    path = schema_dir() / f"{name}.json"
    if not path.is_file():
        raise KeyError(name)
    data: dict[str, Any] = loader.json_loads(path.read_bytes())
    return data


@functools.cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry: Registry[Any] = Registry().with_resources(
        (BASE_URI + f"{n}.json", Resource.from_contents(load(n))) for n in names()
    )
    return Draft202012Validator(load(name), registry=registry)


def json_path(parts: Any) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def errors(document: Any, name: str) -> list[tuple[str, str]]:
    """(JSON path, message) for every way ``document`` breaks schema ``name``."""
    v = _validator(name)
    found = sorted(v.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    return [(json_path(e.absolute_path), _message(e)) for e in found]


def _message(error: Any) -> str:
    msg = str(error.message)
    if len(msg) > 160:
        msg = msg[:157] + "..."
    return msg


def validate(document: Any, name: str, *, source: str = "<stdin>") -> None:
    """Raise BadInput (exit 3) naming the first place ``document`` breaks schema ``name``."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator(name).iter_errors(document))
    if error is not None:
        raise BadInput(
            source,
            f"expected {name} (schema {name}.json): {_message(error)}",
            path=json_path(error.absolute_path),
        )
