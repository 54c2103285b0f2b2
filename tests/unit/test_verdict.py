"""Verdict parsing: the last VERDICT line decides; anything else is NOT_MET."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loopkit.judge import verdict
from loopkit.judge.verdict import MET, NOT_MET

SETTINGS = settings(max_examples=200, deadline=None)

# Prose that never mentions a verdict (the word may appear, the colon form may not).
prose_line = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
    ),
    max_size=60,
).filter(lambda s: not verdict.is_candidate(s))
prose = st.lists(prose_line, max_size=8).map("\n".join)

value = st.sampled_from([MET, NOT_MET])
spelling = {MET: ["MET", "met", "Met"], NOT_MET: ["NOT MET", "NOT_MET", "not met", "NOT  MET"]}


@st.composite
def verdict_line(draw: st.DrawFn, said: str | None = None) -> tuple[str, str]:
    """A well-formed verdict line in one of the shapes a model writes it."""
    said = said or draw(value)
    word = draw(st.sampled_from(spelling[said]))
    key = draw(st.sampled_from(["VERDICT", "Verdict", "verdict"]))
    shape = draw(
        st.sampled_from(
            [
                "{k}: {v}",
                "{k}:{v}",
                "**{k}: {v}**",
                "**{k}:** {v}",
                "{k}: **{v}**",
                "`{k}: {v}`",
                "## {k}: {v}",
                "> {k}: {v}",
                "- {k}: {v}",
                "  {k}: {v}.",
            ]
        )
    )
    return shape.format(k=key, v=word), said


# Lines that mention a verdict but do not state one exactly.
malformed_line = st.one_of(
    st.sampled_from(
        [
            "VERDICT:",
            "VERDICT: ",
            "VERDICT: MAYBE",
            "VERDICT: MET, mostly",
            "VERDICT: MET except the tests",
            "VERDICT: NOT",
            "VERDICT: NOT M",
            "VERDICT: ME",
            "VERDICT: PARTIALLY MET",
            "VERDICT: MET?",
            "My verdict: fine",
            "I will end with VERDICT: MET or VERDICT: NOT MET",
            "The final VERDICT: MET",
            "VERDICT: MET MET",
            "VERDICT: UNMET",
        ]
    ),
    st.builds(lambda a, b: f"{a}VERDICT:{b}", prose_line, prose_line).filter(
        lambda s: verdict.value_of(s) is None
    ),
)


def test_plain_verdicts() -> None:
    assert verdict.parse("Read docs/api.md.\nVERDICT: MET").verdict == MET
    assert verdict.parse("VERDICT: NOT MET\n- the route is missing").verdict == NOT_MET
    r = verdict.parse("looked.\nVERDICT: MET\nThe route is documented in docs/api.md.")
    assert r.verdict == MET
    assert r.said == MET
    assert r.line == "VERDICT: MET"
    assert r.reason is None
    assert "documented in docs/api.md" in r.reasons
    assert "VERDICT" not in r.reasons


@pytest.mark.parametrize("text", [None, "", "   \n\n", "All good, done.", "VERDICT MET"])
def test_no_line_is_not_met(text: str | None) -> None:
    r = verdict.parse(text)
    assert r.verdict == NOT_MET
    assert r.said is None
    assert r.reason == verdict.NO_VERDICT


@given(prose)
@SETTINGS
def test_text_without_a_verdict_line_is_not_met(text: str) -> None:
    r = verdict.parse(text)
    assert r.verdict == NOT_MET
    assert r.reason == verdict.NO_VERDICT
    assert r.line is None


@given(prose, st.lists(verdict_line(), max_size=4), verdict_line(), prose)
@SETTINGS
@example("", [("VERDICT: MET", MET)], ("VERDICT: NOT MET", NOT_MET), "")
@example("", [("VERDICT: NOT MET", NOT_MET)], ("VERDICT: MET", MET), "")
def test_the_last_line_wins(
    before: str, earlier: list[tuple[str, str]], last: tuple[str, str], after: str
) -> None:
    lines = [before, *(line for line, _ in earlier), last[0], after]
    r = verdict.parse("\n".join(lines))
    assert r.verdict == last[1]
    assert r.said == last[1]
    assert r.line == last[0].strip()


@given(prose, st.lists(verdict_line(), max_size=4), malformed_line, prose)
@SETTINGS
def test_a_malformed_last_line_is_not_met_whatever_came_before(
    before: str, earlier: list[tuple[str, str]], last: str, after: str
) -> None:
    text = "\n".join([before, *(line for line, _ in earlier), last, after])
    r = verdict.parse(text)
    assert r.verdict == NOT_MET
    assert r.said is None
    assert r.reason == verdict.MALFORMED


@given(st.text(max_size=400))
@SETTINGS
@example("VERDICT: MET\nreasons\nverdict: met")
@example("VERDICT: MET\r\nok")
def test_any_text_without_a_final_well_formed_line_is_not_met(text: str) -> None:
    """The oracle: find the last line mentioning 'verdict:'; MET only if it says exactly MET."""
    candidates = [
        line for line in text.splitlines() if re.search(r"verdict\s*:", line, re.IGNORECASE)
    ]
    r = verdict.parse(text)
    if not candidates:
        assert r.verdict == NOT_MET
        return
    last = candidates[-1].replace("*", "").replace("`", "").strip(" \t>#-+.!")
    body = re.sub(r"\s*:\s*", ": ", re.sub(r"\s+", " ", last)).upper()
    if r.verdict == MET:
        assert body == "VERDICT: MET"
    if candidates[-1] in ("VERDICT: MET", "**VERDICT: MET**", "VERDICT: MET."):
        assert r.verdict == MET


@given(prose, verdict_line(said=MET), prose, st.data())
@SETTINGS
def test_a_cut_reply_never_turns_not_met_into_met(
    before: str, met_line: tuple[str, str], middle: str, data: st.DataObject
) -> None:
    """Cut a reply that changed its mind (MET, then NOT MET) anywhere inside the last line."""
    final = "VERDICT: NOT MET"
    text = "\n".join([before, met_line[0], middle, final])
    start = len(text) - len(final)
    cut = data.draw(st.integers(min_value=start + len("VERDICT:"), max_value=len(text)))
    assert verdict.parse(text[:cut]).verdict == NOT_MET


@given(verdict_line())
@SETTINGS
def test_value_of_reads_each_shape(line_said: tuple[str, str]) -> None:
    line, said = line_said
    assert verdict.value_of(line) == said
