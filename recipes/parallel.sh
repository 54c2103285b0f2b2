#!/usr/bin/env bash
# parallel.sh -- the ready slices of a TASKS.md side by side, each landed through the merge
# queue: verified on top of what landed before it.
#
#   recipes/parallel.sh [--contract loop.yaml] [--jobs N] [--max-rounds N] [--pool NAME] [TASKS.md]
#
# Options: --jobs N (default 2): slices at once; --max-rounds N (default 20): attempts per
# slice, returns from the queue included; --pool NAME: the budget pool's name (default one
# of this run's own; the same name again goes on from what earlier runs spent of it).
#
# Every ready task (open, its dependencies done: `lk-plan next --except` the ones running)
# runs in a worktree of its own made from the branch's tip when it starts (LK_WORKTREES,
# default ${TMPDIR:-/tmp}/loopkit-worktrees), its worker in its own sandbox, which sees the
# checkout and the sibling worktrees read-only or not at all. The ledger and documents are
# this checkout's (.loopkit/): one ledger, appended to by every slice.
#
#   green (0)           `lk queue add`: the verified tree queued under refs/loopkit/queue/;
#                       the worktree removed; then `lk queue land --wait` (one lander at a
#                       time) rebuilds each queued entry on the tip, verifies it there and
#                       moves the branch by compare-and-swap, marking the task done. A slice
#                       the lander returns (red on top of what landed, or a conflict) starts
#                       again from the new tip with the lander's feedback as its previous
#                       attempt; nothing red lands.
#   red (10/11)         the tree saved under refs/loopkit/<task>/<attempt>, the worktree
#                       removed; the next attempt starts from the same base with the
#                       decided document (its feedback) piped in.
#   parked (20/21/22)   saved, worktree removed; the task is not started again in this run,
#                       and its dependents wait.
#
# A dependent starts once its dependency landed (its mark is on the branch). The branch is
# only ever moved by the queue's lander. The run holds this checkout's lock (lk task begin).
# A run stopped anywhere (kill -9 included) is finished by the plain rerun: it lands what
# the stopped run queued first (`lk queue land`), then starts only the tasks still open.
#
# Budgets for the whole run: the contract's `pool` (cost_usd, tokens, wall_seconds) is what
# all its workers may spend together. Each slice's admission reserves its worker's share
# (its cost share worker.max_cost_usd, its timeout, its task's tokens left; else the pool
# / --jobs) in the one ledger before the worker starts, and the settled attempt returns
# what it did not spend; a slice the pool cannot cover waits while a running one holds a
# share, and is parked (22) when none does. A killed worker's share lapses as a task's
# reservation does (its timeout, then 300 s). The pool's name is in LOOPKIT_POOL.
#
# Without a sandbox (sandbox.mode off, or no bwrap) a worker can write into the checkout or
# a sibling's worktree; loopkit sees when a file changed, not who changed it. After each
# attempt `lk queue sweep` saves what appeared in the checkout (only the lander writes
# there) under refs/loopkit/planted/ and puts the checkout back; `lk queue add --worktree`
# refuses (40) an attempt whose worker ran when such a plant was written, or whose own
# worktree changed while its own worker was not running: saved, not queued, run again
# from the tip. A write into a sibling at the very time the sibling's own worker runs
# cannot be told from its own work: only the sandbox keeps that out.
#
# Exit: 0 every task done; 21 some task parked or left open; 40 the queue could not land
# (see its line); 4 set-up (a dirty checkout, a detached HEAD, another loop running here).
# shellcheck disable=SC2153,SC2154 # LK_* and the workspace's names come from eval of lk's --shell output
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/log.sh"
LK_PROG=parallel.sh
g() { git -c core.hooksPath=/dev/null -c core.fsmonitor=false "$@"; }

contract='' tasks='' jobs=2 max_rounds=20 pool=
while [ $# -gt 0 ]; do
    case $1 in
    --contract) contract=${2:?--contract needs a file}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --max-rounds) max_rounds=${2:?--max-rounds needs a number}; shift 2 ;;
    --pool) pool=${2:?--pool needs a name}; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) printf 'parallel.sh: unknown option %s\n' "$1" >&2; exit 2 ;;
    *) tasks=$1; shift ;;
    esac
done
case $jobs in '' | *[!0-9]* | 0) printf 'parallel.sh: --jobs needs a number above 0\n' >&2; exit 2 ;; esac
case $max_rounds in '' | *[!0-9]*) printf 'parallel.sh: --max-rounds needs a number\n' >&2; exit 2 ;; esac
[ "${BASH_VERSINFO[0]}${BASH_VERSINFO[1]}" -ge 51 ] 2>/dev/null || lk_die 4 "parallel.sh needs bash 5.1 or later (wait -n -p)"
out=$(lk workspace ${contract:+--contract "$contract"} </dev/null) || exit $?
eval "$out" # root, state_dir, contract
LK_STATE=$state_dir
[ -n "$contract" ] || lk_die 2 "no contract: pass --contract FILE or add loop.yaml"
tasks=${tasks:-$root/TASKS.md}
[ -f "$tasks" ] || lk_die 3 "$tasks: no such file"
tasks=$(cd "$(dirname "$tasks")" && pwd)/${tasks##*/}
branch=$(g symbolic-ref -q HEAD) || lk_die 4 "HEAD is detached: check out the branch the slices should land on"
lk task begin --owner $$ >/dev/null || exit $?
export LK_LOCK_OWNER=$$
export LOOPKIT_STATE_DIR=$LK_STATE # one ledger: every slice's attempts are recorded here
# The run's pool (the contract's `pool`): each slice's admission reserves its worker's share
# of it in that ledger before the worker starts, and waits while the pool cannot cover it.
LOOPKIT_POOL=${pool:-parallel-$(date -u +%Y%m%dT%H%M%SZ)-$$}
export LOOPKIT_POOL LOOPKIT_POOL_JOBS=$jobs
MAIN=$root wt_root=${LK_WORKTREES:-${TMPDIR:-/tmp}/loopkit-worktrees}
mkdir -p "$wt_root" "$LK_STATE/runs" || lk_die 4 "cannot create $wt_root"
trap 'lk task end --owner $$ >/dev/null' EXIT
# The shell ignores the signal it sends its own group, so the trap runs once.
trap 'trap "" INT TERM; lk_log "interrupted"; kill 0 2>/dev/null; exit 130' INT TERM
# What a stopped run left in the queue lands first (a lander stopped anywhere is finished,
# the checkout brought to the branch): no slice queued or landed is paid for again.
lk queue land --wait --contract "$contract" >/dev/null
case $? in 0 | 1) ;; *) lk_die 40 "the queue a stopped run left could not land (see its line)" ;; esac
[ -z "$(g status --porcelain --untracked-files=normal)" ] || lk_die 4 "uncommitted changes in $root: commit or stash them first"

# slice TASK DOC: one task's rounds, in worktrees; exit 0 landed, 12 re-split (its slices
# run next), 20/21/22 parked, 41 over --max-rounds, other codes a failing command's.
slice() {
    local task=$1 input=$2 first=$2 round=0 base='' wt p last rc fields added
    local dir=$LK_STATE/runs/$task/parallel-$$ # lk status reads runs/<task>/<run>/
    mkdir -p "$dir"
    while [ "$round" -lt "$max_rounds" ]; do
        round=$((round + 1))
        # Pinned: a retry starts from the same base as the attempt before it (its feedback
        # is about that tree); only a slice the queue returned starts again from the tip.
        [ -n "$base" ] || base=$(g -C "$MAIN" rev-parse "$branch") || return 4
        wt=$(mktemp -d "$wt_root/$task-$round-XXXXXX") && rmdir -- "$wt" || return 4
        g -C "$MAIN" worktree add -q --detach "$wt" "$base" || return 4
        p=$dir/$round
        fields=$(cd "$wt" && exec lk attempt --keep "$p" --shell --base "$base" <"$input")
        rc=$?
        eval "$fields"
        last=$p-decide.json; [ -s "$last" ] || last=$p-admit.json
        lk_log "$task attempt ${LK_DOC_ATTEMPT:-$round} (base ${base:0:12}): ${LK_DOC_OUTCOME:-?} -- ${LK_DOC_REASON%%$'\n'*}"
        # What no lander wrote in the checkout: saved, put back (a worker without a sandbox).
        (cd "$MAIN" && lk queue sweep >/dev/null) || return 4
        case $rc in
        0)
            fields=$(cd "$MAIN" && lk queue add "$last" --onto "$branch" --tasks "$tasks" --worktree "$wt" --shell)
            added=$?
            case $added in
            0) eval "$fields" ;;
            40) # written by a process not its worker's (the line names it): saved, not queued
                lk_log "$task: not queued; again from the tip"
                save "$wt" "$task" "$round" || return 4
                drop "$wt"
                input=$first base=''
                continue ;;
            *) return "$added" ;;
            esac
            drop "$wt" # its work is saved: refs/loopkit/queue/<entry>
            (cd "$MAIN" && lk queue land --wait --contract "$contract" >/dev/null)
            case $? in 0 | 1) ;; *) return 40 ;; esac
            fields=$(cd "$MAIN" && lk queue status --entry "$LK_ENTRY" --shell) || return $?
            eval "$fields"
            case $LK_ENTRY_STATUS in
            landed) lk_log "$task: landed on ${branch#refs/heads/}"; return 0 ;;
            returned) lk_log "$task: returned by the queue; again from the new tip"
                input=$LK_ENTRY_DOCUMENT base='' ;;
            *) lk_log "$task: still queued ($LK_ENTRY_STATUS)"; return 40 ;;
            esac ;;
        10 | 11)
            save "$wt" "$task" "$round" || return 4
            drop "$wt"
            # Over its estimate: the model re-splits this slice only, committed; its own
            # slices start next (lk-plan next hands them out).
            case ${LK_DOC_CLASS:-} in scope_violation | no_progress)
                if (cd "$MAIN" && lk-plan split "$tasks" --task "$task" --over-estimate --commit --contract "$contract" >"$p-split.json" 2>"$p-split.err"); then
                    lk_log "$task: over its estimate: re-split; its slices start next"; return 12
                fi
                # within its estimate: nothing to say; anything else is said as it was
                grep -q -- ' --over-estimate: ' "$p-split.err" || cat "$p-split.err" >&2 ;;
            esac
            case ${LK_DOC_BACKOFF:-} in '' | 0 | 0.0 | *[!0-9.]*) ;; *) sleep "$LK_DOC_BACKOFF" ;; esac
            input=$last ;;
        20 | 21 | 22 | 30)
            save "$wt" "$task" "$round" || return 4
            drop "$wt"; return "$rc" ;;
        *) lk_log "$task: lk attempt exited $rc; the worktree $wt is kept"; return "$rc" ;;
        esac
    done
    lk_log "$task: more than $max_rounds rounds"
    return 41
}

# save WT TASK LABEL: the worktree's whole tree under refs/loopkit/<task>/<label> (before
# the worktree goes), with lk task's own save in that worktree.
save() {
    # begin on the attempt's uncommitted tree (--allow-dirty: it is also kept as
    # refs/loopkit/<task>/user-start), save it under the round's label, end.
    (cd "$1" && lk task begin --task-id "$2" --owner "$BASHPID" --allow-dirty >/dev/null 2>&1 &&
        lk task save "$3" --why "saved before its worktree was removed" >/dev/null &&
        lk task end --owner "$BASHPID" >/dev/null)
}
drop() { g -C "$MAIN" worktree remove --force "$1" 2>/dev/null || rm -rf -- "$1"; g -C "$MAIN" worktree prune; }

declare -A running=() # pid -> task
handled=() landed=0 split=0 parked=0 failed=0
lk_log "slices of $tasks, $jobs at a time, landing on ${branch#refs/heads/} through the queue"
while :; do
    while [ "${#running[@]}" -lt "$jobs" ]; do
        skip=()
        for t in "${handled[@]+"${handled[@]}"}"; do skip+=(--except "$t"); done
        doc=$LK_STATE/runs/next-parallel-$((${#handled[@]} + 1)).json
        (cd "$MAIN" && lk-plan next "$tasks" --contract "$contract" "${skip[@]+"${skip[@]}"}") >"$doc"
        rc=$?
        case $rc in 0) ;; 1) break ;; *) lk_die "$rc" "lk-plan next failed with exit $rc" ;; esac
        eval "$(lk workspace <"$doc")" # task: the id
        handled+=("$task")
        slice "$task" "$doc" &
        running[$!]=$task
        lk_log "$task: started (worker ${#running[@]} of $jobs)"
    done
    [ "${#running[@]}" -gt 0 ] || break
    wait -n -p done_pid
    rc=$?
    t=${running[$done_pid]:-?}
    unset "running[$done_pid]"
    case $rc in
    0) landed=$((landed + 1)) ;;
    12) split=$((split + 1)) ;;
    20 | 21 | 22) parked=$((parked + 1)); lk_log "$t: parked (exit $rc)" ;;
    *) failed=$((failed + 1)); lk_log "$t: stopped with exit $rc" ;;
    esac
done
lk report || :
open=$(grep -cE '^[[:space:]]*[-*+][[:space:]]+\[ \]' "$tasks" || true)
lk_log "done: $landed landed, $split re-split, $parked parked, $failed stopped; ${open:-0} open item(s) left"
[ "$failed" -eq 0 ] || exit 40
[ "$parked" -eq 0 ] && [ "${open:-0}" -eq 0 ] || exit 21
exit 0
