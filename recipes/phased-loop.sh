#!/usr/bin/env bash
# phased-loop.sh -- the ratchet over a whole TASKS.md, one ready task after another.
#
#   recipes/phased-loop.sh [--contract loop.yaml] [--reset-path data/] [--max-rounds N]
#                          [--notify CMD] [--reproduce] [TASKS.md]
#
# `lk-plan next` picks the first ready task (open, its dependencies done; a parked task
# blocks its dependents) and hands out its attempt document with the task's scope applied
# to the contract. loop.sh runs it: GOAL: items go through lk-judge after their checks;
# a task is marked done only after its commit landed; a parked task is marked parked and
# its retrospective lands in the memory file. The run ends with `lk report`.
#
# Exit: 0 every task of TASKS.md done; 21 some task is parked (in this run or an
# earlier one) or left open with nothing ready to run (its dependencies parked); 30 cancelled; 40 a commit
# failed (the run stops at once: the checklist never advances past a commit that did not
# land, or the branch moved under it); 41 a task came back after it was handled; 4 another
# loop runs in this work tree; other codes from the failing command.
set -u

case ${BASH_SOURCE[0]} in */*) HERE=${BASH_SOURCE[0]%/*} ;; *) HERE=. ;; esac
HERE=${HERE:-/} # a script at /
HERE=$(cd "$HERE" && pwd)
# shellcheck source=recipes/lib.sh
. "$HERE/lib.sh"
LK_PROG=phased-loop.sh

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    cat <<'EOF'

Options:
  --contract FILE     the loop contract (default: ./loop.yaml)
  --reset-path PATH   an ignored path to reset on park (repeatable; adds to RESET_PATHS)
  --max-rounds N      a safety net over lk-decide's own budgets, per task (default 50)
  --notify CMD        run CMD (sh -c) on each task's complete, park, block and cancel,
                      with the decided document on stdin and LK_EVENT set, and at the
                      end of the run with the report on stdin (LK_EVENT=end); also
                      $LK_NOTIFY: notify-send, ntfy, a webhook through curl...
  --reproduce         first run the checks on the untouched tree (no worker)
EOF
}


contract='' tasks='' loop_args=()
while [ $# -gt 0 ]; do
    case $1 in
    --contract) contract=$(lk_abspath "${2:?--contract needs a file}"); shift 2 ;;
    --reset-path) loop_args+=(--reset-path "${2:?--reset-path needs a path}"); shift 2 ;;
    --max-rounds) loop_args+=(--max-rounds "${2:?--max-rounds needs a number}"); shift 2 ;;
    --reproduce) loop_args+=(--reproduce); shift ;;
    --notify) export LK_NOTIFY=${2:?--notify needs a command}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) printf 'phased-loop.sh: unknown option %s\n' "$1" >&2; usage >&2; exit 2 ;;
    *) tasks=$(lk_abspath "$1"); shift ;;
    esac
done
lk_setup_state
tasks=${tasks:-$LK_ROOT/TASKS.md}
if [ -z "$contract" ]; then
    for name in loop.yaml loop.yml loop.json; do
        if [ -f "$LK_ROOT/$name" ]; then contract=$LK_ROOT/$name; break; fi
    done
fi
[ -n "$contract" ] || lk_die 2 "no contract: pass --contract FILE or add loop.yaml"
[ -f "$tasks" ] || lk_die 3 "$tasks: no such file"
cd "$LK_ROOT" || exit "$LK_EXIT_SETUP"
lk_lock # held for the whole run: each loop.sh it starts runs under it
trap 'lk_log "interrupted"; exit 130' INT TERM

report() {
    lk report || lk_log "lk report exited $?"
}

handled=' '
parked=0
completed=0
next=$LK_STATE/runs/next.json
mkdir -p "$LK_STATE/runs"
while :; do
    # The task's own contract (its scope applied) travels in the document: loop.sh is NOT
    # given --contract, or every command would reload loop.yaml and lose the task's scope.
    lk-plan next "$tasks" --contract "$contract" >"$next"
    rc=$?
    case $rc in
    0) ;;
    1) break ;; # nothing ready (its summary is on stderr)
    *) report; lk_die "$rc" "lk-plan next failed with exit $rc" ;;
    esac
    id=$(lk_json "$next" .task.id)
    [ -n "$id" ] || lk_die 3 "lk-plan next printed no task id"
    case $handled in
    *" $id "*)
        report
        lk_die "$LK_EXIT_RUNAWAY" "task $id came back after it was handled: its mark did not stick; stopping"
        ;;
    esac
    handled="$handled$id "
    lk_log "task $id ($(lk_json "$next" .task.kind)): $(lk_one_line "$(lk_json "$next" .task.text)" 120)"
    "$HERE/loop.sh" --tasks "$tasks" ${loop_args[@]+"${loop_args[@]}"} "$next"
    rc=$?
    case $rc in
    0) completed=$((completed + 1)) ;;
    20 | 21 | 22) parked=$((parked + 1)) ;;
    30)
        report
        lk_log "cancelled during $id; stopping"
        exit 30
        ;;
    *)
        report
        lk_die "$rc" "task $id stopped the run (loop.sh exit $rc); the checklist is left as it is"
        ;;
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
