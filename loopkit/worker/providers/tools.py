"""What each CLI's tools do: a tool's name and arguments -> files read, files written, the
shell command it ran.

One table for every CLI whose stream names its tools, so the parsers share one reading:
a row is ``tool name -> Tool(kind, argument names)``, where ``kind`` is ``read``,
``write`` or ``command`` and the argument names are tried in order (a list value names
several files). A tool not in its CLI's table reads and writes nothing loopkit can see.
A new CLI's table may live here or in its own module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from loopkit.worker.providers.base import RunState, ToolCall, clip_input
from loopkit.worker.providers.shell import files_read_by


class Tool(NamedTuple):
    kind: str  # read | write | command
    args: tuple[str, ...]  # where the path(s) or the command is, first present wins


READ, WRITE, COMMAND = "read", "write", "command"


def _table(path: str, *, read: tuple[str, ...], write: tuple[str, ...]) -> dict[str, Tool]:
    """A CLI whose file tools all name their file by ``path`` and whose shell tool is
    ``bash``."""
    return {
        **dict.fromkeys(read, Tool(READ, (path,))),
        **dict.fromkeys(write, Tool(WRITE, (path,))),
        "bash": Tool(COMMAND, ("command",)),
    }


CLAUDE: dict[str, Tool] = {
    "Read": Tool(READ, ("file_path",)),
    "NotebookRead": Tool(READ, ("notebook_path", "file_path")),
    "Write": Tool(WRITE, ("file_path",)),
    "Edit": Tool(WRITE, ("file_path",)),
    "MultiEdit": Tool(WRITE, ("file_path",)),
    "NotebookEdit": Tool(WRITE, ("notebook_path", "file_path")),
    "Bash": Tool(COMMAND, ("command",)),
}

#: Gemini CLI 0.61 (``replace`` edits; ``read_many_files`` takes ``include`` globs, which
#: name no file, and is left out).
GEMINI: dict[str, Tool] = {
    "read_file": Tool(READ, ("file_path", "absolute_path")),
    "write_file": Tool(WRITE, ("file_path",)),
    "replace": Tool(WRITE, ("file_path",)),
    "run_shell_command": Tool(COMMAND, ("command",)),
}

#: Qwen Code 0.24 (a fork of Gemini CLI whose stream is Claude Code's: its own tool names).
QWEN: dict[str, Tool] = {
    "read_file": Tool(READ, ("file_path", "absolute_path")),
    "write_file": Tool(WRITE, ("file_path",)),
    "edit": Tool(WRITE, ("file_path",)),
    "replace": Tool(WRITE, ("file_path",)),
    "notebook_edit": Tool(WRITE, ("notebook_path",)),
    "run_shell_command": Tool(COMMAND, ("command",)),
}

#: opencode 1.18 (``patch`` and ``multiedit`` name the file as ``edit`` does).
OPENCODE = _table("filePath", read=("read",), write=("write", "edit", "multiedit", "patch"))

#: pi 0.73 (paths relative to the working directory, or absolute).
PI = _table("path", read=("read",), write=("write", "edit"))

#: GitHub Copilot CLI 1.0 (its ``fileEdits`` on completion name what was really written).
COPILOT = _table("path", read=("view",), write=("create", "edit", "str_replace"))


def kind_of(table: Mapping[str, Tool], name: str) -> str | None:
    tool = table.get(name)
    return tool.kind if tool else None


def describe(call: ToolCall, raw: Mapping[str, Any], table: Mapping[str, Tool]) -> ToolCall:
    """``call`` with what its tool does filled in from its raw (unclipped) arguments."""
    tool = table.get(call.name)
    if tool is None:
        return call
    value = next((raw[a] for a in tool.args if raw.get(a) not in (None, "", [])), None)
    if tool.kind == COMMAND:
        if isinstance(value, str):
            call.command = value
            call.files_read.extend(files_read_by(value))
        return call
    paths = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    found = [p for p in paths if isinstance(p, str) and p]
    (call.files_read if tool.kind == READ else call.files_written).extend(found)
    return call


def started(
    state: RunState,
    pending: dict[str, ToolCall],
    call_id: Any,
    name: str,
    raw: Mapping[str, Any],
    table: Mapping[str, Tool],
) -> ToolCall:
    """A tool call a stream began: what it does filled in from ``table``, added to the
    run's ``state`` and, when it has an id, kept in ``pending`` for its result."""
    call = describe(ToolCall(call_id, name, clip_input(raw)), raw, table)
    state.add_tool(call)
    if call.id is not None:
        pending[call.id] = call
    return call
