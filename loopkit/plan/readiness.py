"""Readiness: which task runs next, and why none can.

A task is ready when it is open, holds no slices and every dependency is done -- declared
ones, and the implied ones of a slice (the slice before it, what its parent waits for). A
parent with slices takes its status from them; a parked task blocks all that wait for it.
"""

from __future__ import annotations

from collections.abc import Mapping

from loopkit.plan.parsing import Plan, Task


def all_depends(t: Task) -> list[str]:
    """Declared dependencies plus the implied ones: a slice waits for the slice before it
    and for whatever its parent waits for (nearest first, each once)."""
    deps = list(t.depends)
    node = t
    while node.parent is not None:  # up the parents in a loop: nesting depth is the file's
        parent = node.parent
        i = parent.slices.index(node)
        if i > 0:
            deps.append(parent.slices[i - 1].id)
        deps.extend(parent.depends)
        node = parent
    return list(dict.fromkeys(deps))


def effective_status(t: Task) -> str:
    """A parent with slices is done when every slice is, parked when any slice is."""
    if t.status != "open" or not t.slices:
        return t.status
    found: dict[int, str] = {}
    stack: list[tuple[Task, bool]] = [(t, False)]
    while stack:  # post-order without recursion: slices first, then their parent
        node, slices_done = stack.pop()
        if node.status != "open" or not node.slices:
            found[id(node)] = node.status
        elif not slices_done:
            stack.append((node, True))
            stack.extend((s, False) for s in node.slices)
        else:
            statuses = [found[id(s)] for s in node.slices]
            if "parked" in statuses:
                found[id(node)] = "parked"
            elif all(s == "done" for s in statuses):
                found[id(node)] = "done"
            else:
                found[id(node)] = "open"
    return found[id(t)]


def blocked_by(t: Task, ids: Mapping[str, Task]) -> list[str]:
    """The dependencies (transitively) that are not done, nearest first."""
    return [d for d in all_depends(t) if d in ids and effective_status(ids[d]) != "done"]


def is_ready(t: Task, ids: Mapping[str, Task]) -> bool:
    node = t.parent
    while node is not None:
        if node.status != "open":
            return False  # a parent marked done or parked by hand closes its slices
        node = node.parent
    return t.status == "open" and not t.slices and not blocked_by(t, ids)


def parked_upstream(t: Task, ids: Mapping[str, Task], seen: set[str] | None = None) -> list[str]:
    """The parked tasks ``t`` waits for, directly or through others (depth first)."""
    seen = seen if seen is not None else set()
    out: list[str] = []
    stack = [iter(all_depends(t))]
    while stack:
        for d in stack[-1]:
            if d in seen or d not in ids:
                continue
            seen.add(d)
            if effective_status(ids[d]) == "parked":
                out.append(d)
            else:
                stack.append(iter(all_depends(ids[d])))
                break
        else:
            stack.pop()
    return out


def ready_tasks(plan: Plan) -> list[Task]:
    ids = plan.by_id()
    return [t for t in plan.tasks if is_ready(t, ids)]


def next_task(plan: Plan) -> Task | None:
    """The first ready task in document order: open, no slices, every dependency done."""
    ready = ready_tasks(plan)
    return ready[0] if ready else None


def summary(plan: Plan) -> str:
    """Why nothing is ready, in one line."""
    ids = plan.by_id()
    leaves = [t for t in plan.tasks if not t.slices]  # a leaf's effective status is its own
    done = [t for t in leaves if t.status == "done"]
    parked = [t for t in leaves if t.status == "parked"]
    waiting = [t for t in leaves if t.status == "open" and not is_ready(t, ids)]
    if len(done) == len(leaves):
        return f"nothing ready: all {len(leaves)} tasks are done"
    parts = [f"{len(done)} done"]
    if parked:
        parts.append(f"{len(parked)} parked ({', '.join(t.id for t in parked[:5])})")
    if waiting:
        blocked = []
        for t in waiting[:5]:
            up = parked_upstream(t, ids)
            blocked.append(f"{t.id} behind parked {', '.join(up)}" if up else f"{t.id} waits")
        parts.append(f"{len(waiting)} blocked ({'; '.join(blocked)})")
    return "nothing ready: " + ", ".join(parts)
