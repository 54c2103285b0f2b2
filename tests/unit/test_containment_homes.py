"""loopkit's private provider homes never lie in the temporary folder, where codex refuses
to lay out its helper binaries (and its edits then fail)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopkit.boundary import containment


@pytest.mark.parametrize(
    ("env", "where"),
    [
        ({"HOME": "/tmp/person"}, None),  # HOME under /tmp, TMPDIR unset
        ({"HOME": "/home/p", "XDG_CACHE_HOME": "/tmp/cache"}, None),
        ({"HOME": "{t}/home", "TMPDIR": "{t}"}, None),  # HOME under TMPDIR
        ({"HOME": "{t}/home", "XDG_CACHE_HOME": "{t}/c"}, "{t}/c/loopkit/homes"),  # not temp
    ],
)
def test_provider_homes_stay_out_of_the_temporary_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], where: str | None
) -> None:
    t = str(tmp_path)
    for name in ("HOME", "TMPDIR", "XDG_CACHE_HOME", "LOOPKIT_HOMES", "LOOPKIT_CLEANROOM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(t=t))
    if "TMPDIR" not in env and where is not None:
        monkeypatch.setenv("TMPDIR", "/nonexistent-temp")  # the tmp_path itself is not temp
    homes = containment.provider_homes()
    assert not containment.under_temp(homes), homes
    if where is not None:
        assert homes == Path(where.format(t=t))
