"""The attempt document: read it from stdin, start a new one, write it to stdout.

Every command reads stdin only when it is a pipe or a file (never a terminal), validates
what it reads, adds its own section and prints the whole document as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping

from loopkit import SCHEMA_VERSION, loader, timing
from loopkit.errors import BadInput

TYPE_CHECKING = False  # typing stays unloaded at run time (start-up is a feature)
if TYPE_CHECKING:
    from typing import IO, Any

    from loopkit.sections import Attempt, JSONObject

ATTEMPT_KIND = "loopkit/attempt"
#: Set to 1 to validate every document a command prints (tests set it).
VALIDATE_OUTPUT_ENV = "LOOPKIT_VALIDATE_OUTPUT"
MAX_STDIN_BYTES = 64 * 1024 * 1024
#: The attempt document's sections; each may also be printed (and piped on) alone.
SECTIONS = ("task", "run", "diff", "verify", "judge", "decision")


def new_attempt(**sections: Any) -> Attempt:
    doc = {"kind": ATTEMPT_KIND, "version": SCHEMA_VERSION}
    doc.update({k: v for k, v in sections.items() if v is not None})
    attempt: Attempt = vouched(doc)
    return attempt


def vouched(value: object) -> Any:
    """``value`` as the typed document (loopkit.sections) its schema check, or loopkit
    building it, vouches it is: where open JSON becomes a typed attempt or section."""
    return value


def section(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """A section printed on its own: its fields plus kind and version."""
    return {"kind": f"loopkit/{kind}", "version": SCHEMA_VERSION, **body}


def attach(
    document: Attempt | JSONObject | None,
    name: str,
    body: Mapping[str, Any],
    *,
    attempt_id: str | None = None,
) -> Attempt | JSONObject:
    """What a command prints once its work is done: the piped attempt ``document`` with
    its section ``name`` set to ``body``, or -- nothing piped -- the section alone
    (``kind: loopkit/<name>``) carrying ``attempt_id`` so the next command of a pipe
    stays in the same attempt. The one way every command adds its section; the stage's
    timing is appended to the document's ``timings`` with it (loopkit.timing)."""
    if name not in SECTIONS:
        raise ValueError(f"no section {name!r}")
    if document is not None:
        sections: JSONObject = vouched(document)  # the section is named at run time
        sections[name] = dict(body)
        if name != "decision":  # lk-decide's entry goes into its ledger record (controller)
            timing.add(document, name, body)
        return document
    alone = dict(body)
    if attempt_id is not None:
        alone.setdefault("attempt_id", attempt_id)
    return section(name, alone)


def stdin_has_data(stream: IO[str] | None = None) -> bool:
    stream = stream if stream is not None else sys.stdin
    if stream is None or stream.closed:
        return False
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return False


def read_attempt(stream: IO[str] | None = None, *, source: str = "<stdin>") -> Attempt | None:
    """The piped attempt document, validated; None when nothing is piped (or it is empty).
    A stream marked ``checked`` (``lk attempt`` hands each stage the document the stage
    before it printed, from one it validated itself) is parsed, not validated again."""
    stream = stream if stream is not None else sys.stdin
    if not stdin_has_data(stream):
        return None
    try:
        raw = stream.read(MAX_STDIN_BYTES + 1)
    except UnicodeDecodeError as e:  # a text stdin fed binary bytes
        raise BadInput(
            source, f"not UTF-8 (byte {e.start}): expected a JSON attempt document"
        ) from None
    if len(raw) > MAX_STDIN_BYTES:
        raise BadInput(source, f"more than {MAX_STDIN_BYTES} bytes: expected one attempt document")
    doc = parse_attempt(raw, source=source, checked=bool(getattr(stream, "checked", False)))
    attempt: Attempt | None = vouched(doc)
    return attempt


def parse_attempt(
    raw: str | bytes, *, source: str = "<stdin>", checked: bool = False
) -> dict[str, Any] | None:
    """``raw`` as an attempt document, validated (see ``read_attempt``), as open JSON:
    ``read_attempt`` (or ``vouched``) types it."""
    if isinstance(raw, bytes):
        raw = loader.decoded(
            raw, source, "a JSON attempt document", not_utf8="not UTF-8 (byte {}): expected {}"
        )
    if not raw.strip():
        return None
    if "\x00" in raw:
        raise BadInput(source, "binary data: expected a JSON attempt document")
    try:
        doc: object = loader.json_loads(raw)
    except loader.LoadError as e:
        raise BadInput(source, str(e), path=e.path) from None
    if not isinstance(doc, dict):
        raise BadInput(
            source,
            f"expected a JSON object (the attempt document), got {type(doc).__name__}",
            path="$",
        )
    name = str(doc.get("kind", "")).removeprefix("loopkit/")
    if name in SECTIONS and doc.get("version") == SCHEMA_VERSION:
        # A section a command printed alone (`lk-invoke | lk-diff | ...` without lk-plan):
        # the pipe goes on with an attempt document holding that section.
        body = {k: v for k, v in doc.items() if k not in ("kind", "version")}
        doc = {"kind": ATTEMPT_KIND, "version": SCHEMA_VERSION, name: body}
        for key in ("attempt_id", "started_at"):  # the attempt's own, kept for the next command
            if key in body:
                doc[key] = body[key]
    if doc.get("kind") != ATTEMPT_KIND:
        raise BadInput(
            source, f"expected kind {ATTEMPT_KIND!r}, got {doc.get('kind')!r}", path="$.kind"
        )
    if not checked:
        from loopkit import schema

        schema.validate(doc, "attempt", source=source)
    return doc


def dumps(document: Mapping[str, Any]) -> str:
    # allow_nan=False: NaN and Infinity are not JSON; a reader in another language fails
    # on them, and loopkit refuses them on input (loopkit.loader).
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def emit(
    document: Mapping[str, Any], *, schema_name: str | None = None, stream: IO[str] | None = None
) -> None:
    """Write one document as one line of JSON on stdout (validated when the switch is on)."""
    out = stream if stream is not None else sys.stdout
    out.write(dumps(_outgoing(document, schema_name)) + "\n")
    out.flush()


def handed(document: Mapping[str, Any]) -> dict[str, Any]:
    """What ``emit`` would print, as a value: the document checked as emit checks it, its
    secrets redacted, copied into plain JSON values (lists, string keys) -- what the next
    stage of one ``lk attempt`` takes, as it would have read the printed line."""
    plain: dict[str, Any] = _plain(_outgoing(document, None))
    return plain


def _outgoing(document: Mapping[str, Any], schema_name: str | None) -> Any:
    if os.environ.get(VALIDATE_OUTPUT_ENV) == "1":
        from loopkit import schema

        name = schema_name or str(document.get("kind", "")).removeprefix("loopkit/")
        try:
            schema.validate(document, name, source="<output>")
        except BadInput as e:  # our own output is wrong: a bug, not the user's input
            raise RuntimeError(f"output fails its schema: {e}") from None
    from loopkit.boundary.secrets import scrub

    return scrub(document)


def _plain(value: Any) -> Any:
    """``value`` as JSON would give it back: a copy sharing nothing with it."""
    if isinstance(value, str) or value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, dict):
        return {k if isinstance(k, str) else _key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        json.dumps(value, allow_nan=False)  # NaN and Infinity refused, as dumps refuses them
        return value
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _key(key: object) -> str:
    """A key that is not text, as JSON writes it."""
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return json.dumps(key, allow_nan=False)  # NaN and Infinity refused
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
