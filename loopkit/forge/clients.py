"""The forges, each through its own REST API and its own command-line client: GitHub
through ``gh api``, GitLab through ``glab api`` (both read their host and token the way
their users already set them up), and a plain remote, which has no pull requests.

Every client answers the same few questions: open, find, update and merge a pull
request, open an issue, what its reviewers and checks ask of it (GitHub: review comments,
reviews, failing statuses and check runs on its head), and whether the target branch may
be landed on at all -- only
where the forge itself demands an up-to-date head (GitHub's strict required status
checks, GitLab's fast-forward or semi-linear merges with a passing pipeline) or runs a
merge queue (a merge train): elsewhere a merge checks the head and never the base, and an
untested tree could land.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict
from urllib.parse import quote

from loopkit import proc
from loopkit.errors import EnvironmentProblem
from loopkit.forge.stack import Refused
from loopkit.text import clean, cut

#: What loopkit reads of the forges' answers (their REST APIs' shapes, not loopkit's):
#: only the fields read below; ``total=False`` where the forge may leave one out.


class _GitHubRef(TypedDict, total=False):
    sha: str | None
    ref: str


class _GitHubPull(TypedDict, total=False):
    """GET /repos/{repo}/pulls/{number}, one item of GET /repos/{repo}/pulls."""

    number: int
    html_url: str
    state: str  # open, closed
    merged: bool
    head: _GitHubRef
    base: _GitHubRef
    merge_commit_sha: str | None
    node_id: str


class _GitHubUser(TypedDict, total=False):
    login: str


class _GitHubComment(TypedDict, total=False):
    """An item of GET /repos/{repo}/pulls/{number}/comments (a review comment)."""

    id: int
    user: _GitHubUser | None
    path: str
    line: int | None
    original_line: int | None
    body: str
    author_association: str


class _GitHubReview(TypedDict, total=False):
    """An item of GET /repos/{repo}/pulls/{number}/reviews."""

    id: int
    user: _GitHubUser | None
    state: str  # APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED, PENDING
    body: str | None
    author_association: str


class _GitHubStatus(TypedDict, total=False):
    context: str
    state: str  # error, failure, pending, success
    description: str | None


class _GitHubStatuses(TypedDict, total=False):
    """GET /repos/{repo}/commits/{ref}/status (the combined status)."""

    statuses: list[_GitHubStatus]


class _GitHubCheckOutput(TypedDict, total=False):
    title: str | None
    summary: str | None


class _GitHubCheckRun(TypedDict, total=False):
    id: int
    name: str
    conclusion: str | None
    output: _GitHubCheckOutput


class _GitHubCheckRuns(TypedDict, total=False):
    """GET /repos/{repo}/commits/{ref}/check-runs."""

    check_runs: list[_GitHubCheckRun]


class _GitHubRuleParameters(TypedDict, total=False):
    strict_required_status_checks_policy: bool


class _GitHubRule(TypedDict, total=False):
    """An item of GET /repos/{repo}/rules/branches/{branch}."""

    type: str
    parameters: _GitHubRuleParameters


class _GitHubRequiredChecks(TypedDict, total=False):
    strict: bool


class _GitHubProtection(TypedDict, total=False):
    """GET /repos/{repo}/branches/{branch}/protection."""

    required_status_checks: _GitHubRequiredChecks | None


class _GitHubError(TypedDict, total=False):
    message: str


class _GitHubQueued(TypedDict, total=False):
    """POST /graphql (enqueuePullRequest): the errors when the forge refused."""

    errors: list[_GitHubError]


class _GitHubMerged(TypedDict):
    """PUT /repos/{repo}/pulls/{number}/merge."""

    sha: str


class _GitHubIssue(TypedDict):
    """POST /repos/{repo}/issues."""

    number: int


class _GitLabIssue(TypedDict):
    """POST /projects/{id}/issues."""

    iid: int


class _GitLabMergeRequest(TypedDict, total=False):
    """GET /projects/{id}/merge_requests/{iid}, one item of GET .../merge_requests."""

    iid: int
    web_url: str
    state: str  # opened, closed, locked, merged
    sha: str | None
    target_branch: str
    squash_commit_sha: str | None
    merge_commit_sha: str | None


class _GitLabProject(TypedDict, total=False):
    """GET /projects/{id}."""

    merge_trains_enabled: bool
    merge_method: str  # merge, rebase_merge, ff
    only_allow_merge_if_pipeline_succeeds: bool


@dataclass
class Pull:
    number: int
    url: str
    state: str  # open, closed, merged
    head_sha: str
    base: str
    merge_commit: str = ""
    node_id: str = ""


@dataclass(frozen=True)
class Remark:
    """One thing the forge asks of a pull request: a review comment on a line, a review's
    text, a check that failed on its head."""

    key: str  # the forge's own: "comment:ID", "review:ID", "status:CONTEXT@SHA", "check:ID"
    who: str  # the reviewer's login, or the check's name
    where: str  # "path:line" for a comment on a line, else ""
    text: str

    def note(self, pr: int) -> str:
        """The remark as the worker reads it (a note under its task)."""
        at = f" on {self.where}" if self.where else ""
        if self.key.startswith(("status:", "check:")):
            return f"Check `{self.who}` failed on #{pr}'s head: {self.text}"
        return f"Review of #{pr} by {self.who}{at}: {self.text}"


#: A remark's text at most (the handoff cuts the whole again).
REMARK_BYTES = 1200
#: check run conclusions that ask for a change
_FAILED = ("failure", "timed_out", "action_required", "startup_failure")
#: Whose comments and reviews a worker is given: people with a say in the repository
#: (anyone may comment on a public pull request; their text never reaches the worker).
TRUSTED = ("OWNER", "MEMBER", "COLLABORATOR")


def _trusted(item: _GitHubComment | _GitHubReview) -> bool:
    return str(item.get("author_association") or "NONE") in TRUSTED


def _said(text: object) -> str:
    return cut(clean(str(text or "")).strip(), REMARK_BYTES)


class ApiError(EnvironmentProblem):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_STATUS = re.compile(r"\(HTTP (\d{3})\)")


class _Api:
    tool = ""

    def call(self, method: str, path: str, body: Mapping[str, object] | None = None) -> Any:
        """The forge's answer to one request, as its JSON (None when empty): annotated
        with what it is where it is read."""
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

    def _pull(self, got: _GitHubPull) -> Pull:
        state = "merged" if got.get("merged") else str(got.get("state"))
        return Pull(
            number=int(got["number"]),
            url=str(got.get("html_url") or ""),
            state=state,
            head_sha=str(got["head"]["sha"] or ""),
            base=str(got["base"]["ref"]),
            merge_commit=str(got.get("merge_commit_sha") or ""),
            node_id=str(got.get("node_id") or ""),
        )

    def find_pull(self, branch: str) -> Pull | None:
        owner = self.repo.split("/")[0]
        got: list[_GitHubPull] | None = self.call(
            "GET", f"repos/{self.repo}/pulls?state=open&head={owner}:{quote(branch)}"
        )
        return self._pull(got[0]) if got else None

    def open_pull(self, *, head: str, base: str, title: str, body: str) -> Pull:
        got: _GitHubPull = self.call(
            "POST",
            f"repos/{self.repo}/pulls",
            {"head": head, "base": base, "title": title, "body": body},
        )
        return self._pull(got)

    def update_pull(self, number: int, *, base: str, body: str) -> None:
        self.call("PATCH", f"repos/{self.repo}/pulls/{number}", {"base": base, "body": body})

    def get_pull(self, number: int) -> Pull:
        got: _GitHubPull = self.call("GET", f"repos/{self.repo}/pulls/{number}")
        return self._pull(got)

    def merge(self, number: int, *, sha: str, method: str, title: str) -> str:
        try:
            got: _GitHubMerged = self.call(
                "PUT",
                f"repos/{self.repo}/pulls/{number}/merge",
                {"sha": sha, "merge_method": method, "commit_title": title},
            )
        except ApiError as e:
            if e.status in (405, 409, 422):
                raise Refused(f"the forge refused the merge of #{number}: {e.message}") from None
            raise
        return str(got["sha"])

    def remarks(self, number: int, head: str) -> list[Remark]:
        """What the reviewers and the checks ask of pull request ``number``: its review
        comments (each on a line), the text of each review that is not an approval -- from
        people with a say in the repository (``TRUSTED``) -- and each status or check run
        that failed on its ``head``."""
        base = f"repos/{self.repo}"
        out: list[Remark] = []
        comments: list[_GitHubComment] | None = self.call(
            "GET", f"{base}/pulls/{number}/comments?per_page=100"
        )
        for c in comments or []:
            if not _trusted(c):
                continue
            line = c.get("line") or c.get("original_line")
            where = f"{c.get('path')}:{line}" if line else str(c.get("path") or "")
            who = str((c.get("user") or {}).get("login") or "?")
            out.append(Remark(f"comment:{c['id']}", who, where, _said(c.get("body"))))
        reviews: list[_GitHubReview] | None = self.call(
            "GET", f"{base}/pulls/{number}/reviews?per_page=100"
        )
        for r in reviews or []:
            if r.get("state") in ("APPROVED", "DISMISSED") or not str(r.get("body") or "").strip():
                continue
            if not _trusted(r):
                continue
            who = str((r.get("user") or {}).get("login") or "?")
            out.append(Remark(f"review:{r['id']}", who, "", _said(r.get("body"))))
        status: _GitHubStatuses | None = self.call("GET", f"{base}/commits/{head}/status")
        for st in (status or {}).get("statuses") or []:
            if st.get("state") in ("failure", "error"):
                what = _said(st.get("description") or st.get("state"))
                out.append(
                    Remark(f"status:{st.get('context')}@{head}", str(st["context"]), "", what)
                )
        runs: _GitHubCheckRuns | None = None
        try:
            runs = self.call("GET", f"{base}/commits/{head}/check-runs?per_page=100")
        except ApiError as e:
            if e.status != 404:
                raise
        for run in (runs or {}).get("check_runs") or []:
            if run.get("conclusion") in _FAILED:
                output = run.get("output") or {}
                said = " ".join(str(output.get(k) or "") for k in ("title", "summary")).strip()
                what = _said(said or run.get("conclusion"))
                out.append(Remark(f"check:{run['id']}", str(run.get("name")), "", what))
        return out

    def has_queue(self, branch: str) -> bool:
        """Whether ``branch`` takes pull requests through a merge queue (the REST merge
        is refused there: a pull request is enqueued instead)."""
        try:
            rules: list[_GitHubRule] | None = self.call(
                "GET", f"repos/{self.repo}/rules/branches/{quote(branch)}"
            )
        except ApiError as e:
            if e.status != 404:
                raise
            return False
        return any(r.get("type") == "merge_queue" for r in rules or [])

    def enqueue(self, pull: Pull, *, sha: str) -> None:
        """Into the merge queue, naming the verified head (``expectedHeadOid``): a head
        that moved is refused by the forge."""
        query = (
            "mutation($id: ID!, $sha: GitObjectID) { enqueuePullRequest(input: "
            "{pullRequestId: $id, expectedHeadOid: $sha}) { mergeQueueEntry { id } } }"
        )
        got: _GitHubQueued | None = self.call(
            "POST", "graphql", {"query": query, "variables": {"id": pull.node_id, "sha": sha}}
        )
        errors = got.get("errors") if isinstance(got, dict) else None
        if errors:
            raise Refused(f"the forge refused to queue #{pull.number}: {errors[0].get('message')}")

    def landing_guard(self, branch: str) -> str | None:
        """None when the forge lands on ``branch`` only up-to-date heads or through a
        queue; else why landing there is refused."""
        rules: list[_GitHubRule] | None = []
        try:
            rules = self.call("GET", f"repos/{self.repo}/rules/branches/{quote(branch)}")
        except ApiError as e:
            if e.status != 404:
                raise
        for rule in rules or []:
            if rule.get("type") == "merge_queue":
                return None
            params = rule.get("parameters") or {}
            if rule.get("type") == "required_status_checks" and params.get(
                "strict_required_status_checks_policy"
            ):
                return None  # a ruleset's "require branches to be up to date"
        try:
            got: _GitHubProtection = self.call(
                "GET", f"repos/{self.repo}/branches/{quote(branch)}/protection"
            )
        except ApiError as e:
            if e.status == 404:
                return f"{branch} is not protected: the forge would merge a head never tested on its tip"
            if e.status == 403:
                return (
                    f"{branch}'s protection cannot be read with this token (it needs "
                    "administration: read), and no ruleset demands up-to-date heads"
                )
            raise
        checks = got.get("required_status_checks") or {}
        if checks.get("strict"):
            return None
        return (
            f"{branch}'s protection does not require branches to be up to date (strict status "
            "checks) and it has no merge queue: an untested tree could land"
        )

    def open_issue(self, *, title: str, body: str) -> int:
        got: _GitHubIssue = self.call(
            "POST", f"repos/{self.repo}/issues", {"title": title, "body": body}
        )
        return int(got["number"])

    def close_issue(self, number: int) -> None:
        self.call("PATCH", f"repos/{self.repo}/issues/{number}", {"state": "closed"})


class GitLab(_Api):
    tool = "glab"

    def __init__(self, repo: str) -> None:
        self.project = f"projects/{quote(repo, safe='')}"

    def _pull(self, got: _GitLabMergeRequest) -> Pull:
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
        got: list[_GitLabMergeRequest] | None = self.call(
            "GET", f"{self.project}/merge_requests?state=opened&source_branch={quote(branch)}"
        )
        return self._pull(got[0]) if got else None

    def open_pull(self, *, head: str, base: str, title: str, body: str) -> Pull:
        got: _GitLabMergeRequest = self.call(
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
        got: _GitLabMergeRequest = self.call("GET", f"{self.project}/merge_requests/{number}")
        return self._pull(got)

    def merge(self, number: int, *, sha: str, method: str, title: str) -> str:
        try:
            got: _GitLabMergeRequest = self.call(
                "PUT",
                f"{self.project}/merge_requests/{number}/merge",
                {"sha": sha, "squash": method == "squash", "squash_commit_message": title},
            )
        except ApiError as e:
            if e.status in (405, 406, 409, 422):
                raise Refused(f"the forge refused the merge of !{number}: {e.message}") from None
            raise
        return str(got.get("squash_commit_sha") or got.get("merge_commit_sha") or "")

    def has_queue(self, branch: str) -> bool:
        got: _GitLabProject = self.call("GET", self.project)
        return bool(got.get("merge_trains_enabled"))

    def enqueue(self, pull: Pull, *, sha: str) -> None:
        """Onto the merge train, naming the verified head (``sha``)."""
        try:
            self.call(
                "POST",
                f"{self.project}/merge_trains/merge_requests/{pull.number}",
                {"sha": sha, "when_pipeline_succeeds": True},
            )
        except ApiError as e:
            if e.status in (400, 405, 409, 422):
                raise Refused(f"the forge refused to queue !{pull.number}: {e.message}") from None
            raise

    def landing_guard(self, branch: str) -> str | None:
        got: _GitLabProject = self.call("GET", self.project)
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
        got: _GitLabIssue = self.call(
            "POST", f"{self.project}/issues", {"title": title, "description": body}
        )
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
