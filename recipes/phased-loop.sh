#!/usr/bin/env bash
# phased-loop.sh -- the ratchet over a whole TASKS.md, one ready task after another.
#
#   recipes/phased-loop.sh [--contract loop.yaml] [--reset-path data/] [--max-rounds N]
#                          [--notify CMD] [--reproduce] [TASKS.md]
#
# Options: as loop.sh's (--max-rounds per task; --notify also at the end of the run, with
# the report on stdin, LK_EVENT=end).
#
# `lk-plan next` picks the first ready task (open, its dependencies done; a parked task
# blocks its dependents) and hands out its attempt document with the task's scope applied
# to the contract. loop.sh runs it: GOAL: items go through lk-judge after their checks;
# a task is marked done only after its commit landed; a parked task is marked parked and
# its retrospective lands in the memory file. A task parked after its diff went over its
# estimate (its budget:) is re-split: `lk-plan split --over-estimate --commit` has the
# model (the contract's judge) split that task only into slices nested under it, commits
# the split, and they run next. The run ends with `lk report`. The run holds the work
# tree's lock throughout (lk task begin), and finishes first whatever a run that stopped
# left half done.
#
# Exit: 0 every task of TASKS.md done; 21 some task is parked (in this run or an
# earlier one) or left open with nothing ready to run (its dependencies parked); 30 cancelled; 40 a commit
# failed (the run stops at once: the checklist never advances past a commit that did not
# land, or the branch moved under it); 41 a task came back after it was handled; 4 another
# loop runs in this work tree; other codes from the failing command.
# shellcheck disable=SC2153,SC2154 # LK_* and the workspace's names come from eval of lk's --shell output
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/log.sh"
LK_PROG=phased-loop.sh

contract='' tasks='' loop_args=()
while [ $# -gt 0 ]; do
    case $1 in
    --contract) contract=${2:?--contract needs a file}; shift 2 ;;
    --reset-path | --max-rounds) loop_args+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --reproduce) loop_args+=(--reproduce); shift ;;
    --notify) export LK_NOTIFY=${2:?--notify needs a command}; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) printf 'phased-loop.sh: unknown option %s\n' "$1" >&2; exit 2 ;;
    *) tasks=$1; shift ;;
    esac
done
out=$(lk workspace ${contract:+--contract "$contract"} </dev/null) || exit $?
eval "$out" # root, state_dir, contract (--contract, else ./loop.yaml), memory, task
LK_STATE=$state_dir
[ -n "$contract" ] || lk_die 2 "no contract: pass --contract FILE or add loop.yaml"
tasks=${tasks:-$root/TASKS.md}
[ -f "$tasks" ] || lk_die 3 "$tasks: no such file"
# The lock for the whole run (each loop.sh works under it), and what a stopped run left.
lk task begin --owner $$ >/dev/null || exit $?
export LK_LOCK_OWNER=$$ # the loop.sh this run starts works under its lock
trap 'lk task end --owner $$ >/dev/null' EXIT
trap 'lk_log "interrupted"; exit 130' INT TERM

report() { lk report || lk_log "lk report exited $?"; }
# resplit TASK: the task went over its estimate? Then the model splits it (that task only),
# committed; fails when it did not, or no valid split came. A task within its estimate is
# no one's error (nothing said); one over it with no model to split it is said as such.
resplit() {
    local out=$LK_STATE/runs/split-$1 rc=0
    lk-plan split "$tasks" --task "$1" --over-estimate --commit --contract "$contract" >"$out.json" 2>"$out.err" || rc=$?
    if [ "$rc" = 0 ]; then
        cat "$out.err" >&2; lk_log "$1: over its estimate: re-split; its slices run next"; return 0
    fi
    if [ "$rc" = 3 ] && grep -q -- ' --over-estimate: ' "$out.err"; then return 1; fi # within it
    if [ "$rc" = 3 ] && grep -q -- ' --provider: ' "$out.err"; then
        lk_log "$1 went over its estimate; not re-split: $(sed -n 's/^.*--provider: //p' "$out.err" | head -n 1)"
        return 1
    fi
    cat "$out.err" >&2; return 1
}

handled=' ' parked=0 completed=0 next=$LK_STATE/runs/next.json
mkdir -p "$LK_STATE/runs"
while :; do
    # The task's own contract (its scope applied) travels in the document: loop.sh is NOT
    # given --contract, or every command would reload loop.yaml and lose the task's scope.
    lk-plan next "$tasks" --contract "$contract" >"$next"
    rc=$?
    case $rc in 0) ;; 1) break ;; *) report; lk_die "$rc" "lk-plan next failed with exit $rc" ;; esac
    eval "$(lk workspace <"$next")" # task: the id
    case $handled in *" $task "*)
        report; lk_die 41 "task $task came back after it was handled: its mark did not stick; stopping" ;;
    esac
    handled="$handled$task "
    "$HERE/loop.sh" --tasks "$tasks" ${loop_args[@]+"${loop_args[@]}"} "$next"
    rc=$?
    case $rc in
    0) completed=$((completed + 1)) ;;
    20 | 21 | 22) resplit "$task" || parked=$((parked + 1)) ;;
    30) report; lk_log "cancelled during $task; stopping"; exit 30 ;;
    *) report; lk_die "$rc" "task $task stopped the run (loop.sh exit $rc); the checklist is left as it is" ;;
    esac
done

report
summary=$LK_STATE/runs/report.json
lk report --json >"$summary" 2>/dev/null || : >"$summary"
lk_notify end "$summary" # the end of the run: the report on stdin
# The checklist decides, not this run's count: a rerun after a park has nothing ready to
# run, yet the parked task is not done.
open=$(grep -cE '^[[:space:]]*[-*+][[:space:]]+\[ \]' "$tasks" || true)
left=$(grep -cE '^[[:space:]]*[-*+][[:space:]]+\[!\]' "$tasks" || true)
lk_log "done: $completed completed, $parked parked in this run; ${open:-0} open and ${left:-0} parked item(s) left"
if [ "$parked" -gt 0 ] || [ "${open:-0}" -gt 0 ] || [ "${left:-0}" -gt 0 ]; then
    exit 21
fi
exit 0
