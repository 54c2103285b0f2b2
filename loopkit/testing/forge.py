"""A stateful forge on 127.0.0.1 for rehearsals and tests: the part of GitHub's REST API
that ``gh api`` and ``lk stack`` use, backed by real bare git repositories that it
serves over git's smart HTTP (``git http-backend``) and merges with real git.

What it answers (JSON, as GitHub does):

- ``GET /user``; ``GET /repos/O/R``
- pulls: ``POST /repos/O/R/pulls``, ``GET .../pulls[?state&head&base]``, ``GET|PATCH
  .../pulls/N``, ``PUT .../pulls/N/merge`` with ``merge_method`` merge (a merge commit),
  squash (one new commit, the pull request's combined tree) or rebase (each commit
  replayed anew; ``merge_commit_sha`` the last) and the ``sha`` check (409 when the head
  moved), refused (405) when a protected base demands an up-to-date head or a passing
  status that is not there
- branches: ``DELETE .../git/refs/heads/B`` (the web page's "Delete branch"): a pull
  request from B is closed; one based on B is retargeted onto the base of the pull
  request that merged B, else closed
- issues: ``POST /repos/O/R/issues``, ``GET|PATCH .../issues/N``; a pull request merged
  into the default branch closes the issues its body names ("Closes #N", "Fixes #N")
- branch protection: ``GET|PUT|DELETE .../branches/B/protection``; rules:
  ``GET .../rules/branches/B`` (a ruleset's rules the test sets, a ``merge_queue`` rule
  when it asks for one); a strict rule of either kind refuses a head not up to date; a
  branch with a merge queue refuses the REST merge, and GraphQL's ``enqueuePullRequest``
  (``POST /graphql``, its ``expectedHeadOid`` checked) lands the pull request at once
- commit statuses: ``POST .../statuses/SHA``, ``GET .../commits/SHA/status``; check runs:
  ``POST .../check-runs``, ``GET .../commits/SHA/check-runs``
- a review: ``POST|GET .../pulls/N/reviews`` (``event`` COMMENT, REQUEST_CHANGES or
  APPROVE, its ``comments`` on lines), review comments ``POST|GET .../pulls/N/comments``;
  each with its author's ``author_association``: OWNER for the forge's own login, NONE for
  a guest (``Forge.guests``: other people's tokens, which may call the API but not push)

``gh`` reaches it as the host ``github.localhost`` (which it speaks plain HTTP to, at
``api.github.localhost``) through ``HTTP_PROXY`` pointed here: see ``gh_env``. Git reaches
``/git/O/R.git`` with the token as its password (HTTP basic); without it a push is
refused (401), as a job without a write credential is on the real forge.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from loopkit.sections import JSONObject

#: The host gh speaks plain HTTP to (``api.github.localhost``).
GH_HOST = "github.localhost"
_CLOSES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s+#(\d+)\b", re.IGNORECASE)


class ForgeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Repo:
    owner: str
    name: str
    path: Path
    default_branch: str = "main"
    pulls: dict[int, JSONObject] = field(default_factory=dict)
    issues: dict[int, JSONObject] = field(default_factory=dict)
    protection: dict[str, JSONObject] = field(default_factory=dict)
    merge_queue: set[str] = field(default_factory=set)
    #: rulesets' rules per branch (``GET .../rules/branches/B``), besides a merge queue
    rules: dict[str, list[JSONObject]] = field(default_factory=dict)
    statuses: dict[str, dict[str, str]] = field(default_factory=dict)
    #: a status's description per commit and context (``statuses`` holds its state)
    described: dict[str, dict[str, str]] = field(default_factory=dict)
    check_runs: list[dict[str, Any]] = field(default_factory=list)
    #: per pull request: its reviews, its review comments (on lines)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    next_number: int = 1
    next_id: int = 1000

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


def _git(
    repo: Path, *args: str, input: bytes | None = None, env: dict[str, str] | None = None
) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        input=input,
        capture_output=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        raise ForgeError(500, f"git {args[0]}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode().strip()


class Forge:
    """The forge's state: repositories under ``root``, one token that may write."""

    def __init__(self, root: Path, *, token: str = "forge-token", login: str = "lander") -> None:
        self.root = root
        self.token = token
        self.login = login
        self.repos: dict[str, Repo] = {}
        self.lock = threading.RLock()
        self.log: list[JSONObject] = []
        self.port = 0
        #: other people's tokens (token -> login): they may use the API (comment, review)
        #: but not push, and their association with a repository is NONE
        self.guests: dict[str, str] = {}

    # -- set-up (what a person does in the forge's web pages) ------------------------------

    def create_repo(
        self, full_name: str, *, source: Path | None = None, branch: str = "main"
    ) -> Repo:
        owner, name = full_name.split("/", 1)
        path = self.root / "git" / owner / f"{name}.git"
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
        _git(path, "config", "http.receivepack", "true")
        _git(path, "symbolic-ref", "HEAD", f"refs/heads/{branch}")
        if source is not None:
            subprocess.run(
                ["git", "push", "-q", str(path), f"HEAD:refs/heads/{branch}"],
                cwd=source,
                check=True,
                capture_output=True,
            )
        repo = Repo(owner, name, path, default_branch=branch)
        self.repos[full_name] = repo
        return repo

    def protect(
        self, full_name: str, branch: str, *, strict: bool = True, contexts: list[str] | None = None
    ) -> None:
        self.repos[full_name].protection[branch] = {
            "required_status_checks": {"strict": strict, "contexts": list(contexts or [])}
        }

    def url(self, full_name: str, *, token: str | None = None) -> str:
        auth = f"x-access-token:{token}@" if token else ""
        return f"http://{auth}127.0.0.1:{self.port}/git/{full_name}.git"

    def gh_env(self, config_dir: Path, *, token: str | None = None) -> dict[str, str]:
        """What points ``gh`` at this forge: its host, the proxy, a private config."""
        config_dir.mkdir(parents=True, exist_ok=True)
        return {
            "GH_HOST": GH_HOST,
            "GH_TOKEN": token if token is not None else self.token,
            "GH_CONFIG_DIR": str(config_dir),
            "HTTP_PROXY": f"http://127.0.0.1:{self.port}",
            "http_proxy": f"http://127.0.0.1:{self.port}",
            "NO_PROXY": "",
            "no_proxy": "",
            "GH_NO_UPDATE_NOTIFIER": "1",
            "GH_PROMPT_DISABLED": "1",
        }

    # -- the API --------------------------------------------------------------------------

    def _repo(self, owner: str, name: str) -> Repo:
        repo = self.repos.get(f"{owner}/{name}")
        if repo is None:
            raise ForgeError(404, "Not Found")
        return repo

    def _sha(self, repo: Repo, ref: str) -> str | None:
        done = subprocess.run(
            ["git", "rev-parse", "-q", "--verify", f"refs/heads/{ref}^{{commit}}"],
            cwd=repo.path,
            capture_output=True,
            check=False,
        )
        return done.stdout.decode().strip() if done.returncode == 0 else None

    def _pull_view(self, repo: Repo, pr: JSONObject) -> JSONObject:
        head_sha = pr["merged_head"] if pr["merged"] else self._sha(repo, pr["head"])
        head_sha = head_sha or pr.get("last_head")  # a head branch deleted: its last commit
        return {
            "number": pr["number"],
            "state": pr["state"],
            "title": pr["title"],
            "body": pr["body"],
            "merged": pr["merged"],
            "merge_commit_sha": pr.get("merge_commit_sha"),
            "html_url": f"http://{GH_HOST}/{repo.full_name}/pull/{pr['number']}",
            "node_id": f"PR_{repo.owner}_{repo.name}_{pr['number']}",
            "head": {"ref": pr["head"], "sha": head_sha, "label": f"{repo.owner}:{pr['head']}"},
            "base": {"ref": pr["base"], "sha": self._sha(repo, pr["base"])},
        }

    def handle(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, *, login: str = ""
    ) -> tuple[int, Any]:
        login = login or self.login
        parts = [p for p in path.split("/") if p]
        with self.lock:
            if parts == ["user"]:
                return 200, {"login": login}
            if parts == ["graphql"] and method == "POST":
                return self._graphql(body)
            if len(parts) < 3 or parts[0] != "repos":
                raise ForgeError(404, "Not Found")
            repo = self._repo(parts[1], parts[2])
            rest = parts[3:]
            if not rest and method == "GET":
                return 200, {
                    "full_name": repo.full_name,
                    "default_branch": repo.default_branch,
                    "allow_squash_merge": True,
                    "allow_merge_commit": True,
                }
            if rest[:1] == ["pulls"]:
                return self._pulls(repo, method, rest[1:], query, body, login)
            if rest[:1] == ["issues"]:
                return self._issues(repo, method, rest[1:], body)
            if rest[:1] == ["branches"] and len(rest) >= 3 and rest[-1] == "protection":
                branch = "/".join(rest[1:-1])
                if method == "GET":
                    got = repo.protection.get(branch)
                    if got is None:
                        raise ForgeError(404, "Branch not protected")
                    return 200, got
                if method == "PUT":
                    repo.protection[branch] = {
                        "required_status_checks": body.get("required_status_checks")
                    }
                    return 200, repo.protection[branch]
                if method == "DELETE":
                    repo.protection.pop(branch, None)
                    return 204, None
            if rest[:3] == ["git", "refs", "heads"] and len(rest) > 3 and method == "DELETE":
                self._delete_branch(repo, "/".join(rest[3:]))
                return 204, None
            if rest[:2] == ["rules", "branches"] and method == "GET":
                branch = "/".join(rest[2:])
                listed = list(repo.rules.get(branch, []))
                if branch in repo.merge_queue:
                    listed.append({"type": "merge_queue"})
                return 200, listed
            if rest[:1] == ["statuses"] and len(rest) == 2 and method == "POST":
                repo.statuses.setdefault(rest[1], {})[body["context"]] = body["state"]
                repo.described.setdefault(rest[1], {})[body["context"]] = str(
                    body.get("description") or ""
                )
                return 201, {"state": body["state"], "context": body["context"]}
            if rest[:1] == ["commits"] and len(rest) == 3 and rest[2] == "status":
                got = repo.statuses.get(rest[1], {})
                state = (
                    "success" if got and all(v == "success" for v in got.values()) else "pending"
                )
                said = repo.described.get(rest[1], {})
                return 200, {
                    "state": state,
                    "statuses": [
                        {"context": k, "state": v, "description": said.get(k, "")}
                        for k, v in got.items()
                    ],
                }
            if rest == ["check-runs"] and method == "POST":
                run = {
                    "id": repo.new_id(),
                    "name": str(body["name"]),
                    "head_sha": str(body["head_sha"]),
                    "status": str(body.get("status") or "completed"),
                    "conclusion": body.get("conclusion"),
                    "output": body.get("output") or {},
                }
                repo.check_runs.append(run)
                return 201, run
            if rest[:1] == ["commits"] and len(rest) == 3 and rest[2] == "check-runs":
                runs = [r for r in repo.check_runs if r["head_sha"] == rest[1]]
                return 200, {"total_count": len(runs), "check_runs": runs}
        raise ForgeError(404, "Not Found")

    def _graphql(self, body: Any) -> tuple[int, Any]:
        """``enqueuePullRequest`` alone: a queue that lands at once, when the expected
        head is the pull request's head (GitHub's ``expectedHeadOid``)."""
        query = str(body.get("query") or "")
        variables = body.get("variables") or {}
        if "enqueuePullRequest" not in query:
            return 200, {"errors": [{"message": "only enqueuePullRequest is served here"}]}
        for repo in self.repos.values():
            for pr in repo.pulls.values():
                if f"PR_{repo.owner}_{repo.name}_{pr['number']}" == variables.get("id"):
                    head = self._sha(repo, pr["head"])
                    if variables.get("sha") and variables["sha"] != head:
                        return 200, {"errors": [{"message": "Head sha didn't match expected"}]}
                    try:
                        self._merge(repo, pr, {"merge_method": "squash", "sha": head}, queue=True)
                    except ForgeError as e:
                        return 200, {"errors": [{"message": e.message}]}
                    return 200, {"data": {"enqueuePullRequest": {"mergeQueueEntry": {"id": "MQE"}}}}
        return 200, {"errors": [{"message": "Could not resolve to a node"}]}

    def delete_branch(self, full_name: str, branch: str) -> None:
        """The web page's "Delete branch" (or ``DELETE .../git/refs/heads/B``)."""
        with self.lock:
            self._delete_branch(self.repos[full_name], branch)

    def _delete_branch(self, repo: Repo, branch: str) -> None:
        """As GitHub does: an open pull request from the branch is closed; one based on it
        is retargeted onto the base of the pull request that merged the branch, else
        closed."""
        sha = self._sha(repo, branch)
        if sha is None:
            raise ForgeError(422, "Reference does not exist")
        merged_into = next(
            (p["base"] for p in repo.pulls.values() if p["head"] == branch and p["merged"]), None
        )
        for pr in repo.pulls.values():
            if pr["state"] != "open":
                continue
            if pr["head"] == branch:
                pr.update(state="closed", last_head=sha)
            elif pr["base"] == branch and merged_into is not None:
                pr["base"] = merged_into
            elif pr["base"] == branch:
                pr.update(state="closed", last_head=self._sha(repo, pr["head"]))
        _git(repo.path, "update-ref", "-d", f"refs/heads/{branch}", sha)

    def _pulls(
        self,
        repo: Repo,
        method: str,
        rest: list[str],
        query: dict[str, list[str]],
        body: Any,
        login: str,
    ) -> tuple[int, Any]:
        if not rest and method == "POST":
            head, base = str(body.get("head", "")), str(body.get("base", ""))
            head = head.split(":", 1)[-1]
            if self._sha(repo, head) is None or self._sha(repo, base) is None:
                raise ForgeError(422, "Validation Failed: head or base branch not found")
            if any(p["head"] == head and p["state"] == "open" for p in repo.pulls.values()):
                raise ForgeError(422, f"A pull request already exists for {repo.owner}:{head}.")
            number = repo.next_number
            repo.next_number += 1
            new: JSONObject = {
                "number": number,
                "state": "open",
                "title": str(body.get("title") or head),
                "body": str(body.get("body") or ""),
                "head": head,
                "base": base,
                "merged": False,
            }
            repo.pulls[number] = new
            return 201, self._pull_view(repo, new)
        if not rest and method == "GET":
            state = (query.get("state") or ["open"])[0]
            head = (query.get("head") or [""])[0].split(":", 1)[-1]
            base = (query.get("base") or [""])[0]
            found = [
                self._pull_view(repo, p)
                for p in repo.pulls.values()
                if (state == "all" or p["state"] == state)
                and (not head or p["head"] == head)
                and (not base or p["base"] == base)
            ]
            return 200, found
        pr = repo.pulls.get(int(rest[0])) if rest and rest[0].isdigit() else None
        if pr is None:
            raise ForgeError(404, "Not Found")
        if len(rest) == 1 and method == "GET":
            return 200, self._pull_view(repo, pr)
        if len(rest) == 1 and method == "PATCH":
            for key in ("title", "body", "base", "state"):
                if key in body:
                    pr[key] = body[key]
            return 200, self._pull_view(repo, pr)
        if rest[1:] == ["merge"] and method == "PUT":
            return self._merge(repo, pr, body or {})
        if rest[1:] == ["comments"] and method == "GET":
            return 200, list(repo.comments.get(pr["number"], []))
        if rest[1:] == ["comments"] and method == "POST":
            return 201, self._comment(repo, pr, body, login, review=None)
        if rest[1:] == ["reviews"] and method == "GET":
            return 200, list(repo.reviews.get(pr["number"], []))
        if rest[1:] == ["reviews"] and method == "POST":
            return 200, self._review(repo, pr, body, login)
        raise ForgeError(404, "Not Found")

    def _user(self, login: str) -> dict[str, Any]:
        """Who wrote a comment or a review, and their association with the repository."""
        return {
            "user": {"login": login},
            "author_association": "OWNER" if login == self.login else "NONE",
        }

    def _comment(
        self, repo: Repo, pr: dict[str, Any], body: Any, login: str, *, review: int | None
    ) -> dict[str, Any]:
        """A review comment on a line of the pull request's head (GitHub's shape)."""
        if not body.get("body") or not body.get("path"):
            raise ForgeError(422, "Validation Failed: a review comment needs body and path")
        line = body.get("line")
        comment = {
            "id": repo.new_id(),
            "pull_request_review_id": review,
            "body": str(body["body"]),
            "path": str(body["path"]),
            "line": line,
            "original_line": line,
            "side": str(body.get("side") or "RIGHT"),
            "commit_id": str(body.get("commit_id") or self._sha(repo, pr["head"]) or ""),
            "in_reply_to_id": body.get("in_reply_to"),
            **self._user(login),
        }
        repo.comments.setdefault(pr["number"], []).append(comment)
        return comment

    def _review(self, repo: Repo, pr: dict[str, Any], body: Any, login: str) -> dict[str, Any]:
        """A review as the web page submits it: its event and its comments on lines."""
        states = {
            "COMMENT": "COMMENTED",
            "REQUEST_CHANGES": "CHANGES_REQUESTED",
            "APPROVE": "APPROVED",
        }
        state = states.get(str(body.get("event") or "COMMENT"))
        if state is None:
            raise ForgeError(422, f"Validation Failed: event {body.get('event')!r}")
        review: dict[str, Any] = {
            "id": repo.new_id(),
            "state": state,
            "body": str(body.get("body") or ""),
            "commit_id": str(body.get("commit_id") or self._sha(repo, pr["head"]) or ""),
            **self._user(login),
        }
        for c in body.get("comments") or []:
            self._comment(
                repo, pr, {**c, "commit_id": review["commit_id"]}, login, review=review["id"]
            )
        repo.reviews.setdefault(pr["number"], []).append(review)
        return review

    def _merge(
        self, repo: Repo, pr: JSONObject, body: JSONObject, *, queue: bool = False
    ) -> tuple[int, Any]:
        if pr["base"] in repo.merge_queue and not queue:
            raise ForgeError(405, "Changes must be made through the merge queue")
        if pr["state"] != "open":
            raise ForgeError(405, "Pull Request is not mergeable")
        head = self._sha(repo, pr["head"])
        base = self._sha(repo, pr["base"])
        if head is None or base is None:
            raise ForgeError(422, "head or base branch is gone")
        want = body.get("sha")
        if want and want != head:
            raise ForgeError(409, "Head branch was modified. Review and try the merge again.")
        rule = repo.protection.get(pr["base"], {}).get("required_status_checks") or {}
        strict = bool(rule.get("strict")) or any(
            r.get("type") == "required_status_checks"
            and (r.get("parameters") or {}).get("strict_required_status_checks_policy")
            for r in repo.rules.get(pr["base"], [])
        )
        if strict and not _is_ancestor(repo.path, base, head):
            raise ForgeError(405, "Head branch is not up to date with the base branch")
        statuses = repo.statuses.get(head, {})
        for context in rule.get("contexts") or []:
            if statuses.get(context) != "success":
                raise ForgeError(405, f"Required status check {context!r} is expected.")
        done = subprocess.run(
            ["git", "merge-tree", "--write-tree", base, head],
            cwd=repo.path,
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            raise ForgeError(405, "Pull Request is not mergeable (conflict)")
        tree = done.stdout.decode().split("\n", 1)[0].strip()
        method = body.get("merge_method") or "merge"
        title = str(body.get("commit_title") or f"{pr['title']} (#{pr['number']})")
        stamp = {
            "GIT_AUTHOR_NAME": "forge",
            "GIT_AUTHOR_EMAIL": "forge@127.0.0.1",
            "GIT_COMMITTER_NAME": "forge",
            "GIT_COMMITTER_EMAIL": "forge@127.0.0.1",
        }
        if method == "squash":
            commit = _git(repo.path, "commit-tree", tree, "-p", base, "-m", title, env=stamp)
        elif method == "merge":
            commit = _git(
                repo.path, "commit-tree", tree, "-p", base, "-p", head, "-m", title, env=stamp
            )
        elif method == "rebase":
            commit = _replay(repo.path, base, head, stamp)
        else:
            raise ForgeError(422, f"merge_method {method!r} is not allowed")
        _git(repo.path, "update-ref", f"refs/heads/{pr['base']}", commit, base)
        pr.update(state="closed", merged=True, merge_commit_sha=commit, merged_head=head)
        if pr["base"] == repo.default_branch:
            for n in _CLOSES.findall(pr["body"] or ""):
                issue = repo.issues.get(int(n))
                if issue is not None:
                    issue["state"] = "closed"
        return 200, {"sha": commit, "merged": True, "message": "Pull Request successfully merged"}

    def _issues(self, repo: Repo, method: str, rest: list[str], body: Any) -> tuple[int, Any]:
        if not rest and method == "POST":
            number = repo.next_number
            repo.next_number += 1
            issue = {
                "number": number,
                "state": "open",
                "title": str(body.get("title") or ""),
                "body": str(body.get("body") or ""),
                "html_url": f"http://{GH_HOST}/{repo.full_name}/issues/{number}",
            }
            repo.issues[number] = issue
            return 201, issue
        got = repo.issues.get(int(rest[0])) if rest and rest[0].isdigit() else None
        if got is None:
            raise ForgeError(404, "Not Found")
        if method == "PATCH":
            for key in ("state", "title", "body"):
                if key in body:
                    got[key] = body[key]
        return 200, got


def _replay(path: Path, base: str, head: str, stamp: dict[str, str]) -> str:
    """A rebase merge: each commit of ``base..head`` replayed anew on ``base`` (its author
    and message kept, the forge its committer); the last one's id."""
    current = base
    for commit in _git(path, "rev-list", "--reverse", "--no-merges", f"{base}..{head}").split():
        parent_tree = _git(path, "rev-parse", f"{commit}^^{{tree}}")
        root = _git(path, "commit-tree", parent_tree, "-m", "base", env=stamp)
        ours = _git(path, "commit-tree", f"{current}^{{tree}}", "-p", root, "-m", "o", env=stamp)
        theirs = _git(path, "commit-tree", f"{commit}^{{tree}}", "-p", root, "-m", "t", env=stamp)
        done = subprocess.run(
            ["git", "merge-tree", "--write-tree", ours, theirs],
            cwd=path,
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            raise ForgeError(405, "This branch can't be rebased (conflict)")
        tree = done.stdout.decode().split("\n", 1)[0].strip()
        an, ae, ad, message = _git(
            path, "log", "-1", "--format=%an%x00%ae%x00%aI%x00%B", commit
        ).split("\0", 3)
        author = {"GIT_AUTHOR_NAME": an, "GIT_AUTHOR_EMAIL": ae, "GIT_AUTHOR_DATE": ad}
        current = _git(
            path,
            "commit-tree",
            tree,
            "-p",
            current,
            input=message.encode(),
            env={**stamp, **author},
        )
    return current


def _is_ancestor(path: Path, old: str, new: str) -> bool:
    return (
        subprocess.run(
            ["git", "merge-base", "--is-ancestor", old, new], cwd=path, check=False
        ).returncode
        == 0
    )


class _Handler(BaseHTTPRequestHandler):
    forge: Forge
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization") or ""
        kind, _, value = header.partition(" ")
        if kind.lower() in ("token", "bearer"):
            return value == self.forge.token
        if kind.lower() == "basic":
            with contextlib.suppress(ValueError):
                _, _, password = base64.b64decode(value).decode().partition(":")
                return password == self.forge.token
        return False

    def _caller(self) -> str | None:
        """Who calls the API: the forge's own login (its token), a guest's, or nobody."""
        if self._authorized():
            return self.forge.login
        kind, _, value = (self.headers.get("Authorization") or "").partition(" ")
        return self.forge.guests.get(value) if kind.lower() in ("token", "bearer") else None

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _any(self) -> None:
        url = urlsplit(self.path)
        raw = self._body()
        if url.path.startswith("/git/"):
            self._git(url.path, url.query, raw)
            return
        self.forge.log.append({"method": self.command, "path": url.path})
        login = self._caller()
        if login is None:
            self._send(401, {"message": "Bad credentials"})
            return
        try:
            body = json.loads(raw) if raw.strip() else {}
            query = parse_qs(url.query)
            status, payload = self.forge.handle(self.command, url.path, query, body, login=login)
        except ForgeError as e:
            status, payload = e.status, {"message": e.message}
        except (ValueError, KeyError, AttributeError, TypeError) as e:
            status, payload = 400, {"message": f"Problems parsing JSON: {e}"}
        self._send(status, payload)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any

    def _git(self, path: str, query: str, raw: bytes) -> None:
        """git's smart HTTP through ``git http-backend``; a push needs the token."""
        pushing = "git-receive-pack" in path or "service=git-receive-pack" in query
        self.forge.log.append({"method": self.command, "path": path, "push": pushing})
        if pushing and not self._authorized():
            self._send(
                401, {"message": "Bad credentials"}, {"WWW-Authenticate": 'Basic realm="forge"'}
            )
            return
        env = {
            **os.environ,
            "GIT_PROJECT_ROOT": str(self.forge.root / "git"),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path[len("/git") :],
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type") or "",
            "CONTENT_LENGTH": str(len(raw)),
            "REMOTE_USER": self.forge.login,
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_HTTP_MAX_REQUEST_BUFFER": "100M",
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        with self.forge.lock:
            done = subprocess.run(
                ["git", "http-backend"], input=raw, capture_output=True, env=env, check=False
            )
        head, _, data = done.stdout.partition(b"\r\n\r\n")
        status, headers = 200, {}
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers[name] = value.strip()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextlib.contextmanager
def serving(root: Path, *, token: str = "forge-token") -> Iterator[Forge]:
    """A forge listening on 127.0.0.1 (a free port) while the block runs."""
    forge = Forge(root, token=token)
    handler = type("Handler", (_Handler,), {"forge": forge})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    forge.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield forge
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
