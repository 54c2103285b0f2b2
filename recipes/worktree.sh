#!/usr/bin/env bash
# worktree.sh -- one task, each attempt isolated in its own git worktree.
#
#   lk-plan next TASKS.md --contract loop.yaml > next.json
#   recipes/worktree.sh [--tasks TASKS.md] next.json
#   recipes/worktree.sh --contract loop.yaml --task-id fix-parser --task "Fix blank lines"
#
# Your checkout is never touched by an attempt: each one runs in a fresh worktree made
# from the branch's head (LK_WORKTREES, default ${TMPDIR:-/tmp}/loopkit-worktrees), with
# the ledger and documents kept in this checkout's .loopkit/ (LOOPKIT_STATE_DIR).
#
#   green (0)            the tree the checks ran on (verify.tree) is committed in the
#                        worktree (lib.sh's lk_commit_verified: commit-tree + update-ref, no
#                        hook runs), then the branch fast-forwards to it (`git merge
#                        --ff-only`, refused when the branch moved since the attempt began);
#                        the worktree is removed. A commit or a fast-forward that fails stops
#                        the loop (exit 40), nothing marked, the green commit kept.
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
set -u

case ${BASH_SOURCE[0]} in */*) HERE=${BASH_SOURCE[0]%/*} ;; *) HERE=. ;; esac
HERE=${HERE:-/} # a script at /
HERE=$(cd "$HERE" && pwd)
# shellcheck source=recipes/lib.sh
. "$HERE/lib.sh"
LK_PROG=worktree.sh

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    cat <<'EOF'

Options:
  --contract FILE     the loop contract (default: the document's own, else ./loop.yaml)
  --tasks FILE        the TASKS.md this task comes from: mark it done / parked
  --task-id ID        start from a task given here instead of a document
  --task TEXT         the task's text (with --task-id)
  --goal              the task is a GOAL (judged by lk-judge after its checks pass)
  --reset-path PATH   a directory created empty in each worktree (adds to RESET_PATHS)
  --max-rounds N      a safety net over lk-decide's own budgets (default 50)
EOF
}


contract='' tasks='' start='' task_id='' task_text='' task_kind=task max_rounds=50
while [ $# -gt 0 ]; do
    case $1 in
    --contract) contract=$(lk_abspath "${2:?--contract needs a file}"); shift 2 ;;
    --tasks) tasks=$(lk_abspath "${2:?--tasks needs a file}"); shift 2 ;;
    --task-id) task_id=${2:?--task-id needs an id}; shift 2 ;;
    --task) task_text=${2:?--task needs text}; shift 2 ;;
    --goal) task_kind=goal; shift ;;
    --reset-path) export RESET_PATHS="${RESET_PATHS:-} ${2:?--reset-path needs a path}"; shift 2 ;;
    --max-rounds) max_rounds=${2:?--max-rounds needs a number}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) printf 'worktree.sh: unknown option %s\n' "$1" >&2; usage >&2; exit 2 ;;
    *) start=$(lk_abspath "$1"); shift ;;
    esac
done
case $max_rounds in '' | *[!0-9]*) printf 'worktree.sh: --max-rounds needs a number\n' >&2; exit 2 ;; esac

lk_setup_state
MAIN=$LK_ROOT
cd "$MAIN" || exit "$LK_EXIT_SETUP"
lk_lock
lk_reset_paths_check
branch=$(lk_git symbolic-ref -q --short HEAD) ||
    lk_die "$LK_EXIT_SETUP" "HEAD is detached: check out the branch the attempts should land on"
branch_ref=$(lk_git symbolic-ref -q HEAD)
if lk_tree_dirty; then
    lk_die "$LK_EXIT_SETUP" "the checkout has uncommitted changes; commit them first (a green attempt fast-forwards this branch)"
fi

lk_now run_id %Y%m%dT%H%M%SZ
run_id=$run_id-$$
mkdir -p "$LK_STATE/runs"
tmp_start=$LK_STATE/runs/.start-$run_id.json
if [ -n "$task_id" ]; then
    lk_task_doc "$task_id" "${task_text:-$task_id}" "$task_kind" >"$tmp_start" || exit 3
elif [ -n "$start" ]; then
    cp -- "$start" "$tmp_start" || lk_die 3 "$start: cannot read the start document"
elif [ ! -t 0 ]; then
    cat >"$tmp_start"
else
    usage >&2
    exit 2
fi
task_id=$(lk_json "$tmp_start" .task.id)
[ -n "$task_id" ] || lk_die 3 "the start document names no task (.task.id)"
safe_task=$(lk_safe_name "$task_id")
run_dir=$LK_STATE/runs/$safe_task/$run_id
mkdir -p "$run_dir"
mv -- "$tmp_start" "$run_dir/start.json"

cargs=()
[ -z "$contract" ] || cargs=(--contract "$contract")
wt_root=${LK_WORKTREES:-${TMPDIR:-/tmp}/loopkit-worktrees}
mkdir -p "$wt_root" || lk_die "$LK_EXIT_SETUP" "cannot create $wt_root"
wt=
# lib.sh's ends read these; LK_BASE (the branch's head when the attempt began) is set per
# round, and inside an attempt's worktree HEAD is detached (LK_BRANCH empty).
LK_TASK_ID=$task_id LK_TASKS=$tasks LK_RUN_DIR=$run_dir LK_LABEL=start LK_BRANCH=''


expect() {
    local rc=$1 name=$2
    shift 2
    local ok
    for ok in "$@"; do [ "$rc" = "$ok" ] && return 0; done
    lk_die "$rc" "$name failed with exit $rc; the worktree $wt is kept; see $run_dir"
}

save() {
    # save OUTCOME -> the ref holding the attempt's worktree (lib.sh's lk_save, run there).
    (cd "$wt" && lk_save "$1") ||
        lk_die "$LK_EXIT_NO_COMMIT" "could not save the attempt under refs/loopkit/; the worktree $wt is kept"
}

drop_worktree() {
    lk_git -C "$MAIN" worktree remove --force "$wt" || rm -rf -- "$wt"
    lk_git -C "$MAIN" worktree prune
}

park() {
    # park CODE OUTCOME DOC: nothing to revert -- the checkout never saw the attempt.
    local ref
    ref=$(save "$2") || exit "$LK_EXIT_NO_COMMIT"
    drop_worktree
    lk_park_record "$1" "$2" "$3" "$ref"
}

complete() {
    # The verified tree committed in the worktree, then the branch fast-forwarded to it.
    local doc=$1 commit green head
    (cd "$wt" && lk_commit_verified "$doc") || exit $?
    commit=$(lk_git -C "$wt" rev-parse HEAD) || lk_die "$LK_EXIT_NO_COMMIT" "cannot read the commit in $wt"
    head=$(lk_git rev-parse -q --verify HEAD || true)
    if [ "$head" != "$LK_BASE" ] || [ "$(lk_git symbolic-ref -q HEAD || true)" != "$branch_ref" ] ||
        ! lk_git merge -q --ff-only "$commit"; then
        green=$(lk_keep_commit "$task_id" "green-$run_id" "$commit") || green=$commit
        lk_die "$LK_EXIT_NO_COMMIT" "$branch could not fast-forward to $(lk_short "$commit") (it moved since the attempt began, from $(lk_short "$LK_BASE") to $(lk_short "${head:-none}"), or your edits in the checkout are in the way); the green commit is $green; worktree $wt kept; nothing marked"
    fi
    lk_log "fast-forwarded $branch to $(lk_short HEAD) ($task_id)"
    drop_worktree
    lk_mark_done
    exit 0
}

input=$run_dir/start.json
last=$input
round=0
lk_log "task $task_id: attempts in worktrees under $wt_root, landing on $branch"
while :; do
    round=$((round + 1))
    [ "$round" -le "$max_rounds" ] || lk_die "$LK_EXIT_RUNAWAY" "$task_id: more than $max_rounds rounds; stopped"
    p=$run_dir/$round
    base=$(lk_git -C "$MAIN" rev-parse HEAD)
    LK_BASE=$base LK_DIFF_BASE=$base
    wt=$(mktemp -d "$wt_root/$safe_task-$round-XXXXXX") || lk_die "$LK_EXIT_SETUP" "cannot create a worktree folder"
    rmdir -- "$wt"
    lk_git -C "$MAIN" worktree add -q --detach "$wt" "$base" || lk_die "$LK_EXIT_SETUP" "git worktree add failed"
    (LK_ROOT=$wt && lk_reset_paths) || lk_die "$LK_EXIT_SETUP" "could not create RESET_PATHS directories in $wt"

    cd "$wt" || exit "$LK_EXIT_SETUP"
    # Admission refusing (20 a usage limit until its reset time, 22 a spent budget, 30
    # cancelled) runs nothing; its document (P-admit.json) says why.
    lk_attempt "$input" "$p" "$base"
    drc=$?
    cd "$MAIN" || exit "$LK_EXIT_SETUP"
    case $drc in
    0 | 10 | 11 | 20 | 21 | 22 | 30) ;;
    *) expect "$drc" "lk attempt" 0 10 11 20 21 22 30 ;; # the failing stage is named above
    esac
    last=$LK_LAST
    lk_doc "$last" || lk_die 70 "cannot read $last"
    LK_LABEL=${LK_DOC_ATTEMPT:-$round}
    outcome=$LK_DOC_OUTCOME
    lk_log "$task_id attempt $LK_LABEL: ${outcome:-?} -- $(lk_one_line "$LK_DOC_REASON" 200)"
    case $drc in
    0) complete "$last" ;;
    10 | 11)
        ref=$(save "$outcome") || exit "$LK_EXIT_NO_COMMIT"
        drop_worktree
        backoff=$LK_DOC_BACKOFF
        case $backoff in
        '' | 0 | 0.0 | *[!0-9.]*) ;;
        *) lk_log "$task_id: waiting ${backoff}s"; sleep "$backoff" ;;
        esac
        input=$last
        ;;
    20 | 21 | 22) park "$drc" "${outcome:-failed}" "$last" ;;
    30)
        ref=$(save cancelled) || exit "$LK_EXIT_NO_COMMIT"
        lk_log "$task_id: cancelled; the worktree $wt is kept (saved as $ref)"
        exit 30
        ;;
    esac
done
