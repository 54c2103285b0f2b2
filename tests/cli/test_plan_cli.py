"""lk-plan through click's CliRunner: exit codes, stdout validated against the schemas."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from loopkit import schema
from loopkit.cli.plan import main
from tests.helpers.plan import CONTRACT_YAML, TASKS_MD, chain, small, write

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "parser-project"


def run(*args: str, input: str | bytes | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input)


def one_json(result: Result, name: str) -> dict[str, Any]:
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    doc: dict[str, Any] = json.loads(lines[0])
    schema.validate(doc, name)
    return doc


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write(tmp_path, "loop.yaml", CONTRACT_YAML)
    write(tmp_path, "TASKS.md", TASKS_MD)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --------------------------------------------------------------------------- check


def test_check_valid_contract(project: Path) -> None:
    r = run("check", "loop.yaml")
    assert r.exit_code == 0, r.stderr
    doc = one_json(r, "problems")
    assert doc == {
        "kind": "loopkit/problems",
        "version": 1,
        "file": "loop.yaml",
        "type": "contract",
        "valid": True,
        "problems": [],
    }
    assert r.stderr == "lk-plan: loop.yaml: valid (contract)\n"


def test_check_invalid_contract_lists_every_problem(project: Path) -> None:
    write(
        project,
        "bad.yaml",
        "version: 1\nobjective: ''\nscope: {writable: ['../x']}\ncriteria: []\n"
        "budgets: {attempts: 0}\nworker: {provider: aider}\ncolour: blue\n",
    )
    r = run("check", "bad.yaml")
    assert r.exit_code == 1
    doc = one_json(r, "problems")
    assert doc["valid"] is False
    paths = [p["path"] for p in doc["problems"]]
    for expected in (
        "$.objective",
        "$.scope.writable[0]",
        "$.criteria",
        "$.budgets.attempts",
        "$.worker.provider",
        "$.colour",
    ):
        assert expected in paths
    assert len(r.stderr.splitlines()) == 1
    assert "invalid contract" in r.stderr and f"(and {len(paths) - 1} more)" in r.stderr


def test_check_tasks(project: Path) -> None:
    r = run("check", "TASKS.md", "--contract", "loop.yaml")
    assert r.exit_code == 0, r.stderr
    doc = one_json(r, "problems")
    assert doc["type"] == "tasks" and doc["valid"] is True
    assert [t["id"] for t in doc["tasks"]] == [
        "setup",
        "fix-blank-line-handling-in-parse-headers",
        "docs",
        "docs-ref",
        "docs-tutorial",
    ]
    assert [t["ready"] for t in doc["tasks"]] == [False, True, False, False, False]


def test_check_invalid_tasks_lists_every_problem_with_lines(project: Path) -> None:
    text = TASKS_MD + "- [ ] big one\n  budget: 900 lines / 3 files\n  scope: src/**\n"
    write(project, "TASKS.md", text)
    r = run("check", "TASKS.md")
    assert r.exit_code == 1
    doc = one_json(r, "problems")
    msgs = {(p["line"], p["task"], p["message"].split(":")[0]) for p in doc["problems"]}
    assert (25, "big-one", "truncated plan") in msgs
    assert any(p["message"].startswith("budget 900 lines") for p in doc["problems"])
    assert r.stderr.startswith("lk-plan: TASKS.md: invalid tasks: line ")


def test_check_contract_scope_against_tasks(project: Path) -> None:
    write(project, "TASKS.md", small("x", scope="lib/a.py"))
    (project / "loop.yaml").rename(project / "contract.yaml")
    r = run("check", "TASKS.md")
    assert r.exit_code == 0 and one_json(r, "problems")["contract"] is None
    r = run("check", "TASKS.md", "--contract", "contract.yaml")
    assert r.exit_code == 1
    doc = one_json(r, "problems")
    assert "outside the contract's writable scope" in doc["problems"][0]["message"]
    assert doc["contract"] == "contract.yaml"
    (project / "contract.yaml").rename(project / "loop.yaml")
    r = run("check", "TASKS.md")  # ./loop.yaml is used by default, as by next
    assert r.exit_code == 1 and one_json(r, "problems")["contract"] == "loop.yaml"


def test_check_detects_type_by_content_and_reads_stdin(project: Path) -> None:
    write(project, "plan.txt", TASKS_MD)
    shutil.copy(project / "loop.yaml", project / "contract")
    assert one_json(run("check", "plan.txt"), "problems")["type"] == "tasks"
    assert one_json(run("check", "contract"), "problems")["type"] == "contract"
    r = run("check", "-", input=TASKS_MD)
    assert r.exit_code == 0 and one_json(r, "problems")["file"] == "<stdin>"
    r = run("check", "-", "--type", "contract", input=CONTRACT_YAML)
    assert r.exit_code == 0 and one_json(r, "problems")["type"] == "contract"


# --------------------------------------------------------------------------- next


def test_next_prints_the_attempt_document(project: Path) -> None:
    r = run("next", "TASKS.md", "--contract", "loop.yaml")
    assert r.exit_code == 0, r.stderr
    doc = one_json(r, "attempt")
    assert doc["kind"] == "loopkit/attempt" and doc["version"] == 1
    task = doc["task"]
    assert task["id"] == "fix-blank-line-handling-in-parse-headers"
    assert task["depends"] == ["setup"]
    assert doc["contract"]["scope"]["writable"] == task["scope"]
    assert doc["contract"]["scope"]["protected"] == ["migrations/**"]
    assert doc["contract"]["budgets"]["changed_lines"] == 40
    assert doc["contract"]["budgets"]["changed_files"] == 2
    assert r.stderr == "lk-plan: next: fix-blank-line-handling-in-parse-headers (TASKS.md line 7)\n"


def test_next_uses_loop_yaml_by_default(project: Path) -> None:
    assert run("next", "TASKS.md").exit_code == 0


def test_next_after_marks_walks_the_slices_then_says_nothing_ready(project: Path) -> None:
    seen = []
    for _ in range(3):
        r = run("next", "TASKS.md")
        assert r.exit_code == 0
        task_id = one_json(r, "attempt")["task"]["id"]
        seen.append(task_id)
        assert run("mark", "TASKS.md", "--task", task_id, "--status", "done").exit_code == 0
    assert seen == ["fix-blank-line-handling-in-parse-headers", "docs-ref", "docs-tutorial"]
    r = run("next", "TASKS.md")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr == "lk-plan: nothing ready: all 4 tasks are done\n"


def test_parked_task_blocks_its_dependents(project: Path) -> None:
    r = run(
        "mark",
        "TASKS.md",
        "--task",
        "fix-blank-line-handling-in-parse-headers",
        "--status",
        "parked",
        "--reason",
        "same failure twice",
    )
    assert r.exit_code == 0, r.stderr
    r = run("next", "TASKS.md")
    assert r.exit_code == 1 and r.stdout == ""
    assert "1 parked (fix-blank-line-handling-in-parse-headers)" in r.stderr
    assert "docs-ref behind parked fix-blank-line-handling-in-parse-headers" in r.stderr
    assert len(r.stderr.splitlines()) == 1


def test_next_task_option(project: Path) -> None:
    r = run("next", "TASKS.md", "--task", "docs-ref")
    assert r.exit_code == 1
    assert (
        "docs-ref is not ready: it waits for fix-blank-line-handling-in-parse-headers" in r.stderr
    )
    r = run("next", "TASKS.md", "--task", "fix-blank-line-handling-in-parse-headers")
    assert r.exit_code == 0
    assert run("next", "TASKS.md", "--task", "nope").exit_code == 3


def test_next_refuses_an_invalid_plan(project: Path) -> None:
    write(project, "TASKS.md", TASKS_MD.rstrip("\n").rsplit("\n", 1)[0] + "\n")  # drop the last end
    r = run("next", "TASKS.md")
    assert r.exit_code == 3
    assert r.stdout == ""
    assert "invalid plan: line" in r.stderr and "truncated plan" in r.stderr
    assert "run lk-plan check TASKS.md" in r.stderr


def test_next_over_threshold_is_refused(project: Path) -> None:
    write(project, "TASKS.md", "- [ ] big\n  budget: 601 lines / 1 files\n  scope: src/**\n  end\n")
    r = run("next", "TASKS.md")
    assert r.exit_code == 3 and "over the split threshold" in r.stderr
    write(project, "loop.yaml", CONTRACT_YAML + "plan: {split_lines: 1000}\n")
    assert run("next", "TASKS.md").exit_code == 0


def test_next_goal_task(project: Path) -> None:
    write(project, "TASKS.md", "- [ ] GOAL: the docs read clearly {#docs}\n")
    doc = one_json(run("next", "TASKS.md"), "attempt")
    assert doc["task"]["kind"] == "goal" and doc["task"]["text"] == "the docs read clearly"
    assert doc["contract"]["scope"]["writable"] == ["src/**", "tests/**", "docs/**"]


# --------------------------------------------------------------------------- mark


def test_mark_rewrites_only_that_line(project: Path) -> None:
    before = (project / "TASKS.md").read_bytes()
    r = run("mark", "TASKS.md", "--task", "docs-ref", "--status", "done")
    assert r.exit_code == 0
    assert r.stdout == ""
    assert r.stderr == "lk-plan: marked docs-ref done (TASKS.md line 16)\n"
    after = (project / "TASKS.md").read_bytes()
    assert after == before.replace(b"  - [ ] Reference", b"  - [x] Reference")
    r = run("mark", "TASKS.md", "--task", "docs-ref", "--status", "done")
    assert r.exit_code == 0 and "already done" in r.stderr


def test_mark_errors(project: Path) -> None:
    r = run("mark", "TASKS.md", "--task", "ghost", "--status", "done")
    assert r.exit_code == 3 and "no task with id 'ghost'" in r.stderr
    r = run("mark", "TASKS.md", "--task", "setup", "--status", "finished")
    assert r.exit_code == 2
    r = run("mark", "missing.md", "--task", "setup", "--status", "done")
    assert r.exit_code == 3 and "no such file" in r.stderr


# --------------------------------------------------------------------------- guidance


def test_guidance_to_stdout(project: Path) -> None:
    r = run("guidance", "loop.yaml")
    assert r.exit_code == 0
    assert "## Objective" in r.stdout and "`pytest tests -q`" in r.stdout
    assert "200" not in r.stdout  # changed_lines budget stays out


def test_guidance_into_a_file_keeps_the_users_text(project: Path) -> None:
    write(project, "AGENTS.md", "# Mine\n\nKeep this.\n")
    assert run("guidance", "loop.yaml", "--output", "AGENTS.md").exit_code == 0
    first = (project / "AGENTS.md").read_text()
    assert first.startswith("# Mine\n\nKeep this.\n\n<!-- loopkit:guidance:begin")
    write(project, "loop.yaml", CONTRACT_YAML.replace("pytest tests -q", "pytest -x"))
    assert run("guidance", "loop.yaml", "-o", "AGENTS.md").exit_code == 0
    second = (project / "AGENTS.md").read_text()
    assert "pytest -x" in second and "pytest tests -q" not in second
    assert second.count("loopkit:guidance:begin") == 1 and second.startswith("# Mine\n")


def test_guidance_from_a_piped_attempt(project: Path) -> None:
    attempt = run("next", "TASKS.md").stdout
    r = run("guidance", input=attempt)
    assert r.exit_code == 0, r.stderr
    assert "## Your task: `fix-blank-line-handling-in-parse-headers`" in r.stdout
    assert "- `src/parser/headers.py`" in r.stdout
    assert "`docs/**`" not in r.stdout  # the task's scope replaced the contract's


def test_guidance_invalid_contract(project: Path) -> None:
    write(project, "bad.yaml", "version: 1\nobjective: x\n")
    r = run("guidance", "bad.yaml")
    assert r.exit_code == 3
    assert r.stdout == ""
    assert "bad.yaml: $.criteria" in r.stderr and len(r.stderr.splitlines()) == 1


# --------------------------------------------------------------------------- the example project


def test_example_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "p")
    monkeypatch.chdir(tmp_path / "p")
    assert run("check", "loop.yaml").exit_code == 0
    assert run("check", "TASKS.md", "--contract", "loop.yaml").exit_code == 0
    doc = one_json(run("next", "TASKS.md", "--contract", "loop.yaml"), "attempt")
    assert doc["task"]["id"] == "blank-line"
    assert doc["contract"]["scope"]["protected"] == ["loop.yaml", "TASKS.md"]
    assert run("mark", "TASKS.md", "--task", "blank-line", "--status", "done").exit_code == 0
    assert one_json(run("next", "TASKS.md"), "attempt")["task"]["id"] == "folded"


def test_help_texts(project: Path) -> None:
    r = run("--help")
    assert r.exit_code == 0
    for word in ("check", "next", "mark", "guidance", "Exit codes of lk-plan", "130 interrupted"):
        assert word in r.stdout
    for sub in ("check", "next", "mark", "guidance"):
        assert run(sub, "--help").exit_code == 0


def test_help_lists_each_subcommand_as_click_would_without_loading_one(project: Path) -> None:
    # `lk-plan --help` prints the list from the group's table; each line must be what click
    # prints for the loaded command (its help's first sentence, shortened to the width),
    # and none of the subcommands' code may load for it.
    import os
    import subprocess
    import sys

    import click

    from loopkit.cli.plan import COMMANDS

    ctx = click.Context(main)
    for name, (_, first) in COMMANDS.items():
        cmd = main.get_command(ctx, name)
        assert cmd is not None and cmd.name == name
        assert " ".join((cmd.help or "").partition("\n\n")[0].split()) == first, name
    for width in ("50", "80", "200"):
        shown = CliRunner().invoke(main, ["--help"], terminal_width=int(width))
        listed = shown.stdout.partition("Commands:\n")[2]
        for name, (_, first) in COMMANDS.items():
            limit = int(width) - 6 - max(map(len, COMMANDS))
            short = click.Command(name, help=first).get_short_help_str(limit)
            assert f"  {name.ljust(max(map(len, COMMANDS)))}  {short}\n" in listed, (width, name)

    code = (
        "import sys; from loopkit.cli.plan import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('loopkit.cli.plan_',"
        " 'loopkit.plan', 'loopkit.guidance', 'loopkit.contract', 'loopkit.workspace')))\n"
        "print('LOADED=' + ','.join(loaded))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPKIT_")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip().splitlines()[-1] == "LOADED=", out.stderr


def test_check_warns_when_a_writable_glob_covers_what_steers_the_loop(project: Path) -> None:
    write(project, "wide.yaml", CONTRACT_YAML.replace('writable: ["src/**"', 'writable: ["**"'))
    r = run("check", "wide.yaml")
    doc = one_json(r, "problems")
    assert r.exit_code == 0 and doc["valid"] is True
    messages = [w["message"] for w in doc["warnings"]]
    assert any("the contract file (wide.yaml)" in m for m in messages), messages
    assert any("TASKS.md" in m for m in messages)
    assert "warning" in r.stderr
    r = run("check", "loop.yaml")
    assert "warnings" not in one_json(r, "problems")


@pytest.mark.longest
@pytest.mark.parametrize("n", [1000, 5000])
def test_a_long_dependency_chain_is_a_plan_not_a_crash(project: Path, n: int) -> None:
    # RecursionError used to end check and next with exit 70 (an internal error).
    write(project, "TASKS.md", chain(n, backwards=True))
    checked = run("check", "TASKS.md")
    assert checked.exit_code == 0, checked.stderr
    assert len(one_json(checked, "problems")["tasks"]) == n
    nxt = run("next", "TASKS.md")
    assert nxt.exit_code == 0, nxt.stderr
    assert one_json(nxt, "attempt")["task"]["id"] == f"t{n - 1}"
    write(project, "TASKS.md", chain(n, backwards=True, parked=n - 1))
    blocked = run("next", "TASKS.md")
    assert blocked.exit_code == 1, blocked.stderr
    assert f"1 parked (t{n - 1})" in blocked.stderr


def test_next_in_a_repository_parses_a_yaml_contract_once(project: Path) -> None:
    # `lk-plan next` runs at every turn of a phased loop: in a repository the checked
    # contract is remembered in the git folder (keyed by its sha256), so the YAML parser is
    # not even imported from the second turn on; outside one, every turn parses it.
    import os
    import subprocess
    import sys

    code = (
        "import sys; from loopkit.cli.plan import main\n"
        "try:\n    main(['next', 'TASKS.md', '--contract', 'loop.yaml'])\n"
        "except SystemExit:\n    pass\n"
        "print('YAML=' + str('yaml' in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPKIT_")}

    def turn() -> tuple[str, str]:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        )
        return out.stdout.strip().splitlines()[-1], out.stderr

    assert turn()[0] == "YAML=True"  # not a repository: parsed
    assert turn()[0] == "YAML=True"
    subprocess.run(["git", "init", "-q"], check=True)
    first, said = turn()
    assert first == "YAML=True" and "lk-plan: next: " in said
    again, said_again = turn()
    assert again == "YAML=False", said_again
    assert said_again == said  # the same task, the same contract
    # An edited contract is a new key: parsed again (and its new rules apply).
    (project / "loop.yaml").write_text(CONTRACT_YAML + "\n# edited\n")
    assert turn()[0] == "YAML=True"


def test_next_loads_neither_marking_nor_file_writing(project: Path) -> None:
    # `lk-plan next` runs at every turn of a loop: it imports only what picking a task needs.
    import os
    import subprocess
    import sys

    code = (
        "import sys; from loopkit.cli.plan import main\n"
        "try:\n    main(['next', 'TASKS.md'])\nexcept SystemExit:\n    pass\n"
        "loaded = [m for m in ('loopkit.plan.marking', 'loopkit.files', 'tempfile')"
        " if m in sys.modules]\n"
        "print('LOADED=' + ','.join(loaded))"
    )
    env = {k: v for k, v in os.environ.items() if k != "LOOPKIT_VALIDATE_OUTPUT"}  # as run
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip().splitlines()[-1] == "LOADED=", out.stderr
    assert "lk-plan: next: " in out.stderr


def test_check_warns_when_a_criterions_program_is_not_on_path(project: Path) -> None:
    missing = CONTRACT_YAML.replace(
        "criteria:", "criteria:\n  - {name: tox, run: loopkit-no-such-tox -q}", 1
    )
    assert missing != CONTRACT_YAML
    write(project, "tox.yaml", missing)
    r = run("check", "tox.yaml")
    doc = one_json(r, "problems")
    assert r.exit_code == 0 and doc["valid"] is True  # valid: the program may come later
    assert {
        "path": "$.criteria[tox]",
        "message": "`loopkit-no-such-tox` is not on PATH: the check cannot run here "
        "(install it, or change the criterion's `run`)",
    } in doc["warnings"]
    assert "loopkit-no-such-tox" in r.stderr
