#!/usr/bin/env bash
# worktree.sh -- one task, each attempt isolated in its own git worktree.
#
#   lk-plan next TASKS.md --contract loop.yaml > next.json
#   recipes/worktree.sh [--tasks TASKS.md] next.json
#   recipes/worktree.sh --contract loop.yaml --task-id fix-parser --task "Fix blank lines"
#
# Options: --contract FILE, --tasks FILE (mark it done / parked), --task-id ID --task TEXT
# [--goal] (instead of a document), --reset-path PATH (a directory created empty in each
# worktree; adds to RESET_PATHS), --max-rounds N (default 50).
#
# Your checkout is never touched by an attempt: each one runs in a fresh worktree made
# from the branch's head (LK_WORKTREES, default ${TMPDIR:-/tmp}/loopkit-worktrees), with
# the ledger and documents kept in this checkout's .loopkit/ (LOOPKIT_STATE_DIR).
#
#   green (0)            `lk task land --in WORKTREE`: the tree the checks ran on
#                        (verify.tree) is committed (commit-tree, no hook runs) and the
#                        branch fast-forwards to it -- refused when the branch moved since
#                        the attempt began; the worktree is removed. A commit or a
#                        fast-forward that fails stops the loop (exit 40), nothing marked,
#                        the green commit kept under refs/loopkit/<task>/green-<attempt>.
#   red (10/11)          the attempt's tree is saved under refs/loopkit/<task>/<attempt>,
#                        the worktree removed; the next attempt starts clean from the
#                        branch with the decided document (its feedback) piped in. No
#                        --resume: a fresh tree is not the tree the session remembers.
#   parked (20/21/22)    saved, worktree removed, retrospective into the memory file,
#                        task parked (--tasks), memory and checklist committed.
#   cancelled (30)       saved; the worktree is kept for a person to look at.
#
# RESET_PATHS here: ignored paths do not exist in a fresh worktree; directories named in
# RESET_PATHS (data/) are created empty in each one, so the code can open files in them.
#
# Exit codes as loop.sh: 0 committed; 20/21/22 parked; 30 cancelled; 40 a commit or the
# fast-forward failed; 41 runaway; 4 setup (dirty checkout, detached HEAD, another loop
# running in this checkout, ...).
# shellcheck disable=SC2153,SC2154 # LK_* and the workspace's names come from eval of lk's --shell output
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/log.sh"
LK_PROG=worktree.sh
# git for the worktrees themselves: no hook (post-checkout) or fsmonitor a worker planted
g() { git -c core.hooksPath=/dev/null -c core.fsmonitor=false "$@"; }

begin=() cargs=() max_rounds=50 start=''
while [ $# -gt 0 ]; do
    case $1 in
    --contract) cargs=(--contract "$(cd "$(dirname "${2:?--contract needs a file}")" && pwd)/${2##*/}"); shift 2 ;;
    --tasks | --task-id | --task) begin+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --goal) begin+=("$1"); shift ;;
    --reset-path) export RESET_PATHS="${RESET_PATHS:-} ${2:?--reset-path needs a path}"; shift 2 ;;
    --max-rounds) max_rounds=${2:?--max-rounds needs a number}; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) printf 'worktree.sh: unknown option %s\n' "$1" >&2; exit 2 ;;
    *) start=$1; shift ;;
    esac
done
case $max_rounds in '' | *[!0-9]*) printf 'worktree.sh: --max-rounds needs a number\n' >&2; exit 2 ;; esac
g symbolic-ref -q HEAD >/dev/null || lk_die 4 "HEAD is detached: check out the branch the attempts should land on"
out=$(lk task begin ${start:+"$start"} ${cargs[@]+"${cargs[@]}"} ${begin[@]+"${begin[@]}"} --owner $$ --shell) || exit $?
eval "$out"
trap 'lk task end --owner $$ >/dev/null' EXIT
[ -z "${LK_FINISHED:-}" ] || exit "$LK_FINISHED" # the stopped loop's task, finished by begin
export LOOPKIT_STATE_DIR=$LK_STATE # the ledger and documents stay in this checkout
MAIN=$PWD wt_root=${LK_WORKTREES:-${TMPDIR:-/tmp}/loopkit-worktrees} wt=''
mkdir -p "$wt_root" || lk_die 4 "cannot create $wt_root"
drop() { g -C "$MAIN" worktree remove --force "$wt" || rm -rf -- "$wt"; g -C "$MAIN" worktree prune; }

input=$LK_START
lk_log "task $LK_TASK_ID: attempts in worktrees under $wt_root, landing on $(g symbolic-ref --short HEAD)"
for round in $(seq 1 "$max_rounds"); do
    p=$LK_RUN_DIR/$round
    if ! wt=$(mktemp -d "$wt_root/$LK_TASK_ID-$round-XXXXXX") || ! rmdir -- "$wt"; then lk_die 4 "cannot create a worktree folder"; fi
    g worktree add -q --detach "$wt" "$LK_BASE" || lk_die 4 "git worktree add failed"
    for path in ${RESET_PATHS:-}; do # ignored folders the code expects: made empty
        case $path in */) mkdir -p "$wt/$path" ;; *) [ ! -d "$path" ] || mkdir -p "$wt/$path" ;; esac
    done
    fields=$(cd "$wt" && exec lk attempt --keep "$p" --shell ${cargs[@]+"${cargs[@]}"} --base "$LK_BASE" <"$input")
    rc=$?
    eval "$fields"
    lk_note "$LK_TASK_ID round $round: lk attempt exited $rc"
    last=$p-decide.json; [ -s "$last" ] || last=$p-admit.json
    lk_log "$LK_TASK_ID attempt ${LK_DOC_ATTEMPT:-$round}: ${LK_DOC_OUTCOME:-?} -- ${LK_DOC_REASON%%$'\n'*}"
    case $rc in
    0) lk task land "$last" --in "$wt" >/dev/null || lk_die $? "the worktree $wt is kept; see $LK_RUN_DIR"
       drop; exit 0 ;;
    10 | 11)
        lk task save --doc "$last" --in "$wt" >/dev/null || lk_die $? "the worktree $wt is kept"
        drop
        case ${LK_DOC_BACKOFF:-} in '' | 0 | 0.0 | *[!0-9.]*) ;; *) sleep "$LK_DOC_BACKOFF" ;; esac
        input=$last ;;
    20 | 21 | 22) lk task park "$last" --in "$wt" >/dev/null || lk_die $? "the worktree $wt is kept"
        drop; exit "$rc" ;;
    30) lk task cancel "$last" --in "$wt" >/dev/null || exit $?
        lk_log "$LK_TASK_ID: cancelled; the worktree $wt is kept"; exit 30 ;;
    *) lk_die "$rc" "lk attempt failed with exit $rc; the worktree $wt is kept; see $LK_RUN_DIR" ;;
    esac
done
lk_die 41 "$LK_TASK_ID: more than $max_rounds rounds; stopped"
