"""The forges, each through its own REST API and its own command-line client: GitHub
through ``gh api``, GitLab through ``glab api`` (both read their host and token the way
their users already set them up), and a plain remote, which has no pull requests.

Every client answers the same few questions: open, find, update and merge a pull
request, open an issue, and whether the target branch may be landed on at all -- only
where the forge itself demands an up-to-date head (GitHub's strict required status
checks, GitLab's fast-forward or semi-linear merges with a passing pipeline) or runs a
merge queue (a merge train): elsewhere a merge checks the head and never the base, and an
untested tree could land.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from loopkit import proc
from loopkit.errors import EnvironmentProblem
from loopkit.forge.stack import Refused


@dataclass
class Pull:
    number: int
    url: str
    state: str  # open, closed, merged
    head_sha: str
    base: str
    merge_commit: str = ""


class ApiError(EnvironmentProblem):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_STATUS = re.compile(r"\(HTTP (\d{3})\)")


class _Api:
    tool = ""

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        exe = shutil.which(self.tool)
        if exe is None:
            raise EnvironmentProblem(f"{self.tool} is not installed (it speaks to the forge)")
        argv = [exe, "api", "-X", method, path]
        if body is not None:
            argv += ["--input", "-"]
        done = proc.capture(
            argv, input=json.dumps(body).encode() if body is not None else None, timeout=120
        )
        out = done.stdout.decode("utf-8", "replace")
        if done.exit_code == 0:
            return json.loads(out) if out.strip() else None
        said = done.stderr.decode("utf-8", "replace").strip()
        m = _STATUS.search(said)
        status = int(m.group(1)) if m else 0
        try:
            message = str(json.loads(out).get("message") or said)
        except (ValueError, AttributeError):
            message = said.splitlines()[-1] if said else f"exit {done.exit_code}"
        raise ApiError(status, f"{self.tool} api {method} {path}: {message}")


class GitHub(_Api):
    tool = "gh"

    def __init__(self, repo: str) -> None:
        self.repo = repo

    def _pull(self, got: dict[str, Any]) -> Pull:
        state = "merged" if got.get("merged") else str(got.get("state"))
        return Pull(
            number=int(got["number"]),
            url=str(got.get("html_url") or ""),
            state=state,
            head_sha=str(got["head"]["sha"] or ""),
            base=str(got["base"]["ref"]),
            merge_commit=str(got.get("merge_commit_sha") or ""),
        )

    def find_pull(self, branch: str) -> Pull | None:
        owner = self.repo.split("/")[0]
        got = self.call("GET", f"repos/{self.repo}/pulls?state=open&head={owner}:{quote(branch)}")
        return self._pull(got[0]) if got else None

    def open_pull(self, *, head: str, base: str, title: str, body: str) -> Pull:
        got = self.call(
            "POST",
            f"repos/{self.repo}/pulls",
            {"head": head, "base": base, "title": title, "body": body},
        )
        return self._pull(got)

    def update_pull(self, number: int, *, base: str, body: str) -> None:
        self.call("PATCH", f"repos/{self.repo}/pulls/{number}", {"base": base, "body": body})

    def get_pull(self, number: int) -> Pull:
        return self._pull(self.call("GET", f"repos/{self.repo}/pulls/{number}"))

    def merge(self, number: int, *, sha: str, method: str, title: str) -> str:
        try:
            got = self.call(
                "PUT",
                f"repos/{self.repo}/pulls/{number}/merge",
                {"sha": sha, "merge_method": method, "commit_title": title},
            )
        except ApiError as e:
            if e.status in (405, 409, 422):
                raise Refused(f"the forge refused the merge of #{number}: {e.message}") from None
            raise
        return str(got["sha"])

    def landing_guard(self, branch: str) -> str | None:
        """None when the forge lands on ``branch`` only up-to-date heads or through a
        queue; else why landing there is refused."""
        try:
            rules = self.call("GET", f"repos/{self.repo}/rules/branches/{quote(branch)}")
        except ApiError as e:
            if e.status != 404:
                raise
            rules = []
        if any(r.get("type") == "merge_queue" for r in rules or []):
            return None
        try:
            got = self.call("GET", f"repos/{self.repo}/branches/{quote(branch)}/protection")
        except ApiError as e:
            if e.status == 404:
                return f"{branch} is not protected: the forge would merge a head never tested on its tip"
            raise
        checks = got.get("required_status_checks") or {}
        if checks.get("strict"):
            return None
        return (
            f"{branch}'s protection does not require branches to be up to date (strict status "
            "checks) and it has no merge queue: an untested tree could land"
        )

    def open_issue(self, *, title: str, body: str) -> int:
        return int(
            self.call("POST", f"repos/{self.repo}/issues", {"title": title, "body": body})["number"]
        )

    def close_issue(self, number: int) -> None:
        self.call("PATCH", f"repos/{self.repo}/issues/{number}", {"state": "closed"})


class GitLab(_Api):
    tool = "glab"

    def __init__(self, repo: str) -> None:
        self.project = f"projects/{quote(repo, safe='')}"

    def _pull(self, got: dict[str, Any]) -> Pull:
        state = {"opened": "open", "merged": "merged"}.get(str(got.get("state")), "closed")
        return Pull(
            number=int(got["iid"]),
            url=str(got.get("web_url") or ""),
            state=state,
            head_sha=str(got.get("sha") or ""),
            base=str(got.get("target_branch")),
            merge_commit=str(got.get("squash_commit_sha") or got.get("merge_commit_sha") or ""),
        )

    def find_pull(self, branch: str) -> Pull | None:
        got = self.call(
            "GET", f"{self.project}/merge_requests?state=opened&source_branch={quote(branch)}"
        )
        return self._pull(got[0]) if got else None

    def open_pull(self, *, head: str, base: str, title: str, body: str) -> Pull:
        got = self.call(
            "POST",
            f"{self.project}/merge_requests",
            {"source_branch": head, "target_branch": base, "title": title, "description": body},
        )
        return self._pull(got)

    def update_pull(self, number: int, *, base: str, body: str) -> None:
        self.call(
            "PUT",
            f"{self.project}/merge_requests/{number}",
            {"target_branch": base, "description": body},
        )

    def get_pull(self, number: int) -> Pull:
        return self._pull(self.call("GET", f"{self.project}/merge_requests/{number}"))

    def merge(self, number: int, *, sha: str, method: str, title: str) -> str:
        try:
            got = self.call(
                "PUT",
                f"{self.project}/merge_requests/{number}/merge",
                {"sha": sha, "squash": method == "squash", "squash_commit_message": title},
            )
        except ApiError as e:
            if e.status in (405, 406, 409, 422):
                raise Refused(f"the forge refused the merge of !{number}: {e.message}") from None
            raise
        return str(got.get("squash_commit_sha") or got.get("merge_commit_sha") or "")

    def landing_guard(self, branch: str) -> str | None:
        got = self.call("GET", self.project)
        if got.get("merge_trains_enabled"):
            return None
        if got.get("merge_method") in ("ff", "rebase_merge") and got.get(
            "only_allow_merge_if_pipeline_succeeds"
        ):
            return None
        return (
            f"{branch}: the project neither merges only up-to-date heads with a passing "
            "pipeline (fast-forward or semi-linear) nor runs a merge train"
        )

    def open_issue(self, *, title: str, body: str) -> int:
        got = self.call("POST", f"{self.project}/issues", {"title": title, "description": body})
        return int(got["iid"])

    def close_issue(self, number: int) -> None:
        self.call("PUT", f"{self.project}/issues/{number}", {"state_event": "close"})


def client(forge: str, repo: str) -> GitHub | GitLab | None:
    """The forge's client; None for a plain remote (branches only)."""
    if forge == "github":
        return GitHub(repo)
    if forge == "gitlab":
        return GitLab(repo)
    return None
