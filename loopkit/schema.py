"""The published JSON Schemas: find, load, and validate against them.

Schemas ship inside the wheel as ``loopkit/schemas``; in a source checkout they are read
from the top-level ``schemas/`` folder. ``$ref`` resolves through a local registry:
nothing is ever fetched over the network.

Validation has two halves. ``is_valid`` answers yes or no with validators compiled here
from the schemas (closures over the keywords our schemas use: a few milliseconds, no
import); only a document it refuses -- or a schema using a keyword it does not know --
goes to jsonschema, for the message that names the first fault (jsonschema and its
registry cost ~120 ms to import: more than a whole command's own work). A test holds the
two to the same answers on every example document and on generated ones.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from loopkit import loader, shipped
from loopkit.errors import BadInput
from loopkit.text import pattern

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any

    from loopkit.sections import JSONObject

BASE_URI = "https://loopkit.dev/schema/v1/"


@functools.cache
def schema_dir() -> Path:
    return shipped(
        "schemas", "attempt.json", "loopkit's schemas are missing from this installation"
    )


def names() -> list[str]:
    return sorted(p.stem for p in schema_dir().glob("*.json"))


@functools.cache
def load(name: str) -> JSONObject:
    path = schema_dir() / f"{name}.json"
    if not path.is_file():
        raise KeyError(name)
    data: JSONObject = loader.json_loads(path.read_bytes())
    return data


@functools.cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry: Registry[Any] = Registry().with_resources(
        (BASE_URI + f"{n}.json", Resource.from_contents(load(n))) for n in names()
    )
    return Draft202012Validator(load(name), registry=registry)


# --- the compiled validators: yes or no, fast -------------------------------------------

if TYPE_CHECKING:
    Check = Callable[[Any], bool]

#: Keywords that assert nothing (``format`` is an annotation in 2020-12 unless a format
#: checker is asked for, and loopkit never asks).
_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "$defs", "title", "description", "examples", "default"}
    | {"deprecated", "readOnly", "writeOnly", "format"}
)


class _Unsupported(Exception):
    """A keyword these validators do not implement: jsonschema answers instead."""


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_TYPES: dict[str, Check] = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "number": _is_number,
    # 2020-12: 1.0 is an integer too; a bool is neither.
    "integer": lambda x: (
        (isinstance(x, int) and not isinstance(x, bool))
        or (isinstance(x, float) and x.is_integer())
    ),
}


def _equal(a: Any, b: Any) -> bool:
    """JSON equality as jsonschema has it: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_equal, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return bool(a == b)


class _Compiler:
    """Turns the schemas into checks, one closure per keyword. A ``$ref`` is compiled
    where it is first followed (so recursive definitions compile, and a document that
    has only a task never loads or compiles the schemas of the sections it lacks); one
    that cannot be raises ``_Unsupported`` there, and ``is_valid`` asks jsonschema.
    ``eager``: every ``$ref`` compiled at once (a test's way to see that all compile)."""

    def __init__(self, *, eager: bool = False) -> None:
        self.eager = eager
        self.done: dict[tuple[str, str], Check] = {}
        #: The schema files a check has been compiled from so far.
        self.followed: set[str] = set()

    def ref(self, base: str, ref: str) -> Check:
        uri, _, pointer = ref.partition("#")
        uri = BASE_URI + uri if uri and "://" not in uri else (uri or base)
        key = (uri, pointer)
        if key not in self.done:
            cell: list[Check] = []

            def check(x: Any) -> bool:
                if not cell:
                    cell.append(self.compile(self._node(uri, pointer), uri))
                return cell[0](x)

            self.done[key] = check
            if self.eager:
                cell.append(self.compile(self._node(uri, pointer), uri))
        return self.done[key]

    def _node(self, uri: str, pointer: str) -> Any:
        name = uri[len(BASE_URI) : -len(".json")] if uri.startswith(BASE_URI) else ""
        if not name or "/" in name or not uri.endswith(".json"):
            raise _Unsupported(f"$ref {uri}")
        self.followed.add(uri)
        try:
            node: Any = load(name)
            for part in filter(None, pointer.split("/")):
                part = part.replace("~1", "/").replace("~0", "~")
                node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError):
            raise _Unsupported(f"$ref {uri}#{pointer}") from None
        return node

    def compile(self, node: Any, base: str) -> Check:
        if node is True or node == {}:
            return _always
        if node is False:
            return _never
        if not isinstance(node, dict):
            raise _Unsupported(repr(node))
        checks = [self.keyword(key, value, node, base) for key, value in node.items()]
        found = [c for c in checks if c is not None]
        if len(found) == 1:
            return found[0]
        return _all_of(found)

    def keyword(self, key: str, value: Any, node: JSONObject, base: str) -> Check | None:
        """The check one keyword of ``node`` makes (None: it asserts nothing)."""
        if key in _ANNOTATIONS or key in ("then", "else"):
            return None
        if key == "type":
            return _typed([_TYPES[k] for k in ([value] if isinstance(value, str) else value)])
        if key == "enum":
            return lambda x: any(_equal(x, e) for e in value)
        if key == "const":
            return lambda x: _equal(x, value)
        if key in _BOUNDS:
            applies, holds = _BOUNDS[key]
            return lambda x: not applies(x) or holds(x, value)
        if key == "pattern":  # compiled where first matched: most documents lack most fields
            return lambda x: not isinstance(x, str) or pattern(value).search(x) is not None
        if key == "items":
            item = self.compile(value, base)
            return lambda x: not isinstance(x, list) or all(map(item, x))
        if key == "required":
            names = tuple(value)
            return lambda x: not isinstance(x, dict) or all(k in x for k in names)
        if key == "properties":
            props = [(k, self.compile(sub, base)) for k, sub in value.items()]
            return lambda x: not isinstance(x, dict) or all(c(x[k]) for k, c in props if k in x)
        if key == "additionalProperties":
            if "patternProperties" in node:
                raise _Unsupported("patternProperties")
            known = frozenset(node.get("properties", ()))
            extra = self.compile(value, base)
            return lambda x: (
                not isinstance(x, dict) or all(extra(v) for n, v in x.items() if n not in known)
            )
        if key in ("anyOf", "allOf", "oneOf"):
            subs = [self.compile(sub, base) for sub in value]
            if key == "anyOf":
                return lambda x: any(c(x) for c in subs)
            if key == "allOf":
                return _all_of(subs)
            return lambda x: sum(1 for c in subs if c(x)) == 1
        if key == "not":
            sub = self.compile(value, base)
            return lambda x: not sub(x)
        if key == "if":
            cond = self.compile(value, base)
            then = self.compile(node.get("then", True), base)
            other = self.compile(node.get("else", True), base)
            return lambda x: then(x) if cond(x) else other(x)
        if key == "$ref":
            return self.ref(base, value)
        raise _Unsupported(key)


def _always(x: Any) -> bool:
    return True


def _never(x: Any) -> bool:
    return False


def _typed(tests: list[Check]) -> Check:
    return lambda x: any(t(x) for t in tests)


def _all_of(checks: list[Check]) -> Check:
    found = tuple(checks)
    return lambda x: all(c(x) for c in found)


#: keyword -> (the instances it applies to, whether it holds for one and the keyword's value)
_BOUNDS: dict[str, tuple[Check, Callable[[Any, Any], bool]]] = {
    "minimum": (_is_number, lambda x, v: bool(x >= v)),
    "maximum": (_is_number, lambda x, v: bool(x <= v)),
    "exclusiveMinimum": (_is_number, lambda x, v: bool(x > v)),
    "exclusiveMaximum": (_is_number, lambda x, v: bool(x < v)),
    "minLength": (lambda x: isinstance(x, str), lambda x, v: len(x) >= v),
    "maxLength": (lambda x: isinstance(x, str), lambda x, v: len(x) <= v),
    "minItems": (lambda x: isinstance(x, list), lambda x, v: len(x) >= v),
    "maxItems": (lambda x: isinstance(x, list), lambda x, v: len(x) <= v),
    "minProperties": (lambda x: isinstance(x, dict), lambda x, v: len(x) >= v),
    "maxProperties": (lambda x: isinstance(x, dict), lambda x, v: len(x) <= v),
}


@functools.cache
def _compiled(name: str) -> Check | None:
    """The compiled check for schema ``name``; None when it uses a keyword not compiled."""
    try:
        return _Compiler().ref(BASE_URI + f"{name}.json", "")
    except _Unsupported:
        return None


def is_valid(document: Any, name: str) -> bool:
    """Does ``document`` hold to schema ``name``? The same answer as jsonschema's."""
    check = _compiled(name)
    if check is not None:
        try:
            return check(document)
        except _Unsupported:
            pass  # a part of the schema met only now, that these checks cannot make
    return bool(_validator(name).is_valid(document))


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
    if is_valid(document, name):
        return  # jsonschema is asked only for the message a refused document gets
    from jsonschema.exceptions import best_match

    error = best_match(_validator(name).iter_errors(document))
    if error is not None:
        raise BadInput(
            source,
            f"expected {name} (schema {name}.json): {_message(error)}",
            path=json_path(error.absolute_path),
        )
