"""lk attempt: the whole pipe of one attempt in one process, each stage the published
command itself -- the same documents and the same verdict as the pipe of commands."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from loopkit import schema
from tests.helpers import git
from tests.helpers.evidence import lk_run, notes_project

STAGES = ("admit", "invoke", "diff", "verify", "decide")


def _kept(prefix: Path, stage: str) -> dict[str, Any]:
    doc = json.loads((prefix.parent / f"{prefix.name}-{stage}.json").read_text())
    schema.validate(doc, "attempt")
    return doc


def _pipe(repo: Path, doc: str) -> tuple[int, dict[str, Any]]:
    """The same attempt as the recipes used to run it: one command a stage."""
    code = 0
    for cmd in (
        ["lk-decide", "--admit"],
        ["lk-invoke"],
        ["lk-diff", "--base", "HEAD"],
        ["lk-verify"],
        ["lk-decide"],
    ):
        out = lk_run([*cmd, "--contract", "loop.yaml"], repo, doc)
        code, doc = out.returncode, out.stdout
    return code, json.loads(doc)


def _task(repo: Path) -> str:
    out = lk_run(["lk-plan", "next", "TASKS.md", "--contract", "loop.yaml"], repo)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_one_process_gives_the_pipes_documents_and_verdict(git_repo: Path, tmp_path: Path) -> None:
    notes_project(
        git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5
    )
    task = _task(git_repo)
    prefix = tmp_path / "runs" / "1"
    out = lk_run(
        ["lk", "attempt", "--contract", "loop.yaml", "--base", "HEAD", "--keep", str(prefix)],
        git_repo,
        task,
    )
    assert out.returncode == 0, out.stderr
    last = json.loads(out.stdout)
    assert last == _kept(prefix, "decide")
    for stage in STAGES:  # every stage kept its document and its stderr
        assert (prefix.parent / f"1-{stage}.err").is_file()
    assert "admitted attempt 1" in (prefix.parent / "1-admit.err").read_text()
    assert "complete" in (prefix.parent / "1-decide.err").read_text()
    assert "complete" in out.stderr  # and stderr was shown as it came, too
    # Each stage's document is the one before it with that stage's section added.
    assert "run" in _kept(prefix, "invoke") and "diff" not in _kept(prefix, "invoke")
    assert _kept(prefix, "diff")["run"] == _kept(prefix, "invoke")["run"]
    assert _kept(prefix, "verify")["diff"] == _kept(prefix, "diff")["diff"]
    assert last["verify"]["tree"] == last["diff"]["tree"]
    folders = [p.name for p in (git_repo / ".loopkit" / "artifacts").iterdir() if p.is_dir()]
    assert folders == [last["attempt_id"]]  # one attempt, one artifacts folder
    ours = last

    # The same task again, as a pipe of five commands, from the same start.
    git(git_repo, "clean", "-fdxq", "-e", ".loopkit")
    git(git_repo, "checkout", "-q", "--", ".")
    code, theirs = _pipe(git_repo, _task(git_repo))
    assert code == 0, theirs
    assert theirs["decision"]["outcome"] == ours["decision"]["outcome"] == "complete"
    assert theirs["verify"]["tree"] == ours["verify"]["tree"]
    assert theirs["diff"]["files"] == ours["diff"]["files"]
    assert theirs["verify"]["passed"] is ours["verify"]["passed"] is True


def test_a_red_attempt_exits_with_the_decision_and_keeps_every_stage(
    git_repo: Path, tmp_path: Path
) -> None:
    notes_project(git_repo, "echo nothing", wall_seconds=600, check_timeout=5)
    prefix = tmp_path / "1"
    out = lk_run(["lk", "attempt", "--contract", "loop.yaml", "--keep", str(prefix)], git_repo,
                 _task(git_repo))  # fmt: skip
    assert out.returncode == 10, out.stderr  # retry: the check failed
    decided = _kept(prefix, "decide")
    assert decided["decision"]["outcome"] == "retry"
    assert decided["verify"]["passed"] is False


def test_admission_refusing_runs_nothing_and_exits_with_its_code(
    git_repo: Path, tmp_path: Path
) -> None:
    # A spent budget: the worker must not start (no invoke document, no artifacts).
    notes_project(git_repo, "touch started; exit 1", wall_seconds=600, check_timeout=5)
    task = _task(git_repo)
    for n in range(1, 4):  # attempts: 3
        lk_run(["lk", "attempt", "--contract", "loop.yaml", "--keep", str(tmp_path / str(n))],
               git_repo, task)  # fmt: skip
    (git_repo / "started").unlink(missing_ok=True)
    prefix = tmp_path / "4"
    out = lk_run(
        ["lk", "attempt", "--contract", "loop.yaml", "--keep", str(prefix)], git_repo, task
    )
    assert out.returncode == 22, out.stderr
    assert json.loads(out.stdout)["decision"]["outcome"] == "budget_exhausted"
    assert _kept(prefix, "admit")["decision"]["outcome"] == "budget_exhausted"
    assert not (tmp_path / "4-invoke.json").exists()
    assert not (git_repo / "started").exists()


def test_a_stage_that_fails_stops_the_attempt_with_its_own_code(
    git_repo: Path, tmp_path: Path
) -> None:
    notes_project(
        git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5
    )
    prefix = tmp_path / "1"
    out = lk_run(
        [
            "lk",
            "attempt",
            "--contract",
            "loop.yaml",
            "--base",
            "no-such-ref",
            "--keep",
            str(prefix),
        ],
        git_repo,
        _task(git_repo),
    )
    assert out.returncode not in (0, 1, 10, 11, 20, 21, 22, 30), out.stderr
    assert "lk-diff failed with exit" in out.stderr
    assert not (tmp_path / "1-verify.json").exists()  # nothing after the failing stage
    assert (tmp_path / "1-diff.json").read_text() == ""  # it printed no document


def test_bad_input_is_one_line_and_exit_3(git_repo: Path) -> None:
    out = lk_run(["lk", "attempt"], git_repo, "not json")
    assert out.returncode == 3
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr


def test_nothing_on_stdin_is_a_usage_error(git_repo: Path) -> None:
    done = subprocess.run(
        [str(Path(__import__("sys").executable).parent / "lk"), "attempt"],
        cwd=git_repo, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "reads an attempt document" in done.stderr


def _task_fields(repo: Path, doc: Path) -> dict[str, str]:
    """The LK_DOC_* fields `lk task save --doc DOC --shell` gives a loop (make's reader)."""
    from tests.helpers.recipes import recipe_env

    script = (
        'lk task begin --task-id notes --owner $$ >/dev/null && lk task save --doc "$1" --shell'
    )
    done = subprocess.run(
        ["bash", "-c", script, "-", str(doc)], cwd=repo, capture_output=True, text=True,
        env=recipe_env(), check=True,
    )  # fmt: skip
    return _assignments(done.stdout)


def _assignments(text: str) -> dict[str, str]:
    done = subprocess.run(
        ["bash", "-c", 'eval "$1"; set | grep "^LK_DOC_[A-Z_]*="', "-", text],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    out = {}
    for line in done.stdout.splitlines():
        name, _, value = line.partition("=")
        out[name] = value
    return {k: v for k, v in out.items() if k != "LK_DOC_FILE"}


def test_the_shell_fields_are_the_ones_every_recipe_reads(git_repo: Path, tmp_path: Path) -> None:
    # loop.sh takes the decided document's fields from `lk attempt --shell`; loop.mk from
    # `lk task save --doc --shell` on the same document: one set of fields, two doors.
    notes_project(git_repo, "echo 'not yet'", wall_seconds=600, check_timeout=5)
    prefix = tmp_path / "1"
    out = lk_run(
        ["lk", "attempt", "--contract", "loop.yaml", "--keep", str(prefix), "--shell"],
        git_repo,
        _task(git_repo),
    )
    assert out.returncode == 10, out.stderr
    ours = _assignments(out.stdout)
    assert ours["LK_DOC_OUTCOME"] == "retry" and ours["LK_DOC_FAILING"] == "notes"
    assert ours["LK_DOC_TASK_ID"] == "notes" and ours["LK_DOC_TREE"]
    decided = tmp_path / "1-decide.json"
    assert _task_fields(git_repo, decided) == ours


def test_an_attempt_through_the_console_script_never_loads_click(
    git_repo: Path, tmp_path: Path
) -> None:
    # Every round of a recipe is one `lk attempt`: the console script answers it without
    # click (a tenth of an attempt's instructions); what the door does not know goes to
    # click.
    import os
    import sys

    notes_project(
        git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5
    )
    task = _task(git_repo)
    lk = Path(sys.executable).parent / "lk"
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import runpy, sys\n"
        "import atexit\natexit.register(sys.stdout.flush)\n"  # an exit handler: door.leave exits normally
        f"sys.argv = [{str(lk)!r}, *sys.argv[1:]]\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit as e:\n"
        "    code = e.code\n"
        "sys.stderr.write(f'EXIT={code} CLICK={\"click\" in sys.modules}\\n')\n"
        "sys.stderr.write(f'DATACLASSES={\"dataclasses\" in sys.modules}\\n')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LOOPKIT_VALIDATE_OUTPUT"}

    def probed(*args: str, stdin: str = task) -> tuple[str, str]:
        done = subprocess.run(
            [sys.executable, str(probe), *args], cwd=git_repo, input=stdin, capture_output=True,
            text=True, env=env, check=False,
        )  # fmt: skip
        *_, last, classes = done.stderr.strip().splitlines()
        # The records on the attempt's path are plain classes (loopkit.values): importing
        # dataclasses (and inspect with it) was a sixth of an attempt's instructions.
        assert classes == "DATACLASSES=False" or "CLICK=True" in last, classes
        return last, done.stdout

    last, out = probed("attempt", "--contract", "loop.yaml", "--keep", str(tmp_path / "r" / "1"))
    assert last == "EXIT=0 CLICK=False", last
    assert json.loads(out)["decision"]["outcome"] == "complete"
    assert (tmp_path / "r" / "1-verify.json").is_file()
    last, out = probed("attempt", "--contract=loop.yaml", "--shell")
    assert last == "EXIT=0 CLICK=False", last
    assert "LK_DOC_OUTCOME=complete" in out
    # Nothing piped: one line and exit 2, still without click.
    assert probed("attempt", stdin="")[0] == "EXIT=2 CLICK=False"
    # What the door does not know goes to click, which parses (or refuses) it.
    assert probed("attempt", "--bogus")[0] == "EXIT=2 CLICK=True"
    assert probed("attempt", "--help")[0] == "EXIT=0 CLICK=True"


DOC_TASK = (
    '{"kind": "loopkit/attempt", "version": 1, "task": {"id": "t", "text": "x", "kind": "task"}}'
)


def _begun(repo: Path) -> dict[str, Any]:
    """A project whose worker writes notes/a.txt, and ``lk task begin`` of its next task,
    the lock held by this test's process."""
    import os

    notes_project(repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5)
    out = lk_run(
        ["lk", "task", "begin", "--contract", "loop.yaml", "--owner", str(os.getpid())],
        repo,
        _task(repo),
    )
    assert out.returncode == 0, out.stderr
    begun: dict[str, Any] = json.loads(out.stdout)
    return begun


def _settled(repo: Path, begun: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    """``lk attempt --settle`` of the begun task, for this test's process's lock."""
    import os

    args = ["lk", "attempt", "--contract", "loop.yaml", "--base", begun["diff_base"]]
    args += ["--settle", "--owner", str(os.getpid()), *extra]
    return lk_run(args, repo, Path(begun["start"]).read_text())


def test_settle_lands_in_the_same_process_and_releases_the_lock(git_repo: Path) -> None:
    # --settle takes the step the decision calls for: complete lands exactly the verified
    # tree and releases the loop's lock. Naive variants caught: a settle that prints only
    # the decision (nothing committed); one that keeps the lock (the next loop refused).
    out = _settled(git_repo, _begun(git_repo))
    assert out.returncode == 0, out.stderr
    decided, step = (json.loads(line) for line in out.stdout.splitlines())
    assert decided["decision"]["outcome"] == "complete"
    schema.validate(step, "task-step")
    assert step["step"] == "land" and step["released"] is True
    assert step["commit"] == git(git_repo, "rev-parse", "HEAD").strip()
    assert git(git_repo, "rev-parse", "HEAD^{tree}").strip() == decided["verify"]["tree"]
    assert not (git_repo / ".git" / "loopkit" / "loop.lock").exists()


def test_settle_refuses_a_landing_when_the_branch_moved_and_keeps_the_tree(
    git_repo: Path,
) -> None:
    # The branch moved after begin: the landing is refused (40), nothing is committed on
    # top of the stranger's commit, and the verified tree is saved under refs/loopkit/.
    begun = _begun(git_repo)
    git(git_repo, "commit", "-q", "--allow-empty", "-m", "someone else")
    moved = git(git_repo, "rev-parse", "HEAD").strip()
    out = _settled(git_repo, begun, "--shell")
    assert out.returncode == 40, out.stderr
    assert "LK_DOC_OUTCOME=complete" in out.stdout and "LK_REF=" in out.stdout
    assert git(git_repo, "rev-parse", "HEAD").strip() == moved
    assert git(git_repo, "for-each-ref", "refs/loopkit/").strip()


def test_owner_without_settle_is_a_usage_error(git_repo: Path) -> None:
    doc = '{"kind": "loopkit/attempt", "version": 1, "task": {"id": "t", "text": "x"}}'
    out = lk_run(["lk", "attempt", "--owner", "1"], git_repo, doc)
    assert out.returncode == 2 and "add --settle" in out.stderr and "Traceback" not in out.stderr


def test_begin_attempt_runs_round_1_in_the_same_process(git_repo: Path) -> None:
    # lk task begin --attempt: begin's result, the decided document and the landing, one
    # JSON line each; the round's documents kept as <run_dir>/1-*.json. Without a task it
    # is a usage error that begins nothing.
    import os

    notes_project(
        git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5
    )
    pid = str(os.getpid())
    bare = lk_run(["lk", "task", "begin", "--attempt", "--owner", pid], git_repo, "")
    assert bare.returncode == 2 and "needs the task" in bare.stderr
    assert not (git_repo / ".git" / "loopkit" / "loop.lock").exists()
    args = ["lk", "task", "begin", "--contract", "loop.yaml", "--owner", pid, "--attempt"]
    out = lk_run(args, git_repo, _task(git_repo))
    assert out.returncode == 0, out.stderr
    begun, decided, landed = (json.loads(line) for line in out.stdout.splitlines())
    assert begun["step"] == "begin" and landed["step"] == "land"
    assert decided == json.loads((Path(begun["run_dir"]) / "1-decide.json").read_text())
    assert landed["commit"] == git(git_repo, "rev-parse", "HEAD").strip()


def test_inside_one_attempt_no_stage_reads_back_text_another_stage_wrote(
    git_repo: Path, tmp_path: Path
) -> None:
    # The document travels between the stages as a value: the piped one is parsed once,
    # and no stage parses text a stage before it printed. Naive variant caught: the stages
    # handing JSON text to each other through a swapped stdin/stdout (one parse a stage).
    # The outcome and every kept document stay what the pipe of commands gives.
    import sys

    notes_project(
        git_repo, "mkdir -p notes; echo hi > notes/a.txt", wall_seconds=600, check_timeout=5
    )
    lk = Path(sys.executable).parent / "lk"
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import runpy, sys\n"
        "from loopkit import document, loader\n"
        "parsed = []\n"
        "real_parse, real_loads = document.parse_attempt, loader.json_loads\n"
        "def parse(raw, **kw):\n    parsed.append('parse_attempt')\n    return real_parse(raw, **kw)\n"
        "def loads(raw, *a, **kw):\n"
        "    if '\"loopkit/attempt\"' in str(raw[:200]):\n        parsed.append('json')\n"
        "    return real_loads(raw, *a, **kw)\n"
        "document.parse_attempt, loader.json_loads = parse, loads\n"
        f"sys.argv = [{str(lk)!r}, *sys.argv[1:]]\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit as e:\n"
        "    code = e.code\n"
        "sys.stderr.write(f'EXIT={code} PARSED={parsed}\\n')\n"
    )
    prefix = tmp_path / "r" / "1"
    done = subprocess.run(
        [sys.executable, str(probe), "attempt", "--contract", "loop.yaml", "--keep", str(prefix)],
        cwd=git_repo, input=_task(git_repo), capture_output=True, text=True, check=False,
    )  # fmt: skip
    last = done.stderr.strip().splitlines()[-1]
    assert last == "EXIT=0 PARSED=['parse_attempt', 'json']", last
    assert json.loads(done.stdout)["decision"]["outcome"] == "complete"
    for stage in STAGES:
        kept = (tmp_path / "r" / f"1-{stage}.json").read_text()
        assert kept.endswith("\n") and json.loads(kept)["kind"] == "loopkit/attempt", stage
