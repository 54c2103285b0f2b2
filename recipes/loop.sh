#!/usr/bin/env bash
# loop.sh -- one task, the ratchet.
#
#   lk-plan next TASKS.md --contract loop.yaml > next.json
#   recipes/loop.sh [--tasks TASKS.md] next.json
#   recipes/loop.sh --contract loop.yaml --task-id fix-parser --task "Fix blank lines"
#
# Each round is one `lk attempt`: admission (lk-decide --admit), then lk-invoke | lk-diff |
# lk-verify [| lk-judge for a GOAL] | lk-decide -- the published commands themselves, run
# one after another in one process -- each stage's document kept under
# .loopkit/runs/<task>/<run>/ so a failure mid-pipe is visible and replayable.
#
#   complete (0)        the tree the checks ran on (verify.tree) is committed -- never a
#                       fresh `git add -A` -- with `git commit-tree` on the commit the task
#                       began from, and the branch moved to it with `git update-ref` (old
#                       value as a guard). No hook runs: the contract's criteria are the
#                       gate. If the work tree changed after the checks ran, it is saved
#                       under refs/loopkit/<task>/<attempt>-after-verify before the index
#                       and the work tree are brought to the commit. A commit that does not
#                       land stops the loop: exit 40, the task NOT marked. With --tasks the
#                       task is marked done only after its commit landed.
#   retry/replan (10/11) the attempt's tree is saved under refs/loopkit/<task>/<attempt>;
#                       the broken code stays on disk; the decided document (with its
#                       feedback) is piped into the next lk-invoke; the worker's session
#                       is resumed when it has one; a transient failure waits backoff_s.
#   blocked/failed/     the whole work tree (untracked files too) is saved under
#   exhausted (20/21/22) refs/loopkit/<task>/<attempt> BEFORE the revert; then the index
#                       and the work tree are brought back to where the task began (files
#                       that differ rewritten, untracked debris removed), RESET_PATHS wiped
#                       (directories recreated empty); a retrospective goes to the
#                       contract's memory file; the task is parked (--tasks); memory and
#                       checklist are committed.
#   cancelled (30)      the tree is saved under refs/loopkit/ and left as it is.
#
# A commit or a park refuses when the branch moved since the task began (a commit made
# meanwhile, the worker's own commit or `git reset`, a checkout): the tree is saved under
# refs/loopkit/, nothing is reset, exit 40. One loop per work tree: a second loop on the
# same checkout is refused at once (exit 4). Every git call runs with hooks, fsmonitor,
# replace objects and the repository's own filter drivers switched off (lib.sh's lk_git).
#
# Exit: 0 complete and committed; 20/21/22 parked; 30 cancelled; 40 a commit (or the save
# before a revert) failed -- the loop stopped, nothing marked; 41 runaway (--max-rounds);
# 4 setup (not a repository, dirty tree, unsafe RESET_PATHS, another loop running here);
# any other code is the exit
# code of the loopkit command that failed (2 usage, 3 bad input, 4 environment, 70 bug).
#
# Environment: RESET_PATHS="data/ app.db" (ignored paths reset on park), LOOPKIT_STATE_DIR,
# LK_NOTIFY (as --notify),
# MEMORY_FILE (instead of the contract's `memory`),
# LK_RESUME=never (never pass --resume), LK_JSON=python (read JSON without jq), LK_EARLY=0
# (start the first round's lk attempt only when the round begins, not beside the loop's own work), LK_VERBOSE=1
# (every stage's exit on stderr too; it is always in .loopkit/recipes.log).
# Portable to the bash 3.2 of macOS (no empty-array expansions under set -u).
set -u

case ${BASH_SOURCE[0]} in */*) HERE=${BASH_SOURCE[0]%/*} ;; *) HERE=. ;; esac
HERE=${HERE:-/} # a script at /
HERE=$(cd "$HERE" && pwd)
# shellcheck source=recipes/lib.sh
. "$HERE/lib.sh"
LK_PROG=loop.sh

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    cat <<'EOF'

Options:
  --contract FILE     the loop contract (default: the document's own, else ./loop.yaml)
  --tasks FILE        the TASKS.md this task comes from: mark it done / parked
  --task-id ID        start from a task given here instead of a document
  --task TEXT         the task's text (with --task-id)
  --goal              the task is a GOAL (judged by lk-judge after its checks pass)
  --reset-path PATH   an ignored path to reset on park (repeatable; adds to RESET_PATHS)
  --max-rounds N      a safety net over lk-decide's own budgets (default 50)
  --notify CMD        run CMD (sh -c) on complete, park, block and cancel, with the
                      decided document on stdin and LK_EVENT set (also $LK_NOTIFY):
                      notify-send, ntfy, a webhook through curl...
  --allow-dirty       start even if the work tree has uncommitted changes: they are saved
                      as refs/loopkit/<task>/user-start, the worker's change is measured
                      from there, a park restores them (staged ones staged); a commit
                      lands them as a commit of their own before the task's
  --reproduce         first run the checks on the untouched tree (no worker): the ledger
                      records the failure, so a first fix that fails the same way replans
EOF
}


contract='' tasks='' start='' task_id='' task_text='' task_kind=task max_rounds=50 allow_dirty=0 reproduce=0
while [ $# -gt 0 ]; do
    case $1 in
    --contract) lk_abspath "${2:?--contract needs a file}" contract; shift 2 ;;
    --tasks) tasks=$(lk_abspath "${2:?--tasks needs a file}"); shift 2 ;;
    --task-id) task_id=${2:?--task-id needs an id}; shift 2 ;;
    --task) task_text=${2:?--task needs text}; shift 2 ;;
    --goal) task_kind=goal; shift ;;
    --reset-path) export RESET_PATHS="${RESET_PATHS:-} ${2:?--reset-path needs a path}"; shift 2 ;;
    --max-rounds) max_rounds=${2:?--max-rounds needs a number}; shift 2 ;;
    --allow-dirty) allow_dirty=1; shift ;;
    --notify) export LK_NOTIFY=${2:?--notify needs a command}; shift 2 ;;
    --reproduce) reproduce=1; shift ;;
    -h | --help) usage; exit 0 ;;
    -) start=-; shift ;;
    -*) printf 'loop.sh: unknown option %s\n' "$1" >&2; usage >&2; exit 2 ;;
    *) start=$(lk_abspath "$1"); shift ;;
    esac
done
case $max_rounds in '' | *[!0-9]*) printf 'loop.sh: --max-rounds needs a number\n' >&2; exit 2 ;; esac

# The first round's lk attempt loads from now on, beside everything below; it answers the
# workspace question too (lk_attempt_early, lk_workspace_call). The EXIT trap ends it, and
# removes the loop's scratch files (lk_on_exit).
trap lk_on_exit EXIT
lk_attempt_early || true

# --- the start document, then the workspace it names ------------------------------------
# Built outside the repository first: its contract may name the state folder.
start_doc=''
if [ -z "$task_id" ] && { [ -z "$start" ] || [ "$start" = - ]; } && [ -t 0 ]; then
    usage >&2
    exit 2
fi
lk_scratch_file "${TMPDIR:-/tmp}/loopkit-start" LK_TMP_START || exit "$LK_EXIT_SETUP"
tmp_start=$LK_TMP_START
if [ -n "$task_id" ]; then
    lk_task_doc "$task_id" "${task_text:-$task_id}" "$task_kind" start_doc
    printf '%s' "$start_doc" >"$tmp_start" || lk_die 3 "cannot build the start document"
elif [ -n "$start" ] && [ "$start" != - ]; then
    cp -- "$start" "$tmp_start" || lk_die 3 "$start: cannot read the start document"
else
    cat >"$tmp_start"
fi
LK_START_EARLY=1 # the start check walks the tree beside the workspace question (lib.sh)
lk_setup_state "$contract" "$tmp_start"
cd "$LK_ROOT" || exit "$LK_EXIT_SETUP"
lk_lock # before anything is written: a second loop here is refused at once
lk_reset_paths_check
trap 'lk_log "interrupted: the tree is left as it is"; exit 130' INT TERM

lk_now run_id %Y%m%dT%H%M%SZ
run_id=$run_id-$$
task_id=$LK_WS_TASK
[ -n "$task_id" ] || lk_die 3 "the start document names no task (.task.id): give a document from lk-plan next, or --task-id"
safe_task='' short_base=''
lk_safe_name "$task_id" safe_task
run_dir=$LK_STATE/runs/$safe_task/$run_id
mkdir -p "$run_dir" || exit "$LK_EXIT_SETUP"
if [ -n "$start_doc" ]; then # written again (a builtin); the scratch copy goes at the end
    printf '%s' "$start_doc" >"$run_dir/start.json" || exit "$LK_EXIT_SETUP"
else
    mv -- "$tmp_start" "$run_dir/start.json" && LK_TMP_START=
fi

LK_TASK_ID=$task_id LK_TASKS=$tasks LK_RUN_DIR=$run_dir LK_LABEL=start
lk_begin "$allow_dirty"
lk_mark_attempt # a loop killed from here on is recovered at the next start
base=$LK_DIFF_BASE # what lk-diff measures the worker's change from

cargs=()
[ -z "$contract" ] || cargs=(--contract "$contract")

# --- one stage: stdin from a file, stdout to a file, stderr shown and kept ------------------

expect() {
    # expect RC NAME OK-CODES...: stop the loop (tree left as it is) on any other code.
    local rc=$1 name=$2
    shift 2
    local ok
    for ok in "$@"; do [ "$rc" = "$ok" ] && return 0; done
    lk_die "$rc" "$name failed with exit $rc; the tree is left as it is; see $run_dir"
}

settle() {
    # settle EXIT [DOC]: act on a decision (DOC, default $p-decide.json; admission's refusal
    # too). Returns (to go round again) only on retry or replan, with `input` and `session`
    # set for the next attempt; every other way exits.
    local drc=$1 outcome backoff ref why
    last=${2:-$p-decide.json}
    lk_doc "$last" || lk_die 70 "cannot read $last"
    LK_LABEL=${LK_DOC_ATTEMPT:-$round}
    outcome=$LK_DOC_OUTCOME
    lk_one_line "$LK_DOC_REASON" 200 why
    lk_log "$task_id attempt $LK_LABEL: ${outcome:-?} -- $why"
    case $drc in
    0) lk_complete "$last" ;;
    10 | 11)
        # Every attempt is kept: the red tree is saved before the next one starts on it.
        lk_save "${outcome:-retry}" >/dev/null || exit "$LK_EXIT_NO_COMMIT"
        backoff=$LK_DOC_BACKOFF
        case $backoff in
        '' | 0 | 0.0 | *[!0-9.]*) ;;
        *)
            lk_log "$task_id: waiting ${backoff}s before the next attempt ($LK_DOC_CLASS)"
            sleep "$backoff"
            ;;
        esac
        session=$LK_DOC_SESSION
        input=$last
        ;;
    20) lk_park 20 "${outcome:-blocked}" "$last" ;;
    21) lk_park 21 "${outcome:-failed}" "$last" ;;
    22) lk_park 22 "${outcome:-budget_exhausted}" "$last" ;;
    30)
        ref=$(lk_save cancelled) || exit "$LK_EXIT_NO_COMMIT"
        lk_log "$task_id: cancelled; the tree is left as it is (saved as $ref); 'lk cancel --clear' lifts the cancellation"
        lk_notify cancelled "$last"
        exit 30
        ;;
    *) expect "$drc" "lk attempt" 0 10 11 20 21 22 30 ;;
    esac
}

# --- the rounds ---------------------------------------------------------------------------
input=$run_dir/start.json
last=$input
round=0
session=
lk_short "$LK_BASE" short_base
lk_log "task $task_id: starting at $short_base; documents in $run_dir"

if [ "$reproduce" = 1 ]; then
    # Round 0: the checks on the untouched tree, no worker. The ledger then holds the
    # failure's fingerprint (a first fix that fails the same way is "no progress": replan)
    # and the first handoff carries the failing output.
    p=$run_dir/0
    lk_log "$task_id: reproducing the failure on the untouched tree (no worker runs)"
    lk_stage diff "$input" "$p-diff.json" lk-diff ${cargs[@]+"${cargs[@]}"} --base "$base"
    expect $? lk-diff 0 1
    lk_stage verify "$p-diff.json" "$p-verify.json" lk-verify ${cargs[@]+"${cargs[@]}"}
    vrc=$?
    expect "$vrc" lk-verify 0 1
    if [ "$vrc" = 0 ]; then
        # Already green: nothing to reproduce, no attempt spent; the worker is told.
        lk_log "$task_id: the checks already pass on the untouched tree: no failure to reproduce, no attempt spent"
        lk_add_note "$input" "The acceptance checks already pass on the untouched tree (reproduced before this attempt, no attempt spent): the change must keep them passing; make sure it is still needed." ||
            lk_die 3 "cannot note the reproduction in $input"
    else
        lk_stage decide "$p-verify.json" "$p-decide.json" lk-decide ${cargs[@]+"${cargs[@]}"}
        settle $?
    fi
fi

while :; do
    round=$((round + 1))
    if [ "$round" -gt "$max_rounds" ]; then
        ref=$(lk_save "runaway") || exit "$LK_EXIT_NO_COMMIT"
        lk_die "$LK_EXIT_RUNAWAY" "$task_id: more than $max_rounds rounds; stopped (tree left as it is, saved as $ref)"
    fi
    p=$run_dir/$round
    rargs=()
    if [ -n "$session" ] && [ "${LK_RESUME:-auto}" != never ]; then
        rargs=(--resume "$session")
    fi
    # Admission refusing -- a spent budget (22), a usage limit until its reset time (20),
    # `lk cancel` (30) -- runs nothing; its document (P-admit.json) says why.
    lk_attempt "$input" "$p" "$base" ${rargs[@]+"${rargs[@]}"}
    rc=$?
    case $rc in
    0 | 10 | 11 | 20 | 21 | 22 | 30) settle "$rc" "$LK_LAST" ;;
    *) expect "$rc" "lk attempt" 0 10 11 20 21 22 30 ;; # the failing stage is named above
    esac
done
