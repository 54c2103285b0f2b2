"""lk-invoke: run one bounded worker attempt and print its normalized ``run`` record.

Usage:  lk-plan next TASKS.md --contract loop.yaml | lk-invoke
        lk-invoke --contract loop.yaml [--provider claude|codex|command|acp|gemini|qwen
                  |opencode|pi|copilot] [--command CMD]
                  [--model M] [--resume ID] [--timeout S] [--quiet]
        lk-invoke --dry-run ...             print argv and handoff as JSON, run nothing
        lk-invoke --transcript FILE         normalize a saved stream, run nothing

Input:  an attempt document on stdin (read only when piped): its task, contract and, for a
        retry, the previous attempt's verify/diff/judge/decision sections as feedback.
Output: the attempt document with ``run`` added (schemas/run.json); with nothing piped,
        the run section alone. The native stream, stderr and the handoff are saved under
        .loopkit/artifacts/<attempt_id>/. While the worker runs, stderr gets one line per
        tool call, API retry and error, with the elapsed time and the tokens and cost so
        far (throttled; coloured on a terminal unless NO_COLOR; --quiet: none).

Exit codes: 0 the worker ran and ended a turn normally; 1 it failed (error, timeout,
        stuck, cancelled, max turns...) -- the record is still printed; 3 bad input;
        4 the provider CLI (or the ACP agent) is not installed (the message says how to
        install it).
"""

from __future__ import annotations

from typing import Any

from loopkit.cli import options
from loopkit.cli._entry import command, declared
from loopkit.exitcodes import SHARED_HELP
from loopkit.worker import providers

EPILOG = (
    """\b
Exit codes:
  0   the worker ran and ended a turn normally (stop_reason completed)
  1   the worker failed: error, timeout, stuck, cancelled, max turns (record still printed)
  4   the provider CLI is not installed (npm install -g @anthropic-ai/claude-code
      or @openai/codex, or `make agents`), or the ACP agent (docs/acp.md), or the
      command worker's program; the sandbox cannot be set up (a path it binds missing,
      or one the worker cannot write or read): one line names it; the worker never ran

"""
    + SHARED_HELP
)


@command(epilog=EPILOG)
@declared(options.INVOKE, providers=providers.names())
def main(**kw: Any) -> int:
    """Run one bounded worker attempt (claude, codex, an ACP agent, gemini, qwen, opencode, pi,
    copilot or any command); print its run.

    The worker gets a handoff built from the task, the contract and the previous attempt's
    feedback; it is stopped on its timeout, on `lk cancel`, or when it repeats one failing
    tool call (stop_reason stuck). Its native stream is saved under .loopkit/artifacts/.
    """
    from loopkit import stages  # not at the top: --help loads none of it

    return stages.invoke(**kw)
