"""The model APIs the meter speaks: where a provider's CLI finds its key and base URL
(``Api``, declared once per provider), the real endpoint and key of one run
(``Upstream``), each dialect's endpoints and the request headers forwarded, where the
real key goes, and what a refusal looks like in the API's own shape. Used by the
providers (without loading the proxy) and by the meter (``loopkit.boundary.meter``)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from loopkit.values import record, replaced

#: The dialects the meter speaks: where the real key goes, how a refusal looks.
DIALECTS = ("anthropic", "openai", "gemini")
#: Request headers that may carry a credential: never forwarded as they came.
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
#: The only request headers forwarded (the APIs' own, and what a body needs); any other
#: header a client sends stays at the meter.
FORWARDED_HEADERS = frozenset(
    (
        "accept",
        "content-type",
        "content-encoding",
        "user-agent",
        "anthropic-version",
        "anthropic-beta",
        "openai-beta",
        "x-goog-api-client",
        "x-app",
        "x-claude-code-session-id",
        "session_id",
        "conversation_id",
        "originator",
    )
)
_MODEL = r"[A-Za-z0-9][A-Za-z0-9._@-]*"
#: Each dialect's endpoints (method, path under the upstream's prefix; the version
#: segment is the prefix's own when the base URL ends in it, as opencode's and codex's
#: do): nothing else is forwarded, not even to the same host.
ENDPOINTS: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "anthropic": (
        ("POST", re.compile(r"(/v1)?/messages(/count_tokens)?")),
        ("GET", re.compile(rf"(/v1)?/models(/{_MODEL})?")),
    ),
    "openai": (
        ("POST", re.compile(r"(/v1)?/(responses|chat/completions)")),
        ("GET", re.compile(rf"(/v1)?/models(/{_MODEL})?")),
    ),
    "gemini": (
        (
            "POST",
            re.compile(
                rf"/v1(beta|alpha)?/models/{_MODEL}:"
                r"(generateContent|streamGenerateContent|countTokens)"
            ),
        ),
        ("GET", re.compile(rf"/v1(beta|alpha)?/models(/{_MODEL})?")),
    ),
}


@record
class Api:
    """Where a provider's CLI finds its model API: the variables that hold the key (the
    first set one is used), the variable that holds the base URL, the dialect, and the
    vendor's own endpoint when no base URL is set (its domain is where the price table's
    prices hold). Declared once per provider (``Provider.api``); a new provider adds one
    line. ``bearer_vars``: the key variables whose key the API takes as
    ``Authorization: Bearer`` (an Anthropic key otherwise goes in ``x-api-key``)."""

    dialect: str
    key_vars: tuple[str, ...]
    base_url_var: str | None
    default_upstream: str
    bearer_vars: tuple[str, ...] = ("ANTHROPIC_AUTH_TOKEN",)

    def __post_init__(self) -> None:
        if self.dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {self.dialect!r}")

    def with_keys(self, *more: str) -> Api:
        """This API, its key also looked for in ``more`` (a CLI's own variable names)."""
        return replaced(self, key_vars=(*self.key_vars, *more))

    @property
    def vendor_domain(self) -> str:
        """``anthropic.com`` for ``https://api.anthropic.com``: its hosts are the vendor's."""
        host = urlsplit(self.default_upstream).hostname or ""
        return ".".join(host.split(".")[-2:])


@record
class Upstream:
    """The real endpoint and key one run's meter forwards to (found outside the sandbox)."""

    url: str
    key: str
    key_var: str
    api: Api
    #: The CLI's own name for this endpoint in its config (codex's ``[model_providers.X]``),
    #: when the base URL lives there rather than in a variable.
    section: str | None = None

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")

    @property
    def dialect(self) -> str:
        return self.api.dialect


#: The APIs a command worker may hold a key for: naming the key's variable in
#: ``worker.env_allow`` meters it like a provider's (the command gets the token).
ANTHROPIC = Api(
    "anthropic", ("ANTHROPIC_API_KEY",), "ANTHROPIC_BASE_URL", "https://api.anthropic.com"
)
OPENAI = Api("openai", ("OPENAI_API_KEY",), "OPENAI_BASE_URL", "https://api.openai.com/v1")
GEMINI = Api(
    "gemini",
    ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "GOOGLE_GEMINI_BASE_URL",
    "https://generativelanguage.googleapis.com",
)
KNOWN_APIS = (ANTHROPIC, OPENAI, GEMINI)


def find_upstream(
    api: Api, environ: Mapping[str, str], *, url: str | None = None
) -> Upstream | None:
    """The upstream for ``api`` from ``environ`` (the person's), or None when no key is set.
    ``url`` (the contract's ``worker.upstream``) wins over the environment's base URL."""
    for var in api.key_vars:
        key = environ.get(var, "")
        if key.strip():
            base = url or (environ.get(api.base_url_var) if api.base_url_var else None)
            return Upstream(base or api.default_upstream, key, var, api)
    return None


def wanted(setting: Any, upstream: Upstream | None) -> bool:
    """Whether ``worker.meter`` (``on``, ``off``, ``auto``; YAML's true/false too) asks for
    the meter: ``auto`` (the default) meters whenever a key is there to hide."""
    if setting is False or setting == "off":
        return False
    return upstream is not None


def refusal(dialect: str, status: int, message: str) -> dict[str, Any]:
    """An error body in the dialect's own shape, so the CLI reports it as it would the
    vendor's."""
    if dialect == "anthropic":
        kind = "authentication_error" if status == 401 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": message}}
    if dialect == "gemini":
        state = "UNAUTHENTICATED" if status == 401 else "UNAVAILABLE"
        return {"error": {"code": status, "message": message, "status": state}}
    code = "invalid_api_key" if status == 401 else "upstream_error"
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def presented_token(headers: Any, query: str) -> str | None:
    """The credential the client sent, wherever its dialect puts it."""
    for name in ("x-api-key", "x-goog-api-key", "api-key"):
        v = headers.get(name)
        if v:
            return str(v).strip()
    auth = headers.get("authorization")
    if auth:
        scheme, _, value = str(auth).partition(" ")
        return value.strip() if scheme.lower() == "bearer" else str(auth).strip()
    if query:
        keys = parse_qs(query).get("key")
        if keys:
            return keys[0]
    return None


def endpoint(dialect: str, method: str, path: str, prefix: str) -> str | None:
    """None when ``method path`` is one of the dialect's API endpoints under the upstream's
    ``prefix``, else why not (the meter forwards nothing else, not even to the same host)."""
    if "%" in path or "\\" in path or posixpath.normpath(path) != path or "//" in path:
        return f"not the API: {method} {path[:200]}"
    rest = path[len(prefix) :] if path.startswith(prefix + "/") else None
    if rest is not None:
        for allowed, shape in ENDPOINTS[dialect]:
            if method == allowed and shape.fullmatch(rest):
                return None
    return f"not the API: {method} {path[:200]}"


def credential(upstream: Upstream) -> dict[str, str]:
    if upstream.dialect == "gemini":
        return {"x-goog-api-key": upstream.key}
    if upstream.dialect == "anthropic" and upstream.key_var not in upstream.api.bearer_vars:
        return {"x-api-key": upstream.key}
    return {"Authorization": f"Bearer {upstream.key}"}
