"""The model script format, turn counting and the rehearsal configuration (no processes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopkit.errors import BadInput
from loopkit.testing import rehearse, script
from loopkit.testing.server import assistant_turns, client_cwd

# -- valid scripts -------------------------------------------------------------------------


def test_a_list_serves_both_apis() -> None:
    s = script.from_data([{"text": "hi"}, "bye"])
    assert s.anthropic == s.openai
    assert [t.text for t in s.anthropic] == ["hi", "bye"]
    assert s.exhausted == "end"


def test_separate_scripts_per_api_and_aliases() -> None:
    s = script.from_data(
        {
            "claude": [{"tools": [{"name": "Write", "input": {"file_path": "/a", "content": ""}}]}],
            "codex": [{"tools": [{"name": "apply_patch", "input": "*** Begin Patch\n"}]}],
            "exhausted": "repeat_last",
        }
    )
    assert s.anthropic[0].tools[0].name == "Write"
    assert s.openai[0].tools[0].input == "*** Begin Patch\n"
    assert s.exhausted == "repeat_last"


def test_common_turns_fill_the_api_not_given() -> None:
    s = script.from_data({"turns": ["common"], "openai": ["codex only"]})
    assert [t.text for t in s.anthropic] == ["common"]
    assert [t.text for t in s.openai] == ["codex only"]


def test_faults_and_their_defaults() -> None:
    s = script.from_data(
        [
            {"fail": {"status": 529, "times": 2}, "text": "ok"},
            {"error": 429},
            {"cut": True, "text": "again"},
            {"cut": {"after": 3, "times": 2}, "text": "x", "delay": 0.5},
        ]
    )
    first, second, third, fourth = s.anthropic
    assert first.error is not None and (first.error.status, first.error.times) == (529, 2)
    assert second.error is not None and second.error.times is None  # never clears
    assert second.error.type is None  # the API's usual type is chosen when served
    assert third.cut == script.Cut(after=None, times=1)
    assert fourth.cut == script.Cut(after=3, times=2) and fourth.delay == 0.5


def test_headers_are_strings() -> None:
    s = script.from_data(
        [{"error": {"status": 429, "headers": {"x-should-retry": False, "retry-after": 2}}}]
    )
    err = s.anthropic[0].error
    assert err is not None and dict(err.headers) == {"x-should-retry": "false", "retry-after": "2"}


def test_sessions_give_each_conversation_its_script() -> None:
    s = script.from_data({"sessions": [["first"], {"anthropic": ["second"]}], "exhausted": "error"})
    assert [t.text for t in s.turns("anthropic", 0)] == ["first"]
    assert [t.text for t in s.turns("anthropic", 1)] == ["second"]
    assert [t.text for t in s.turns("anthropic", 7)] == ["second"]  # the last one serves the rest
    assert s.turns("openai", 1) == ()
    assert s.more[0].exhausted == "error"


def test_yaml_and_json_text(tmp_path: Path) -> None:
    y = tmp_path / "s.yaml"
    y.write_text("- text: hello\n- tools:\n    - {name: Bash, input: {command: ls}}\n")
    j = tmp_path / "s.json"
    j.write_text(
        json.dumps([{"text": "hello"}, {"tools": [{"name": "Bash", "input": {"command": "ls"}}]}])
    )
    assert script.load(y) == script.load(j)


# -- invalid scripts: one line naming the file, the JSON path, what was expected ------------

BAD: list[tuple[Any, str, str]] = [
    ({"turn": []}, "$.turn", "unknown key"),
    ("text", "$", "expected a list of turns or a mapping, got a string"),
    ([], "$", "expected at least one turn"),
    ({}, "$", "no turns"),
    ([{"tools": [{"input": {}}]}], "$[0].tools[0]", "needs a `name`"),
    ([{"tools": {"name": "x"}}], "$[0].tools", "expected a list of tool calls"),
    ([{"tools": [{"name": "x", "input": 3}]}], "$[0].tools[0].input", "expected a mapping"),
    ([{"text": 3}], "$[0].text", "expected a string, got a number"),
    ([{"error": {"status": 200}}], "$[0].error.status", "400..599"),
    ([{"error": {"message": "x"}}], "$[0].error", "needs a `status`"),
    ([{"error": {"status": 529, "times": 2}}], "$[0]", "needs `text` or `tools`"),
    ([{"error": {"status": 529, "times": 0}}], "$[0].error.times", ">= 1"),
    ([{"error": {"status": 529, "retry": 1}}], "$[0].error.retry", "unknown key"),
    ([{"error": 529, "fail": 529}], "$[0].fail", "not both"),
    ([{"cut": {"after": -1}, "text": "x"}], "$[0].cut.after", ">= 0"),
    ([{"delay": "soon", "text": "x"}], "$[0].delay", "seconds"),
    ([{"stop_reason": "end_turn"}], "$[0]", "needs `text`, `tools` or an `error`"),
    ([{"usage": {"input_tokens": -1}, "text": "x"}], "$[0].usage.input_tokens", ">= 0"),
    ({"turns": ["a"], "exhausted": "loop"}, "$.exhausted", "end, repeat_last, error"),
    ({"claude": ["a"], "anthropic": ["b"]}, "$.claude", "given twice"),
    ({"sessions": []}, "$.sessions", "non-empty list"),
    ({"sessions": [["a"]], "turns": ["b"]}, "$.turns", "inside `sessions`"),
    ({"sessions": [["a"], {"exhausted": "end"}]}, "$.sessions[1].exhausted", "unknown key"),
    ([{"error": {"status": 500, "in_stream": "yes"}}], "$[0].error.in_stream", "true or false"),
]


@pytest.mark.parametrize(("data", "path", "words"), BAD)
def test_bad_scripts_name_the_path(data: Any, path: str, words: str) -> None:
    with pytest.raises(BadInput) as info:
        script.from_data(data, source="loop-script.yaml")
    message = info.value.message
    assert message.startswith(f"loop-script.yaml: {path}: "), message
    assert words in message
    assert "\n" not in message


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("- text: [unclosed\n")
    with pytest.raises(BadInput, match=r"s\.yaml: not valid YAML or JSON at line"):
        script.load(p)


@pytest.mark.parametrize(
    ("text", "path", "words"),
    [
        ("- text: hi\n  delay: .nan\n", "$[0].delay", "not a finite number"),
        ("- text: hi\n  text: bye\n", "$[0].text", "duplicate key 'text' at line 2"),
        ('[{"text": "hi", "delay": Infinity}]', "$[0].delay", "expected seconds >= 0"),
    ],
)
def test_a_script_is_read_strictly(text: str, path: str, words: str) -> None:
    with pytest.raises(BadInput) as info:
        script.parse(text, source="s.yaml")
    assert info.value.message.startswith(f"s.yaml: {path}: "), info.value.message
    assert words in info.value.message


def test_missing_file() -> None:
    with pytest.raises(BadInput, match="cannot read the script"):
        script.load("/nonexistent/script.yaml")


# -- round trip ----------------------------------------------------------------------------

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
inputs = st.one_of(texts, st.dictionaries(st.sampled_from(["file_path", "content", "cmd"]), texts))
tool = st.fixed_dictionaries(
    {"name": st.sampled_from(["Write", "Bash", "apply_patch"]), "input": inputs}
)
error = st.fixed_dictionaries(
    {"status": st.sampled_from([400, 401, 429, 500, 529])},
    optional={
        "message": texts,
        "headers": st.dictionaries(st.sampled_from(["retry-after", "x-should-retry"]), texts),
        "in_stream": st.booleans(),
    },
)
turn = st.one_of(
    st.fixed_dictionaries(
        {"text": texts},
        optional={
            "tools": st.lists(tool, max_size=3),
            "cut": st.fixed_dictionaries(
                {}, optional={"after": st.integers(0, 9), "times": st.integers(1, 3)}
            ),
            "delay": st.floats(0, 5),
            "error": error.map(lambda e: {**e, "times": 2}),
        },
    ),
    st.fixed_dictionaries({"error": error}),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(turn, min_size=1, max_size=5), st.sampled_from(["end", "repeat_last", "error"]))
def test_to_data_round_trips(turns: list[dict[str, Any]], exhausted: str) -> None:
    s = script.from_data({"turns": turns, "exhausted": exhausted})
    assert script.from_data(script.to_data(s)) == s
    assert script.from_data(json.loads(script.dumps(s))) == s


# -- turn counting and the working directory -----------------------------------------------


def test_anthropic_turns_count_assistant_messages() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "system", "content": "mid-conversation note"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
            {"role": "user", "content": "resume: again"},
        ]
    }
    assert assistant_turns("anthropic", body) == 2
    assert assistant_turns("anthropic", {"messages": []}) == 0
    assert assistant_turns("anthropic", "not json") == 0


def test_openai_turns_count_runs_of_model_items() -> None:
    body = {
        "input": [
            {"type": "message", "role": "developer", "content": []},
            {"type": "message", "role": "user", "content": []},
            # turn 1: a message and a tool call in one response
            {"type": "message", "role": "assistant", "content": []},
            {"type": "custom_tool_call", "call_id": "a", "name": "apply_patch", "input": ""},
            {"type": "custom_tool_call_output", "call_id": "a", "output": ""},
            # turn 2: two parallel calls
            {"type": "function_call", "call_id": "b", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call", "call_id": "c", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "b", "output": ""},
            {"type": "function_call_output", "call_id": "c", "output": ""},
            # turn 3: the final answer, then a resumed prompt
            {"type": "reasoning", "summary": []},
            {"type": "message", "role": "assistant", "content": []},
            {"type": "message", "role": "user", "content": []},
        ]
    }
    assert assistant_turns("openai", body) == 3
    assert assistant_turns("openai", {"input": "a plain string"}) == 0


def test_client_cwd_from_either_prompt() -> None:
    codex = {
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "<environment_context>\n  <cwd>/tmp/r</cwd>\n"}
                ],
            }
        ]
    }
    claude = {
        "system": [
            {"type": "text", "text": "Env\n - Primary working directory: /tmp/c\n - Is git: yes"}
        ]
    }
    assert client_cwd(codex) == "/tmp/r"
    assert client_cwd(claude) == "/tmp/c"
    assert client_cwd({"messages": [{"role": "user", "content": "nothing"}]}) is None


# -- rehearsal configuration ---------------------------------------------------------------


def test_claude_env(tmp_path: Path) -> None:
    env = rehearse.claude_env("http://127.0.0.1:9/", tmp_path / "h", retries=1)
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["HOME"] == str(tmp_path / "h") and (tmp_path / "h").is_dir()
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "1"
    assert "CLAUDE_CODE_MAX_RETRIES" not in rehearse.claude_env("http://x", tmp_path / "h")


def test_codex_home_writes_a_provider(tmp_path: Path) -> None:
    tomllib = pytest.importorskip("tomllib")
    env = rehearse.codex_home("http://127.0.0.1:9", tmp_path / "c", retries=2, stream_retries=1)
    config = tomllib.loads((tmp_path / "c" / "config.toml").read_text())
    provider = config["model_providers"][config["model_provider"]]
    assert config["model"] == "gpt-5.5"
    assert provider["base_url"] == "http://127.0.0.1:9/v1"
    assert provider["wire_api"] == "responses"
    assert (provider["request_max_retries"], provider["stream_max_retries"]) == (2, 1)
    assert config["analytics"]["enabled"] is False and config["features"]["plugins"] is False
    assert env == {"CODEX_HOME": str(tmp_path / "c"), provider["env_key"]: rehearse.REHEARSAL_KEY}


def test_overlay_drops_routing_variables() -> None:
    base = {"PATH": "/bin", "ANTHROPIC_AUTH_TOKEN": "real", "OPENAI_BASE_URL": "elsewhere"}
    assert rehearse.overlay({"HOME": "/h"}, base=base) == {"PATH": "/bin", "HOME": "/h"}


# -- the published schema agrees with the loader -------------------------------------------

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize(
    ("valid", "path"),
    [
        (kind == "valid", p)
        for kind in ("valid", "invalid")
        for p in sorted((EXAMPLES / kind / "model-script").glob("*.json"))
    ],
    ids=lambda v: v.name if isinstance(v, Path) else str(v),
)
def test_schema_and_loader_agree(valid: bool, path: Path) -> None:
    from loopkit import schema

    data = json.loads(path.read_text())
    assert (schema.errors(data, "model-script") == []) is valid
    if valid:
        script.from_data(data, source=path.name)
    else:
        with pytest.raises(BadInput):
            script.from_data(data, source=path.name)
