"""The exit codes every loopkit command shares: published API.

A number here never changes meaning without a schema version bump.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED_CHECK = 1  # a verdict of "no": invalid plan, check failed, policy violated, NOT MET
    USAGE = 2  # click's own usage errors
    BAD_INPUT = 3  # not JSON, fails its schema, an invalid contract given to a command needing one
    ENVIRONMENT = 4  # not a git repository, provider CLI not installed
    INTERNAL = 70  # a bug in loopkit: never mistaken for a verdict
    INTERRUPTED = 130

    # lk-decide
    COMPLETE = 0
    RETRY = 10
    REPLAN = 11
    BLOCKED = 20
    FAILED = 21
    BUDGET_EXHAUSTED = 22
    CANCELLED = 30

    # lk task (the ratchet's transactions) and the recipes
    NOT_LANDED = 40  # a landing or a park refused (the branch moved): nothing committed
    RUNAWAY = 41  # a recipe's safety net: more rounds than --max-rounds

    # lk eval --compare: the verdict on the candidate against the baseline (0: better)
    NO_DIFFERENCE = 50
    INCONCLUSIVE = 51
    WORSE = 52

    # lk attest verify, lk-verify --attest: why a commit's statement does not hold
    ATTEST_MISSING = 60  # no statement where one is required
    ATTEST_UNKNOWN_SIGNER = 61  # signed by a key no allowed signer holds
    ATTEST_CHANGED = 62  # the signature does not cover the statement (its predicate edited)
    ATTEST_REPLAYED = 63  # made in another repository (other root commits)
    ATTEST_CHANGED_TREE = 64  # the commit's tree is not the tree the checks ran on
    ATTEST_MOVED = 65  # the statement is another commit's (the same tree)
    ATTEST_CHECKS = 66  # its checks are not the contract's criteria at that commit


#: Decision outcome -> exit code of lk-decide.
OUTCOME_CODES: dict[str, ExitCode] = {
    "complete": ExitCode.COMPLETE,
    "retry": ExitCode.RETRY,
    "replan": ExitCode.REPLAN,
    "blocked": ExitCode.BLOCKED,
    "failed": ExitCode.FAILED,
    "budget_exhausted": ExitCode.BUDGET_EXHAUSTED,
    "cancelled": ExitCode.CANCELLED,
}

#: The table every command's --help ends with.
SHARED_HELP = """\b
Exit codes shared by every command:
  2   usage error
  3   bad input (not JSON, fails its schema, invalid contract)
  4   environment error (not a git repository, provider CLI missing)
  70  internal error (a bug; see the log named on stderr)
  130 interrupted"""
