"""The one strict loader for the JSON and YAML loopkit reads: documents, contracts, ledgers.

Strict means three things that Python's own readers let through:

- **Numbers are finite.** ``NaN``, ``Infinity``, ``-Infinity`` (JSON), ``.nan``, ``.inf``
  (YAML) and numbers too large for a float (``1e400``) are refused: a NaN timeout or
  budget compares false with everything, so it would silently disable its limit (and
  the JSON written from it would not be JSON for any other reader).
- **Keys are unique.** A mapping that names a key twice is refused: the reader would
  otherwise keep the last value without a word, and a reviewer reads the first.
- **Failures are ``LoadError``** (a ``ValueError``) naming what was wrong and where: the
  line and column, and for a refused number or key its JSON path. Nothing crashes:
  nesting too deep and integers too long for Python are load errors too.

The fast C parsers do the work; the checks cost a call per mapping and per float, and
the position of a refusal is found afterwards, on the error path only. Event streams of
worker CLIs, read line by line on a hot path, use ``scan_line``: it refuses non-finite
numbers but lets a repeated key pass (the vendors' streams are not files a person edits).
A file's bytes become text first through ``file_text`` (or ``decoded``): binary data, bytes
that are not UTF-8 and an empty or oversized file are ``BadInput`` naming what was expected.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

from loopkit.errors import BadInput

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import Any

#: YAML's resolved tags for floats and merge keys.
_YAML_FLOAT = "tag:yaml.org,2002:float"
_YAML_MERGE = "tag:yaml.org,2002:merge"
_CONSTANTS = ("NaN", "Infinity", "-Infinity")


class LoadError(ValueError):
    """Text that is not strict JSON or YAML; ``str()`` is the one-line message."""

    def __init__(
        self,
        problem: str,
        *,
        line: int | None = None,
        column: int | None = None,
        path: str | None = None,
    ) -> None:
        where = f" at line {line} column {column}" if line is not None else ""
        super().__init__(problem + where)
        self.problem = problem
        self.line = line
        self.column = column
        self.path = path


class _Refused(ValueError):
    """Raised inside the C parser by a hook; located and explained afterwards."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Refused("duplicate key")
    return out


def _constant(name: str) -> Any:
    raise _Refused(name)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(text)
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float)
_LINE_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float)


def json_loads(text: str | bytes) -> Any:
    """Parse one JSON text strictly (see the module's docstring)."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise LoadError(f"not UTF-8 (byte {e.start})") from None
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise LoadError(f"not JSON: {e.msg}", line=e.lineno, column=e.colno) from None
    except RecursionError:
        raise LoadError("not JSON: nested too deeply") from None
    except ValueError as e:  # a hook refused something, or an integer too long for int()
        raise _located(text) or LoadError(f"not JSON: {e}") from None


def decoded(
    raw: bytes,
    source: str,
    expected: str,
    *,
    not_utf8: str = "not UTF-8 text (byte {}): expected {}",
) -> str:
    """``raw`` as UTF-8 text; BadInput for binary data (a NUL byte) or bytes that are not
    UTF-8 (``not_utf8`` is formatted with the byte's offset and ``expected``)."""
    if b"\x00" in raw:
        raise BadInput(source, f"binary data: expected {expected}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(source, not_utf8.format(e.start, expected)) from None


def file_text(raw: bytes, source: str, expected: str, *, most: int, noun: str) -> str:
    """The text of a file read whole (``decoded``); BadInput too when it is over ``most``
    bytes (``noun`` names what it should be: "a contract") or holds nothing but blanks."""
    if len(raw) > most:
        raise BadInput(source, f"file is {len(raw)} bytes; {noun} is at most {most}")
    body = decoded(raw, source, expected)
    if not body.strip():
        raise BadInput(source, f"empty file: expected {expected}")
    return body


#: ``scan_line(text, start) -> (value, end)``: the JSON value at ``start``, read by the C
#: scanner called directly (no wrapper: it runs once per line of a worker's stream).
#: Raises ``StopIteration`` when there is no value there and ``ValueError`` when it is not
#: strict JSON, like ``json.JSONDecoder.scan_once``.
scan_line: Callable[[str, int], tuple[Any, int]] = _LINE_DECODER.scan_once  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- JSON: where


_TOKEN = re.compile(r'[ \t\n\r]*(?:("(?:[^"\\]|\\.)*")|([{}\[\]:,])|([^ \t\n\r{}\[\]:,"]+))', re.S)
#: Python's int() refuses decimal strings longer than this (sys.get_int_max_str_digits).
_MAX_DIGITS = 4300
_INTEGER = re.compile(r"-?[0-9]+")


def _located(text: str) -> LoadError | None:
    """The first refused number or repeated key in ``text``, with its line and JSON path.

    ``text`` is JSON apart from what the hooks refused, so a plain tokenizer reads it.
    """
    # One frame per open container: [is_object, keys seen, current key, index]
    stack: list[list[Any]] = []
    expect_key = False
    for m in _TOKEN.finditer(text):
        string, punct, word = m.group(1), m.group(2), m.group(3)
        at = m.start(1) if string else m.start(2) if punct else m.start(3)
        if punct in ("{", "["):
            stack.append([punct == "{", set(), None, 0])
            expect_key = punct == "{"
        elif punct in ("}", "]"):
            if stack:
                stack.pop()
            expect_key = False
        elif punct == ",":
            if stack:
                if stack[-1][0]:
                    expect_key = True
                else:
                    stack[-1][3] += 1
        elif punct == ":":
            expect_key = False
        elif string is not None and expect_key and stack:
            key = json.loads(string)
            frame = stack[-1]
            if key in frame[1]:
                frame[2] = key
                return _error(f"duplicate key {key!r}", text, at, stack)
            frame[1].add(key)
            frame[2] = key
        elif word is not None:
            problem = _bad_number(word)
            if problem:
                return _error(problem, text, at, stack)
    return None


def _bad_number(word: str) -> str | None:
    if word in _CONSTANTS:
        return f"{word} is not a number JSON allows (numbers must be finite)"
    if word in ("true", "false", "null"):
        return None
    if _INTEGER.fullmatch(word) and len(word.lstrip("-")) > _MAX_DIGITS:
        return f"an integer of {len(word.lstrip('-'))} digits is too long"
    try:
        value = float(word)
    except ValueError:
        return None
    if not math.isfinite(value):
        return f"{word[:40]} is too large for a number (numbers must be finite)"
    return None


def _error(problem: str, text: str, at: int, stack: list[list[Any]]) -> LoadError:
    line = text.count("\n", 0, at) + 1
    column = at - text.rfind("\n", 0, at)
    path = "$"
    for is_object, _, key, index in stack:
        if is_object:
            path += f".{key}" if key is not None else ""
        else:
            path += f"[{index}]"
    return LoadError(problem, line=line, column=column, path=path)


# --------------------------------------------------------------------------- YAML


def yaml_load(text: str) -> Any:
    """Parse one YAML document strictly, with the C loader when PyYAML has it.

    The C parser composes the node tree; ``_check_nodes`` walks it before anything is
    constructed, so the checks cost no speed where a document is fine.
    """
    import yaml  # lazy: ~24 ms

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(loader, node)
        return loader.construct_document(node)
    except LoadError:
        raise
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e.context or str(e).splitlines()[0]
        if mark is None:
            raise LoadError(f"not YAML: {problem}") from None
        raise LoadError(
            f"not YAML: {problem}", line=mark.line + 1, column=mark.column + 1
        ) from None
    except yaml.YAMLError as e:
        raise LoadError(f"not YAML: {str(e).splitlines()[0] if str(e) else 'unreadable'}") from None
    except RecursionError:
        raise LoadError("not YAML: nested too deeply") from None
    except ValueError as e:  # an integer too long for int(), say
        raise LoadError(f"not YAML: {str(e).split(';')[0]}") from None
    finally:
        loader.dispose()


def _check_nodes(loader: Any, root: Any) -> None:
    """Refuse repeated keys and non-finite floats, naming the line and the JSON path.

    Walks the node tree (with an explicit stack: nesting depth is the document's) before
    anything is constructed; a node shared through an alias is checked once.
    """
    seen: set[int] = set()
    stack: list[tuple[Any, str]] = [(root, "$")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.id == "mapping":  # the node classes' own names: yaml stays unloaded here
            keys: set[Any] = set()
            for key_node, value_node in node.value:
                if key_node.tag == _YAML_MERGE:
                    stack.append((value_node, path))
                    continue
                key: Any = None
                if key_node.id == "scalar":
                    key = loader.construct_object(key_node)
                    try:
                        repeated = key in keys
                        keys.add(key)
                    except TypeError:  # an unhashable key: PyYAML reports it itself
                        repeated = False
                    if repeated:
                        raise _marked(f"duplicate key {key!r}", key_node, f"{path}.{key}")
                stack.append((key_node, path))
                stack.append((value_node, f"{path}.{key}" if key is not None else path))
        elif node.id == "sequence":
            for i, item in reversed(list(enumerate(node.value))):
                stack.append((item, f"{path}[{i}]"))
        elif node.tag == _YAML_FLOAT:
            value = loader.construct_object(node)
            if isinstance(value, float) and not math.isfinite(value):
                raise _marked(
                    f"{node.value!r} is not a finite number (.nan and .inf are refused)",
                    node,
                    path,
                )


def _marked(problem: str, node: Any, path: str) -> LoadError:
    mark = node.start_mark
    return LoadError(problem, line=mark.line + 1, column=mark.column + 1, path=path)
