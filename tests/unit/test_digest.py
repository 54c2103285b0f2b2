"""loopkit.digest: one sha256, whichever implementation computes it."""

from __future__ import annotations

import hashlib

import pytest

from loopkit import digest


@pytest.mark.parametrize("n", [0, 1, 4096, digest.BIG - 1, digest.BIG, 3 * digest.BIG + 7])
def test_every_size_gives_hashlibs_digest_fed_at_once_or_in_blocks(n: int) -> None:
    data = bytes(range(256)) * (n // 256) + bytes(n % 256)
    want = hashlib.sha256(data).hexdigest()
    assert digest.sha256(data).hexdigest() == want
    streamed = digest.sha256(size=len(data))
    for i in range(0, len(data), 1 << 16):
        streamed.update(data[i : i + (1 << 16)])
    assert streamed.hexdigest() == want


def test_big_input_goes_to_openssl_and_small_to_the_builtin() -> None:
    # The built-in loads in a fraction of a millisecond, OpenSSL is ~6x faster on bulk.
    assert type(digest.sha256(b"x")).__module__ != "_hashlib"
    assert type(digest.sha256(size=digest.BIG)).__module__ == "_hashlib"
