"""Text from worker and check output: every terminal control sequence out, sizes bounded."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopkit import text

ESC = "\x1b"
BEL = "\x07"
ST = ESC + "\\"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # CSI: colours, cursor moves, erasing the screen, private modes
        (f"{ESC}[1;32mok{ESC}[0m", "ok"),
        (f"a{ESC}[2J{ESC}[H{ESC}[?1049hb", "ab"),
        (f"{ESC}[38;5;196mred", "red"),
        # OSC ended by BEL or by ST: window titles, clipboard writes, hyperlinks
        (f"{ESC}]0;owned{BEL}title", "title"),
        (f"{ESC}]52;c;cm0gLXJmIH4={ST}paste", "paste"),
        (f"{ESC}]8;;https://evil.example{ST}link{ESC}]8;;{ST}", "link"),
        # DCS, SOS, PM, APC strings
        (f"{ESC}P1$r0m{ST}dcs", "dcs"),
        (f"{ESC}Xsos{ST}{ESC}^pm{ST}{ESC}_apc{ST}x", "x"),
        # single-character and nF escape sequences
        (f"{ESC}7saved{ESC}8{ESC}c{ESC}(B{ESC}=", "saved"),
        # C1 controls, alone and as 8-bit CSI / OSC / DCS
        ("\x9b31mred\x9b0m", "red"),
        ("\x9d0;title\x07text", "text"),
        ("\x90q\x9cafter", "after"),
        ("a\x85b\x8dc", "abc"),
        # C0 controls other than tab and newline, and DEL
        ("a\rb\x08c\x00d\x7fe\x0bf\x0cg", "abcdefg"),
        ("keep\ttabs\nand lines", "keep\ttabs\nand lines"),
        # an unterminated string loses its introducer; the text stays readable
        (f"{ESC}]0;no end", "0;no end"),
        # a lone ESC at the end
        (f"end{ESC}", "end"),
        ("plain text, ünïcödé, emoji 🙂", "plain text, ünïcödé, emoji 🙂"),
    ],
)
def test_clean_removes_every_terminal_control_sequence(raw: str, shown: str) -> None:
    assert text.clean(raw) == shown


@given(st.text())
def test_clean_leaves_nothing_a_terminal_interprets(raw: str) -> None:
    out = text.clean(raw)
    assert all(c in "\t\n" or not (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F) for c in out)
    assert text.clean(out) == out


def test_bound_keeps_head_and_tail() -> None:
    long = "HEAD" + "x" * 10_000 + "TAIL"
    cut = text.bound(long, 300)
    assert len(cut) <= 300 and cut.startswith("HEAD") and cut.endswith("TAIL")
    assert "[... cut ...]" in cut
    assert text.bound("short", 300) == "short"


def test_clip_and_cut() -> None:
    assert text.clip("abcdef", 4) == "abc\u2026" and text.clip("abc", 4) == "abc"
    assert text.cut("short", 100) == "short"
    head = text.cut("line one\n" * 100, 120)
    assert len(head.encode()) <= 120 and head.endswith("[... cut ...]")
    tail = text.cut("line one\n" * 100, 120, keep="tail")
    assert len(tail.encode()) <= 120 and tail.startswith("[... cut ...]")


def test_tail_keeps_the_last_lines_cleaned() -> None:
    out = b"".join(b"\x1b[31mline %d\x1b[0m\r\n" % i for i in range(100))
    assert text.tail(out, lines=3, limit=4096) == "line 97\nline 98\nline 99"
    assert text.tail(b"50%\r100%\n\x1b]0;pwned\x07done", lines=5, limit=4096) == "50%\n100%\ndone"
    assert len(text.tail(b"x" * 10_000, lines=5, limit=100).encode()) <= 100


def test_file_tail(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a" * 5000 + b"END")
    assert text.file_tail(path, 10) == "aaaaaaaEND"
    assert text.file_tail(tmp_path / "missing") == ""


def test_clip_words_never_cuts_a_word_and_says_it_cut() -> None:
    from loopkit.text import clip_words

    reason = "budget exhausted (attempts) after attempt 3; the attempt itself called for replan"
    cut = clip_words(reason, 40)
    assert len(cut) <= 40 and cut.endswith("\u2026")
    assert reason.startswith(cut[:-1]) and reason[len(cut) - 1] in " ;,:"
    assert clip_words("short", 40) == "short"


def test_the_report_table_fits_the_terminal() -> None:
    from loopkit.views import report

    why = "no progress: the same failure fingerprint as the previous attempt, repeat 2; park"
    doc = {
        "records": 6,
        "problems": [],
        "tasks": [
            {
                "task_id": "fix-parser",
                "attempts": 3,
                "outcome": "failed",
                "cost_usd": 1.5,
                "cost_untrusted_usd": 0,
                "tokens": 1200,
                "wall_s": 80,
                "why": why,
            }
        ],
        "health": {
            "termination_reasons": {"failed": 1},
            "triggers": {"manual": 3},
            "runs_near_budget": {"threshold": 0.8, "runs": 0, "share": 0.0},
            "cost_per_completed_task": {"trusted_usd": None, "untrusted_usd": None},
            "p95_verify_attempts": 1,
            "tasks": 1,
            "runs": 3,
        },
    }
    table = report.text(doc, width=80).splitlines()
    assert all(len(line) <= 80 for line in table[:2]), table[:2]
    assert table[1].endswith("\u2026") and "repeat 2; park" not in table[1]
    wide = report.text(doc, width=200).splitlines()
    assert wide[1].endswith(why)


@given(st.text(alphabet=st.characters(max_codepoint=0x2100), max_size=40))
def test_clean_skips_the_pattern_only_where_it_could_match_nothing(s: str) -> None:
    # The shortcut (no character a control sequence starts with: returned as it is) gives
    # the pattern's own answer on any text.
    import re

    from loopkit import text

    assert text.clean(s) == re.compile(text._CONTROL_TEXT).sub("", s)
