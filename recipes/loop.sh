#!/usr/bin/env bash
# loop.sh -- one task, the ratchet (docs/recipes.md explains it line by line).
#
#   recipes/loop.sh [--tasks TASKS.md] next.json     # from lk-plan next TASKS.md > next.json
#   recipes/loop.sh --contract loop.yaml --task-id fix-parser --task "Fix blank lines"
#
# Options: --contract FILE, --tasks FILE (marked done / parked), --task-id ID --task TEXT
# [--goal], --reset-path PATH (an ignored path a park resets; adds to RESET_PATHS),
# --max-rounds N (50), --notify CMD (sh -c on complete, park, block, cancel: the decided
# document on stdin, LK_EVENT set), --allow-dirty (start on uncommitted changes, saved as
# refs/loopkit/<task>/user-start), --reproduce (the checks on the untouched tree first),
# --fast (round 1 inside `lk task begin --attempt`, each step inside `lk attempt --settle`).
#
# 1. begin  2. each round one `lk attempt`, its exit the decision  3. its `lk task` step:
#   0 complete      land: exactly the tree the checks ran on committed, then marked done
#   10/11 retry     save under refs/loopkit/<task>/<n>; the decided document feeds the next
#   20/21/22 park   save, revert, reset RESET_PATHS, retrospective, mark parked, commit
#   30 cancelled    cancel: save; the tree left as it is
# One loop per work tree; one stopped anywhere (kill -9, a full disk) is finished by the
# plain rerun. Exit: those codes; 40 landing or park refused (the branch moved); 41
# runaway; 4 setup; others the failing command's (2 usage, 3 bad input, 70 bug).
# Environment: RESET_PATHS, LOOPKIT_STATE_DIR, LK_NOTIFY, MEMORY_FILE, LK_RESUME=never, LK_VERBOSE=1.
# shellcheck disable=SC2153,SC2154 # LK_* come from eval of lk's --shell output
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/log.sh" # logging and notifying; the ratchet itself is `lk task`
LK_PROG=loop.sh
usage() { awk 'NR > 1 && /^# shellcheck/ { next } NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

begin=() cargs=() first=() max_rounds=50 fast=0 taken='' start=''
while [ $# -gt 0 ]; do
    case $1 in
    --contract) cargs=(--contract "${2:?--contract needs a file}"); shift 2 ;;
    --tasks | --task-id | --task) begin+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --goal | --allow-dirty) begin+=("$1"); shift ;;
    --reset-path) export RESET_PATHS="${RESET_PATHS:-} ${2:?--reset-path needs a path}"; shift 2 ;;
    --max-rounds) max_rounds=${2:?--max-rounds needs a number}; shift 2 ;;
    --notify) export LK_NOTIFY=${2:?--notify needs a command}; shift 2 ;;
    --reproduce) first+=(--reproduce); shift ;;
    --fast) fast=1 taken=taken; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) printf 'loop.sh: unknown option %s\n' "$1" >&2; usage >&2; exit 2 ;;
    *) start=$1; shift ;;
    esac
done
case $max_rounds in '' | *[!0-9]*) printf 'loop.sh: --max-rounds needs a number\n' >&2; exit 2 ;; esac
case " ${begin[*]-} " in *" --task-id "*) ;; *) [ -n "$start" ] || [ ! -t 0 ] || { usage >&2; exit 2; } ;; esac

# 1. Begin: the lock, the recovery of a loop that stopped, where the task starts -- and in
# the same process round 0 (--reproduce) and with --fast round 1, LK_ROUND the last.
[ "$fast" = 0 ] || [ "$max_rounds" = 0 ] || first+=(--attempt)
out=$(exec lk task begin ${start:+"$start"} ${cargs[@]+"${cargs[@]}"} ${begin[@]+"${begin[@]}"} --owner $$ --shell ${first[@]+"${first[@]}"})
rc=$?
[ -n "$out" ] || exit "$rc" # begin refused (its error is above)
unset LK_ROUND; eval "$out"
trap '[ -n "${ended:-}" ] || lk task end --owner $$ >/dev/null' EXIT # the lock released; an open task kept
[ -z "${LK_FINISHED:-}" ] || exit "$LK_FINISHED" # the stopped loop's task, finished by begin
trap 'lk_log "interrupted: the tree is saved; the rerun finishes the task"; exit 130' INT TERM

settle() { # 3. settle EXIT [taken]: the decision's `lk task` step (unless taken), then said
    local rc=$1 doc label=${LK_DOC_ATTEMPT:-$round} out='' code=0
    lk_note "$LK_TASK_ID round $round: lk attempt exited $rc"
    for doc in "$p-decide.json" "$p-admit.json" ''; do [ ! -s "$doc" ] || break; done
    case $rc in 0 | 10 | 11 | 2[012] | 30) [ -s "$doc" ] || lk_die 70 "$p: no decided document" ;;
    *) lk_log "stopped: lk attempt exited $rc (its error is above); the rerun finishes the task; see $LK_RUN_DIR"; exit "$rc" ;; esac
    if [ -z "${2:-}" ]; then
        case $rc in
        0) out=$(exec lk task land "$doc" --label "$label" --stat-cache --end --owner $$ --shell) ;;
        10 | 11) out=$(exec lk task save --doc "$doc" --shell) ;;
        20 | 21 | 22) out=$(exec lk task park "$doc" --label "$label" --end --owner $$ --shell) ;;
        30) out=$(exec lk task cancel "$doc" --label "$label" --end --owner $$ --shell) ;;
        esac
        code=$?; eval "$out" # LK_*: the step's result (LK_COMMIT, LK_REF)
        [ "$code" = 0 ] || { lk_log "stopped: lk task exited $code (its error is above); the rerun finishes the task"; exit "$code"; }
    fi
    lk_log "$LK_TASK_ID attempt $label: ${LK_DOC_OUTCOME:-?} -- ${LK_DOC_REASON%%$'\n'*}"
    case $rc in
    0) ended=1; lk_note "committed $LK_TASK_ID as ${LK_COMMIT:0:12}"; lk_notify complete "$doc"; exit 0 ;;
    10 | 11)
        lk_note "saved the work tree of $LK_TASK_ID attempt $label as $LK_REF"
        case ${LK_DOC_BACKOFF:-} in '' | 0 | 0.0 | *[!0-9.]*) ;; *)
            lk_log "$LK_TASK_ID: waiting ${LK_DOC_BACKOFF}s before the next attempt ($LK_DOC_CLASS)"
            sleep "$LK_DOC_BACKOFF" ;; esac
        session=$LK_DOC_SESSION input=$doc ;;
    20 | 21 | 22)
        ended=1; lk_note "parked $LK_TASK_ID (${LK_DOC_OUTCOME:-$rc}); the attempt is saved as $LK_REF"
        if [ "$rc" = 20 ]; then lk_notify blocked "$doc"; else lk_notify parked "$doc"; fi
        exit "$rc" ;;
    30) ended=1; lk_note "$LK_TASK_ID: cancelled; the tree is left as it is (saved as $LK_REF)"
        lk_notify cancelled "$doc"; exit 30 ;;
    esac
}

input=$LK_START round=0 session=
lk_log "task $LK_TASK_ID: starting at ${LK_BASE:0:12}; documents in $LK_RUN_DIR"
[ -z "${LK_ROUND:-}" ] || { round=$LK_ROUND p=$LK_RUN_DIR/$LK_ROUND; settle "$rc" taken; } # begin's

# 2. One round, one process: `lk attempt`, its exit the decision -- and 4. round again.
while round=$((round + 1)); [ "$round" -le "$max_rounds" ]; do
    p=$LK_RUN_DIR/$round rargs=()
    [ -z "$session" ] || [ "${LK_RESUME:-auto}" = never ] || rargs=(--resume "$session")
    [ "$fast" = 0 ] || rargs+=(--settle --owner $$) # the step below, in the attempt's process
    fields=$(exec lk attempt --keep "$p" --shell ${cargs[@]+"${cargs[@]}"} --base "$LK_DIFF_BASE" ${rargs[@]+"${rargs[@]}"} <"$input")
    rc=$?; eval "$fields" # LK_DOC_*: the decision's fields (outcome, reason, session, backoff)
    settle "$rc" "$taken"
done
lk task save runaway --why runaway >/dev/null
lk_die 41 "$LK_TASK_ID: more than $max_rounds rounds; stopped (the tree is saved under refs/loopkit/)"
