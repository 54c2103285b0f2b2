"""Parse the header block of a message: ``Name: value`` lines, ended by a blank line."""

from __future__ import annotations


def parse_headers(text: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in text.splitlines():
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()
    return headers
