"""lk eval end to end: real git worktrees, lk attempt per trial, loopkit's decision as
the score, the infrastructure's failures set apart, a verdict a CI gate can use."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import git
from tests.helpers.evals import (
    command_config,
    lk,
    make_repo,
    reference_patches,
    results,
    write_suite,
)

pytestmark = pytest.mark.slow


def test_a_clear_winner_is_better_and_the_loser_worse(tmp_path: Path) -> None:
    """Twelve tasks, two scripted command agents: one fixes every function, one fixes
    none and says it did. The sample can tell: better (exit 0), and the other way round
    worse (exit 52); the false claims are counted as such, never as passes."""
    names = list(__import__("tests.helpers.evals", fromlist=["FUNCS"]).FUNCS)
    repo = make_repo(tmp_path, names)
    suite = write_suite(
        tmp_path,
        repo,
        names,
        [command_config("good", fix=names), command_config("claims", fix=[])],
    )
    r = lk(
        "eval",
        "run",
        str(suite),
        "--jobs",
        "2",
        "--json",
        "--compare",
        "good",
        "claims",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    good, claims = doc["configs"]["good"], doc["configs"]["claims"]
    assert good["pass_at_1"]["value"] == 1.0 and claims["pass_at_1"]["value"] == 0.0
    assert claims["false_claims"] == 12 and claims["false_claim_rate"] == 1.0
    assert good["false_claims"] == 0 and good["infra"] == 0
    (cmp,) = doc["comparisons"]
    assert cmp["verdict"] == "better" and cmp["interval"][0] > 0 and cmp["wins"] == 12
    # The same trials, read back (nothing runs): the other way round is worse.
    back = lk("eval", "report", str(suite), "--compare", "claims", "good", cwd=tmp_path)
    assert back.returncode == 52, back.stderr
    assert "claims vs good: WORSE" in back.stdout
    # Each trial ran in its own worktree, removed after it: the repository is as it was.
    assert (
        subprocess.run(
            ["git", "worktree", "list"], cwd=repo, capture_output=True, text=True
        ).stdout.count("\n")
        == 1
    )
    assert (
        subprocess.run(
            ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True
        ).stdout
        == ""
    )


def test_a_small_sample_is_inconclusive_and_a_rerun_resumes(tmp_path: Path) -> None:
    names = ["add", "mul", "neg"]
    repo = make_repo(tmp_path, names)
    refs = reference_patches(tmp_path, repo, names)
    suite = write_suite(
        tmp_path,
        repo,
        names,
        [command_config("two", fix=["add", "mul"]), command_config("one", fix=["add"])],
        repeats=2,
        references=refs,
    )
    r = lk(
        "eval",
        "run",
        str(suite),
        "--compare",
        "two",
        "one",
        "--html",
        str(tmp_path / "r.html"),
        cwd=tmp_path,
    )
    assert r.returncode == 51, r.stderr  # inconclusive
    assert "two vs one: INCONCLUSIVE" in r.stdout
    assert "3 task(s) valid" in r.stderr
    html = (tmp_path / "r.html").read_text()
    assert "<svg" in html and "two" in html
    first = results(tmp_path)
    assert len(first) == 12
    # Interleaved: within each repeat, each task's trials of both configurations are
    # adjacent (round-robin), never one configuration's whole block first.
    order = [(x["repeat"], x["task"]) for x in first]
    assert order == sorted(order, key=lambda rt: rt[0]) and len({o for o in order[:2]}) == 1
    # A rerun skips the finished trials and reports the same.
    again = lk("eval", "run", str(suite), "--compare", "two", "one", cwd=tmp_path)
    assert again.returncode == 51
    assert "resuming: 12 of 12 trials finished before" in again.stderr
    assert len(results(tmp_path)) == 12


def test_a_task_that_passes_at_its_base_is_refused(tmp_path: Path) -> None:
    names = ["add"]
    repo = make_repo(tmp_path, names)
    (repo / "add.py").write_text("def add(a, b):\n    return a + b\n")
    subprocess.run(["git", "commit", "-qam", "already fixed"], cwd=repo, check=True)
    suite = write_suite(tmp_path, repo, names, [command_config("x", fix=[])])
    r = lk("eval", "run", str(suite), cwd=tmp_path)
    assert r.returncode == 3
    assert "task fix-add: its checks already pass at the base" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_a_reference_that_does_not_pass_is_refused(tmp_path: Path) -> None:
    names = ["add"]
    repo = make_repo(tmp_path, names)
    (tmp_path / "bad.patch").write_text(
        "--- a/add.py\n+++ b/add.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a * b\n"
    )
    suite = write_suite(
        tmp_path, repo, names, [command_config("x", fix=[])], references={"add": "bad.patch"}
    )
    r = lk("eval", "run", str(suite), cwd=tmp_path)
    assert r.returncode == 3
    assert "its reference solution does not pass its checks" in r.stderr


def test_a_bad_suite_is_one_line_naming_what_is_wrong(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text("version: 1\ntasks: []\nconfigs: [{name: x, provider: nope}]\nrepeats: 0\n")
    r = lk("eval", "run", str(suite), cwd=tmp_path)
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    for part in ("$.repeats", "$.tasks", "$.configs[0].provider", "$.repo"):
        assert part in r.stderr


# --------------------------------------------------------------------------- real CLIs


def _bash_fixing(names: list[str]) -> str:
    """A shell command that fixes the functions in ``names`` -- when the trial's tree (its
    path names the task) is one of theirs -- and does nothing otherwise."""
    from tests.helpers.evals import FUNCS

    arms = " ".join(f"*fix-{n}--*) sed -i 's/{FUNCS[n][0]}/{FUNCS[n][1]}/' {n}.py;;" for n in names)
    return f"case '{{{{cwd}}}}' in {arms} esac; echo ok"


def _claude(server: Any, tmp: Path, fixes: list[str]) -> dict[str, Any]:
    from tests.helpers.agents import claude_env_for

    env = claude_env_for(server, tmp / "claude-home")
    return {
        "provider": "claude",
        "model": "claude-sonnet-4-5",
        "worker": {"allowed_tools": ["Bash"], "max_turns": 5},
        "env": {k: env[k] for k in env if k.startswith(("ANTHROPIC_", "CLAUDE_", "DISABLE_"))}
        | {"HOME": env["HOME"], "PATH": env["PATH"]},
    }


def _codex(server: Any, tmp: Path, fixes: list[str]) -> dict[str, Any]:
    from tests.helpers.agents import codex_env_for

    env = codex_env_for(server, tmp / "codex-home")
    return {
        "provider": "codex",
        "worker": {},
        "env": {
            "CODEX_HOME": env["CODEX_HOME"],
            "LOOPKIT_MODEL_KEY": env["LOOPKIT_MODEL_KEY"],
            "PATH": env["PATH"],
        },
    }


def _pi(server: Any, tmp: Path, fixes: list[str]) -> dict[str, Any]:
    from tests.helpers.agents import env_for

    env = env_for("pi", server, tmp / "pi-agent")
    keep = ("PI_CODING_AGENT_DIR", "PI_OFFLINE", "PI_TELEMETRY", "PATH")
    return {"provider": "pi", "worker": {}, "env": {k: env[k] for k in keep if k in env}}


#: The real CLIs in the eval, each one line: its name, how its scripted model acts, and
#: what it fixes. Another CLI is one more line here (and its builder above).
REAL = [
    ("claude", _claude, ["add"], "Bash"),
    ("codex", _codex, ["add", "mul"], "exec_command"),
    ("pi", _pi, ["mul"], "bash"),
]


@pytest.mark.agents
def test_real_clis_and_a_scripted_command_and_a_provider_that_is_down(tmp_path: Path) -> None:
    """claude, codex and pi (real CLIs, scripted models; claude's and codex's through the
    meter) and a scripted command agent on three tasks; a fifth configuration's provider
    answers 500 for ever.
    Each scripted model fixes some tasks and says "Done." on all of them: loopkit's
    verification, not the agent's word, decides. The provider that is down is the
    infrastructure's failure: retried in a fresh tree, then set apart, never a false
    claim and never counted against an agent in the rate without it."""
    from loopkit.testing.server import ModelServer
    from tests.helpers.agents import agent_bin, as_script, claude_bin, codex_bin
    from tests.helpers.evals import FUNCS

    def start_server(turns: Any) -> ModelServer:
        return ModelServer(as_script(turns)).start()

    claude_bin()
    codex_bin()
    agent_bin("pi")
    names = ["add", "mul", "neg"]
    repo = make_repo(tmp_path, names)
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "models:\n  claude-sonnet-4-5: {input: 3, output: 15, as_of: '2026-01-01', "
        "source: rehearsal, hosts: ['127.0.0.1']}\n"
    )
    servers = []
    configs = []
    try:
        for name, build, fixes, tool in REAL:
            key = "cmd" if tool == "exec_command" else "command"
            arg = {key: _bash_fixing(fixes)}
            server = start_server([{"tools": [{"name": tool, "input": arg}]}, {"text": "Done."}])
            servers.append(server)
            configs.append({"name": name, **build(server, tmp_path / name, fixes)})
        configs[0]["env"]["LOOPKIT_PRICES"] = str(prices)
        down = start_server([{"error": {"status": 500}}])
        servers.append(down)
        configs.append({"name": "down", **_claude(down, tmp_path / "down", [])})
        configs[-1]["env"]["CLAUDE_CODE_MAX_RETRIES"] = "0"
        configs.append(command_config("script", fix=list(FUNCS)))
        suite = write_suite(tmp_path, repo, names, configs, infra_retries=1)
        r = lk(
            "eval",
            "run",
            str(suite),
            "--json",
            "--html",
            str(tmp_path / "eval.html"),
            cwd=tmp_path,
            timeout=900,
        )
    finally:
        for s in servers:
            s.stop()
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    c = doc["configs"]
    assert c["claude"]["per_task"] == {"fix-add": 1.0, "fix-mul": 0.0, "fix-neg": 0.0}
    assert c["codex"]["per_task"] == {"fix-add": 1.0, "fix-mul": 1.0, "fix-neg": 0.0}
    assert c["pi"]["per_task"] == {"fix-add": 0.0, "fix-mul": 1.0, "fix-neg": 0.0}
    assert c["script"]["pass_at_1"]["value"] == 1.0
    # "Done." on a task it did not fix is a false claim, loopkit's verdict is a failure.
    assert c["claude"]["false_claims"] == 2 and c["codex"]["false_claims"] == 1
    assert c["pi"]["false_claims"] == 2
    # The metered claude trials priced by the table the rehearsal gave: cost per success.
    assert c["claude"]["cost_per_success_usd"] and c["claude"]["cost_complete"] is True
    # The provider that is down: every trial retried once, then set apart.
    d = c["down"]
    assert d["infra"] == 3 and d["passed"] == 0 and d["false_claims"] == 0
    assert d["pass_at_1"]["value"] == 0.0  # counted as failures here...
    assert d["pass_at_1_without_infra"]["value"] is None  # ...and left out here
    trials = {t["key"]: t for t in results(tmp_path)}
    assert all(trials[f"down/fix-{n}/0"]["tries"] == 2 for n in names)
    assert all(trials[f"down/fix-{n}/0"]["status"] == "infra" for n in names)
    # The comparisons against the first configuration (claude): three tasks cannot tell.
    assert {x["candidate"]: x["verdict"] for x in doc["comparisons"]}["script"] == "inconclusive"
    assert "<svg" in (tmp_path / "eval.html").read_text()


def test_a_killed_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    """kill -9 in the middle of a trial: the rerun clears the worktree it left, skips the
    trials already written and runs each of the others once."""
    names = ["add", "mul", "neg"]
    repo = make_repo(tmp_path, names)
    slow = command_config("slow", fix=names)
    slow["env"]["SLEEP"] = "1.5"
    suite = write_suite(tmp_path, repo, names, [slow, command_config("fast", fix=[])], repeats=2)
    env = {**os.environ, "LOOPKIT_VALIDATE_OUTPUT": "1"}
    first = subprocess.Popen(
        ["lk", "eval", "run", str(suite)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    log = tmp_path / ".loopkit" / "eval" / "calc" / "trials.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 3:
            break
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    before = len(results(tmp_path))
    assert 3 <= before < 12
    r = lk("eval", "run", str(suite), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"resuming: {before} of 12 trials finished before" in r.stderr
    keys = [t["key"] for t in results(tmp_path)]
    assert len(keys) == 12 and len(set(keys)) == 12
    assert json.loads(r.stdout)["configs"]["slow"]["pass_at_1"]["value"] == 1.0
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True)
    assert listed.stdout.count("\n") == 1  # only the repository itself


def test_attempts_give_the_agent_a_retry_with_the_feedback(tmp_path: Path) -> None:
    """An agent that fixes its task only when retried: with attempts: 1 it fails every
    trial, with attempts: 2 lk attempt's retry (the decided document piped back) passes."""
    names = ["add", "neg"]
    repo = make_repo(tmp_path, names)
    late = command_config("late", fix=names)
    late["env"]["FIX_ON_RETRY"] = "1"
    for attempts, expected in ((1, 0.0), (2, 1.0)):
        suite = write_suite(tmp_path, repo, names, [late], attempts=attempts)
        state = tmp_path / f"state-{attempts}"
        r = lk("eval", "run", str(suite), "--json", "--state", str(state), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["configs"]["late"]["pass_at_1"]["value"] == expected
        rounds = {
            json.loads(x)["rounds"] for x in (state / "trials.jsonl").read_text().splitlines()
        }
        assert rounds == {attempts}


def test_a_killed_run_with_hidden_tests_leaves_no_temporary_tree(
    tmp_path: Path, git_repo: Path
) -> None:
    """kill -9 while a trial with hidden tests runs: its tree (a repository of the base
    alone, in the system's temporary folder) outlives the run; the rerun removes it, and
    after it none of this eval's trees is left there."""
    repo = git_repo
    (repo / "add.py").write_text("def add(a, b):\n    return a - b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add, broken")
    (repo / "add.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "test_add.py").write_text("from add import add\nassert add(2, 3) == 5\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add adds")
    fix = git(repo, "rev-parse", "HEAD").strip()
    agent = (
        "import os, time; time.sleep(float(os.environ['SLEEP'])); "
        "open('add.py', 'w').write('def add(a, b):\\n    return a + b\\n')"
    )
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "name": "calc",
                "repo": "repo",
                "base": "HEAD~1",
                "tasks": [
                    {
                        "id": "fix-add",
                        "text": "Fix add() in add.py.",
                        "criteria": [
                            {"name": "compiles", "run": f"{sys.executable} -c 'import add'"}
                        ],
                        "scope": ["add.py"],
                        "reference": fix,
                        "hidden": {
                            "from": fix,
                            "paths": ["test_add.py"],
                            "criteria": [{"name": "f2p", "run": f"{sys.executable} test_add.py"}],
                        },
                    }
                ],
                "configs": [
                    {
                        "name": "slow",
                        "provider": "command",
                        "worker": {
                            "command": f'{sys.executable} -c "{agent}"',
                            "env_allow": ["SLEEP"],
                        },
                        "env": {"SLEEP": "30"},
                    }
                ],
                "repeats": 1,
                "timeout": 120,
            },
            sort_keys=False,
        )
    )
    temp = Path(tempfile.gettempdir())
    before = set(temp.glob("loopkit-eval-*"))
    first = subprocess.Popen(
        ["lk", "eval", "run", str(suite)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    mine: list[Path] = []
    while not mine and time.monotonic() < deadline and first.poll() is None:
        mine = [p for p in set(temp.glob("loopkit-eval-*/slow--fix-add--0--1")) - before]
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert len(mine) == 1, "the trial's tree never appeared"
    left = mine[0].parent
    time.sleep(1)
    assert left.exists()  # what the kill left
    # The rerun: the agent is quick now (the configuration changed: a new trial).
    text = suite.read_text().replace("SLEEP: '30'", "SLEEP: '0'")
    assert text != suite.read_text()
    suite.write_text(text)
    r = lk("eval", "run", str(suite), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["configs"]["slow"]["pass_at_1"]["value"] == 1.0
    assert not left.exists()
    prefix = left.name.rsplit("-", 1)[0] + "-"
    assert [p for p in temp.glob(prefix + "*")] == []


def test_a_ci_matrix_of_one_configuration_per_job_joins_into_the_whole_runs_report(
    tmp_path: Path,
) -> None:
    """Each job of a CI matrix runs one configuration (--config) into its own state
    folder; their trials.jsonl joined, lk eval report gives what one run of the whole
    suite gives: the same trials, by name, the same figures and verdict."""
    names = ["add", "mul", "neg"]
    repo = make_repo(tmp_path, names)
    configs = [command_config("good", fix=names), command_config("claims", fix=[])]
    suite = write_suite(tmp_path, repo, names, configs, repeats=2)
    joined = tmp_path / "joined"
    joined.mkdir()
    lines = []
    for name in ("good", "claims"):
        state = tmp_path / "jobs" / name
        r = lk("eval", "run", str(suite), "--config", name, "--state", str(state), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        mine = [json.loads(x) for x in (state / "trials.jsonl").read_text().splitlines()]
        assert len(mine) == 6 and {x["config"] for x in mine} == {name}
        lines += (state / "trials.jsonl").read_text().splitlines()
        shutil.copy(state / "pins.json", joined / "pins.json")
    (joined / "trials.jsonl").write_text("\n".join(lines) + "\n")
    args = ("--json", "--compare", "good", "claims")
    parts = lk("eval", "report", str(suite), "--state", str(joined), *args, cwd=tmp_path)
    whole = lk("eval", "run", str(suite), "--state", str(tmp_path / "whole"), *args, cwd=tmp_path)
    assert whole.returncode == parts.returncode == 0, (whole.stderr, parts.stderr)
    a, b = json.loads(parts.stdout), json.loads(whole.stdout)
    for name in ("good", "claims"):
        assert a["configs"][name]["pass_at_1"] == b["configs"][name]["pass_at_1"]
    assert a["comparisons"][0]["verdict"] == b["comparisons"][0]["verdict"]
    assert a["trials"] == b["trials"]
    ids = {
        json.loads(x)["id"] for x in (tmp_path / "whole" / "trials.jsonl").read_text().splitlines()
    }
    assert ids == {json.loads(x)["id"] for x in lines}
    bad = lk("eval", "run", str(suite), "--config", "nosuch", cwd=tmp_path)
    assert bad.returncode == 3 and "no configuration named 'nosuch'" in bad.stderr
