"""One workspace: every command and recipe agrees on the contract, the task scope, the state
folder and what a glob means. Real git repositories, the installed commands."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.recipes import BIN, Project, fail_message, make_project, recipe_env

pytestmark = pytest.mark.slow


def lk(project: Project, *args: str, stdin: str = "", env: dict[str, str] | None = None):
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=project.root,
        input=stdin,
        capture_output=True,
        text=True,
        env=recipe_env(env),
        timeout=60,
    )


# --------------------------------------------------------------------------- the scope bypass

EDIT_B = """
Path("src").mkdir(exist_ok=True)
Path("src/a.py").write_text("A = 1\\n")
Path("src/b.py").write_text("B = 'not this task'\\n")
"""

TASKS = """\
# Tasks
- [ ] Fix a {#fix-a}
  budget: 10 lines / 2 files
  scope: src/a.py
  end
"""


def test_a_task_scoped_to_one_file_cannot_commit_another_with_contract_and_tasks(
    tmp_path: Path,
) -> None:
    """The documented flags together: lk-plan next > next.json; loop.sh --contract loop.yaml
    --tasks TASKS.md next.json. The worker edits src/b.py for a task scoped to src/a.py."""
    p = make_project(
        tmp_path,
        EDIT_B,
        tasks=TASKS,
        writable=["src/**"],
        checks=[{"name": "a", "run": "test -f src/a.py", "timeout": 30}],
    )
    nxt = lk(p, "lk-plan", "next", "TASKS.md", "--contract", "loop.yaml")
    assert nxt.returncode == 0, nxt.stderr
    start = p.scratch / "next.json"
    start.write_text(nxt.stdout)
    before = p.head()
    proc = p.run("loop.sh", "--contract", "loop.yaml", "--tasks", "TASKS.md", str(start))
    assert proc.returncode in (20, 21, 22), fail_message(proc)
    assert p.head() != before or "src/b.py" not in p.files()
    assert "src/b.py" not in p.files()  # never committed
    assert "[ ] Fix a" not in p.task_line("fix-a") or "parked" in p.task_line("fix-a")
    assert "[x]" not in p.task_line("fix-a")
    diffs = p.docs("fix-a", "diff")
    assert diffs and any(
        v["path"] == "src/b.py" and v["rule"] == "outside_writable"
        for v in diffs[-1]["diff"]["violations"]
    )


# --------------------------------------------------------------------------- the state folder

CHECK_STATE = 'test -d "$LOOPKIT_STATE_DIR" || true'


def test_a_contracts_state_dir_is_where_every_command_and_the_loop_keep_state(
    tmp_path: Path,
) -> None:
    p = make_project(
        tmp_path,
        """
Path("src").mkdir(exist_ok=True)
Path("src/value.txt").write_text("good\\n")
""",
        state_dir="var/lk",
    )
    p.git("add", "-A")
    cancel = lk(p, "lk", "cancel", "--reason", "stop before anything runs")
    assert cancel.returncode == 0, cancel.stderr
    assert (p.root / "var/lk/cancel.json").is_file()
    proc = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "t", "--task", "Value")
    assert proc.returncode == 30, fail_message(proc)  # the loop saw the cancellation
    assert not (p.root / ".loopkit").exists()
    assert (p.root / "var/lk/runs/t").is_dir()
    exclude = (p.root / ".git/info/exclude").read_text()
    assert "/var/lk/" in exclude and "/.loopkit/" not in exclude
    lk(p, "lk", "cancel", "--clear")
    proc = p.run("loop.sh", "--contract", "loop.yaml", "--task-id", "t", "--task", "Value")
    assert proc.returncode == 0, fail_message(proc)
    assert (p.root / "var/lk/ledger.jsonl").is_file()
    assert not (p.root / ".loopkit").exists()
    verify = lk(p, "lk-verify")
    assert verify.returncode == 0, verify.stderr
    assert not (p.root / ".loopkit").exists()


# --------------------------------------------------------------------------- the table

CONTRACT_A = {"writable": ["src/**"], "state_dir": None, "check": "echo contract-a"}
CONTRACT_B = {"writable": ["lib/**"], "state_dir": "var/b", "check": "echo contract-b"}


def _contract(spec: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 1,
        "objective": "o",
        "scope": {"writable": spec["writable"]},
        "criteria": [{"name": "which", "run": spec["check"], "timeout": 30}],
        "worker": {"provider": "command", "command": "true"},
    }
    if spec["state_dir"]:
        data["state_dir"] = spec["state_dir"]
    return data


@pytest.mark.parametrize(
    ("flag", "piped", "file", "env"),
    list(itertools.product([False, True], [None, "doc", "doc+task"], [False, True], [False, True])),
)
def test_every_command_gives_the_same_answers(
    tmp_path: Path, flag: bool, piped: str | None, file: bool, env: bool
) -> None:
    """flags x piped document x contract file x environment: lk workspace, lk-diff,
    lk-verify and lk-decide --admit see the same contract, scope and state folder."""
    p = make_project(tmp_path, "pass\n", writable=["**"])
    (p.root / "loop.yaml").unlink()
    (p.root / "MEMORY.md").unlink()
    p.git("add", "-A")
    p.git("commit", "-qm", "no default contract")
    if file:
        (p.root / "loop.yaml").write_text(json.dumps(_contract(CONTRACT_A)))
        p.git("add", "-A")
        p.git("commit", "-qm", "a default contract")
    (p.scratch / "b.json").write_text(json.dumps(_contract(CONTRACT_B)))
    args = ["--contract", str(p.scratch / "b.json")] if flag else []
    doc: dict[str, Any] | None = None
    if piped:
        doc = {"kind": "loopkit/attempt", "version": 1, "contract": _contract(CONTRACT_A)}
        if piped == "doc+task":
            doc["task"] = {"id": "t", "text": "t", "kind": "task", "scope": ["src/only.py"]}
    extra = {"LOOPKIT_STATE_DIR": str(tmp_path / "elsewhere")} if env else {}
    stdin = json.dumps(doc) if doc else ""

    # What the rule says.
    if flag:
        want = CONTRACT_B
    elif piped or file:
        want = CONTRACT_A
    else:
        want = None
    if env:
        state = tmp_path / "elsewhere"
    elif want and want["state_dir"]:
        state = p.root / want["state_dir"]
    else:
        state = p.root / ".loopkit"
    scope = ["src/only.py"] if piped == "doc+task" else (want or {}).get("writable")

    ws = lk(p, "lk", "workspace", "--json", *args, stdin=stdin, env=extra)
    assert ws.returncode == 0, ws.stderr
    answer = json.loads(ws.stdout)
    assert Path(answer["state_dir"]) == state
    assert (answer["scope"] or {}).get("writable") == scope

    # lk-diff enforces that scope: a change to lib/x.py is in scope only under contract B.
    (p.root / "lib").mkdir(exist_ok=True)
    (p.root / "lib/x.py").write_text("x\n")
    diff = lk(p, "lk-diff", *args, stdin=stdin, env=extra)
    out = json.loads(diff.stdout.splitlines()[-1])
    body = out.get("diff", out)
    if scope is None:
        assert diff.returncode == 0
    else:
        assert (diff.returncode == 0) == (scope == ["lib/**"]), (scope, body["violations"])

    if want is None:
        verify = lk(p, "lk-verify", *args, stdin=stdin, env=extra)
        assert verify.returncode == 3 and "no contract" in verify.stderr
        return
    verify = lk(p, "lk-verify", *args, stdin=stdin, env=extra)
    assert verify.returncode == 0, verify.stderr
    vout = json.loads(verify.stdout.splitlines()[-1])
    vbody = vout.get("verify", vout)
    assert vbody["checks"][0]["output_tail"] == want["check"].split()[-1]
    log = p.root / vbody["checks"][0]["log"]
    assert state in log.resolve().parents or log.resolve().is_relative_to(state.resolve())

    admit = lk(
        p,
        "lk-decide",
        "--admit",
        *args,
        stdin=stdin
        or json.dumps(
            {
                "kind": "loopkit/attempt",
                "version": 1,
                "task": {"id": "t", "text": "t", "kind": "task"},
            }
        ),
        env=extra,
    )
    assert admit.returncode == 0, admit.stderr
    assert (state / "ledger.jsonl").is_file() or (state / "ledger").exists() or any(state.iterdir())


def test_lk_workspace_loads_neither_click_nor_process_machinery(tmp_path: Path) -> None:
    # The recipes ask `lk workspace` once per loop before anything else: the console
    # script answers it without click, and finding the repository and the state folder
    # reads files, so it loads no subprocess (nor ctypes); its modules import typing only
    # for the type checker, and hold no dataclass. Run as installed: `lk` itself.
    import os
    import sys

    p = make_project(tmp_path, "print('unused')")
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sys\n"  # not runpy: it loads typing itself
        "import atexit\natexit.register(sys.stdout.flush)\n"  # an exit handler: door.leave exits normally
        f"sys.argv = [{str(BIN / 'lk')!r}, *sys.argv[1:]]\n"
        "source = open(sys.argv[0]).read()\n"
        "try:\n    exec(compile(source, sys.argv[0], 'exec'), {'__name__': '__main__'})\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "loaded = [m for m in ('click', 'subprocess', 'loopkit.proc', 'ctypes', 'typing',"
        " 'dataclasses') if m in sys.modules]\n"
        "print(f'EXIT={code} LOADED=' + ','.join(loaded))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LOOPKIT_VALIDATE_OUTPUT"}

    def probed(*args: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, str(probe), *args], cwd=p.root, capture_output=True, text=True,
            env=env, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        return out.stdout.strip().splitlines()

    lines = probed("workspace", "--contract", "loop.yaml")
    assert lines[-1] == "EXIT=0 LOADED=", lines
    assert f"root={p.root}" in lines and f"state_dir={p.root / '.loopkit'}" in lines
    assert probed("workspace", "--contract=loop.yaml", "--json")[-1] == "EXIT=0 LOADED="
    # What the door does not know goes to click, which parses (or refuses) it.
    assert probed("workspace", "--contract")[-1].startswith("EXIT=2 LOADED=click")
    assert probed("workspace", "--help")[-1].startswith("EXIT=0 LOADED=click")
    # An error still gets its one line and its code, without click.
    assert probed("workspace", "--contract", "nope.yaml")[-1] == "EXIT=3 LOADED="


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["workspace"], {}),
        (["workspace", "--json"], {"as_json": True}),
        (["workspace", "--contract", "c.yaml", "--json"], {"contract": "c.yaml", "as_json": True}),
        (["workspace", "--json", "--contract=c.yaml"], {"contract": "c.yaml", "as_json": True}),
        (["workspace", "--contract"], None),
        (["workspace", "--contract", "--json"], None),
        (["workspace", "--contract="], None),
        (["workspace", "--json=yes"], None),
        (["workspace", "--contract", "a", "--contract", "b"], None),
        (["workspace", "-h"], None),
        (["workspace", "--jso"], None),
        (["workspace", "extra"], None),
        (
            ["attempt", "--keep", "p/1", "--shell", "--base", "abc"],
            {"keep": "p/1", "as_shell": True, "base": "abc"},
        ),
        (
            ["attempt", "--resume=s1", "--contract", "c.yaml"],
            {"resume": "s1", "contract_path": "c.yaml"},
        ),
        (["attempt", "--json"], None),  # workspace's flag, not attempt's
        (["attempt", "--shell=1"], None),
        (["attempt", "--keep"], None),
        (["attempt", "--help"], None),
        (
            ["verify", "--only", "a", "--only=b", "--fail-fast", "--contract", "c.yaml"],
            {"only": ("a", "b"), "fail_fast": True, "contract_path": "c.yaml"},
        ),
        (["verify", "--in-place", "--summary"], {"clean_room": False, "summary": True}),
        (["verify", "--clean-room"], {"clean_room": True}),
        (["verify", "--clean-room", "--in-place"], None),  # click lets the last win
        (["verify", "--summary", "--summary"], None),
        (["verify", "--only"], None),
        (["verify", "-h"], None),
        (["verify"], {}),
        (["diff", "--base", "HEAD~1"], {"base": "HEAD~1"}),
        (["diff", "--base", "-x"], None),  # a value that looks like an option: click's
        (["diff", "--base=-x"], {"base": "-x"}),
        (["decide", "--admit", "--trigger", "schedule"], {"admit": True, "trigger": "schedule"}),
        (["decide", "--trigger", "cron"], None),  # not one of its choices: click refuses it
        (
            ["decide", "--interrupted", "t", "--reason", "gone"],
            {"interrupted": "t", "reason": "gone"},
        ),
        (
            ["invoke", "-q", "--timeout", "2.5", "--provider", "command"],
            {"quiet": True, "timeout": 2.5, "provider": "command"},
        ),
        (["invoke", "--timeout", "0"], None),
        (["invoke", "--timeout", "nan"], None),
        (["invoke", "--timeout", "soon"], None),
        (["invoke", "--provider", "gpt"], None),
        (["invoke", "-q", "--quiet"], None),
        (
            ["judge", "--goal", "be good", "--provider=claude"],
            {"goal": "be good", "provider": "claude"},
        ),
        (["plan", "next"], None),
        ([], None),
    ],
)
def test_the_door_takes_only_plain_calls(args: list[str], want: object) -> None:
    from loopkit.cli.door import plain_args

    found = plain_args(args)
    assert (found[1] if found is not None else None) == want
    if found is not None:
        assert found[0] == args[0]


@pytest.mark.parametrize("name", ["attempt", "verify", "diff", "decide", "invoke", "judge"])
def test_the_doors_options_are_the_click_commands_and_reach_the_same_arguments(name: str) -> None:
    # The door reads a plain call without click: its table must name every option the
    # click command has, under the keyword the stage's function takes.
    import importlib
    import inspect

    import click

    from loopkit import stages
    from loopkit.cli import door, transactions

    command = importlib.import_module(f"loopkit.cli.{name}").main
    opts = set()
    for p in command.params:
        if isinstance(p, click.Option):
            opts |= {o for o in (*p.opts, *p.secondary_opts) if o not in ("-h", "--help")}
    table = door.PLAIN[name]
    assert set(table) == opts, set(table) ^ opts
    run = transactions.attempt if name == "attempt" else getattr(stages, name)
    taken = set(inspect.signature(run).parameters)
    assert {spec[1] for spec in table.values()} <= taken
    for p in command.params:
        if isinstance(p, click.Option) and isinstance(p.type, click.Choice):
            (option,) = [o for o in p.opts if o.startswith("--")]
            allowed = table[option][2]
            from loopkit.worker import providers

            assert list(allowed if allowed is not None else providers.names()) == list(
                p.type.choices
            )
