"""The judge: a read-only model decides a goal no command can check, and must show its work.

A judge run goes through a provider in read-only mode (claude limited to reading tools,
codex ``--sandbox read-only``). What it says counts only under three conditions:

* its reply ends with a well-formed ``VERDICT:`` line (``loopkit.judge.verdict``) and the run
  ended normally -- a failed, cut or cancelled run is NOT_MET;
* a MET is *grounded*: the judge's own event stream shows it opened at least one file
  of the repository (a successful read tool call, or a read-only shell command such as
  ``cat``/``sed``/``nl``/``rg``). A MET without one is ``grounded: false``,
  ``trusted: false`` and counts as NOT_MET with the reason ``ungrounded``;
* it changed nothing: the working tree's hash is taken before and after, and any change
  (or a write the stream shows succeeding) refuses the verdict and reports what changed.

Its explanation, bounded, becomes ``judge.feedback`` for the next attempt's handoff.
The core raises ``LoopkitError`` subclasses and never prints.

One module per concept: ``prompt`` (the goal, the instructions), ``observation`` (what a
run showed: the files read that ground it, the writes, the tree), ``ruling`` (whether
the verdict stands, the section, the feedback), ``running`` (settings, a live run or a
transcript, one whole judgement). Their names are importable from ``loopkit.judge``.
"""

from __future__ import annotations

from loopkit.judge.observation import Observed as Observed
from loopkit.judge.observation import grounding as grounding
from loopkit.judge.observation import observe as observe
from loopkit.judge.observation import tree_changes as tree_changes
from loopkit.judge.prompt import MAX_CHECK_TAIL_CHARS as MAX_CHECK_TAIL_CHARS
from loopkit.judge.prompt import MAX_GOAL_CHARS as MAX_GOAL_CHARS
from loopkit.judge.prompt import MAX_PROMPT_FILES as MAX_PROMPT_FILES
from loopkit.judge.prompt import Goal as Goal
from loopkit.judge.prompt import build_prompt as build_prompt
from loopkit.judge.prompt import goal_for as goal_for
from loopkit.judge.ruling import MALFORMED as MALFORMED
from loopkit.judge.ruling import MAX_FEEDBACK_CHARS as MAX_FEEDBACK_CHARS
from loopkit.judge.ruling import NO_VERDICT as NO_VERDICT
from loopkit.judge.ruling import NOT_MET as NOT_MET
from loopkit.judge.ruling import NOT_READ_ONLY as NOT_READ_ONLY
from loopkit.judge.ruling import REASONS as REASONS
from loopkit.judge.ruling import RUN_FAILED as RUN_FAILED
from loopkit.judge.ruling import TREE_CHANGED as TREE_CHANGED
from loopkit.judge.ruling import TRUNCATED as TRUNCATED
from loopkit.judge.ruling import UNGROUNDED as UNGROUNDED
from loopkit.judge.ruling import decide as decide
from loopkit.judge.ruling import feedback as feedback
from loopkit.judge.ruling import passed as passed
from loopkit.judge.ruling import section as section
from loopkit.judge.running import DEFAULT_MAX_TURNS as DEFAULT_MAX_TURNS
from loopkit.judge.running import DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S
from loopkit.judge.running import JUDGE_FOLDER as JUDGE_FOLDER
from loopkit.judge.running import MAX_REPLY_CHARS as MAX_REPLY_CHARS
from loopkit.judge.running import Reply as Reply
from loopkit.judge.running import Run as Run
from loopkit.judge.running import Settings as Settings
from loopkit.judge.running import evaluate as evaluate
from loopkit.judge.running import from_transcript as from_transcript
from loopkit.judge.running import run as run
from loopkit.judge.running import stream_cwd as stream_cwd
