# shellcheck shell=bash
# loopkit recipes: the shared pieces of the ratchet (sourced by loop.sh, phased-loop.sh,
# worktree.sh and loop.mk). Copy it with them; it needs bash, git, and jq or python3.
#
# Every function here either does its job or says why on stderr and returns non-zero.
# None of them ever destroys work that was not first saved under refs/loopkit/.

# Exit codes of the recipes themselves (lk-decide's own codes pass through unchanged:
# 0 complete, 20 blocked, 21 failed, 22 budget exhausted, 30 cancelled).
export LK_EXIT_NO_COMMIT=40 # a commit (or the save before a revert) failed: the loop stops
export LK_EXIT_RUNAWAY=41   # more rounds than --max-rounds, or a task came back after it was handled
export LK_EXIT_SETUP=4      # not a repository, a dirty tree, an unsafe RESET_PATHS entry

lk_log() {
    # One line on stderr, and the same line in the loop's own log under the state folder
    # (which git ignores through .git/info/exclude: no `git add -A` sweeps it, no park
    # reverts it).
    local line
    line="$(date -u +%Y-%m-%dT%H:%M:%SZ) ${LK_PROG:-loopkit}: $*"
    printf '%s\n' "$line" >&2
    if [ -n "${LK_STATE:-}" ] && [ -d "$LK_STATE" ]; then
        printf '%s\n' "$line" >>"$LK_STATE/recipes.log" 2>/dev/null || true
    fi
}

lk_note() {
    # Like lk_log, but only into the log file (and stderr when LK_VERBOSE=1): the detail.
    if [ "${LK_VERBOSE:-0}" = 1 ]; then
        lk_log "$@"
        return 0
    fi
    if [ -n "${LK_STATE:-}" ] && [ -d "$LK_STATE" ]; then
        printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${LK_PROG:-loopkit}" "$*" >>"$LK_STATE/recipes.log" 2>/dev/null || true
    fi
}

lk_die() {
    # lk_die CODE MESSAGE...
    local code=$1
    shift
    lk_log "error: $*"
    exit "$code"
}

# --- JSON without a parser of our own: jq when present, else python3 ---------------

lk_json() {
    # lk_json FILE .dotted.path -> the value (strings raw, objects/lists as JSON);
    # nothing for null, false or a missing field. FILE holds one JSON document.
    local file=$1 path=$2
    [ -s "$file" ] || return 0
    if [ "${LK_JSON:-}" != python ] && command -v jq >/dev/null 2>&1; then
        jq -r "($path) // empty | if type == \"object\" or type == \"array\" then tojson else . end" "$file"
    else
        "${LK_PYTHON:-python3}" - "$file" "$path" <<'PY'
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    text = f.read().strip()
try:
    value = json.loads(text)
except ValueError:  # several lines: the last one is the newest document
    value = json.loads(text.splitlines()[-1])
for key in sys.argv[2].lstrip(".").split("."):
    value = value.get(key) if isinstance(value, dict) else None
if value is None or value is False:
    sys.exit(0)
if isinstance(value, bool):
    print("true")
elif isinstance(value, (dict, list)):
    print(json.dumps(value))
else:
    print(value)
PY
    fi
}

lk_task_doc() {
    # lk_task_doc ID TEXT [KIND] -> a minimal attempt document holding one task.
    local id=$1 text=$2 kind=${3:-task}
    if [ "${LK_JSON:-}" != python ] && command -v jq >/dev/null 2>&1; then
        jq -cn --arg id "$id" --arg text "$text" --arg kind "$kind" \
            '{kind: "loopkit/attempt", version: 1, task: {id: $id, text: $text, kind: $kind}}'
    else
        "${LK_PYTHON:-python3}" -c '
import json, sys
print(json.dumps({"kind": "loopkit/attempt", "version": 1,
                  "task": {"id": sys.argv[1], "text": sys.argv[2], "kind": sys.argv[3]}}))
' "$id" "$text" "$kind"
    fi
}

# --- the repository and the state folder -------------------------------------------

lk_setup_state() {
    # lk_setup_state [CONTRACT [DOC]]: asks `lk workspace` (the answers every loopkit
    # command uses) and sets LK_ROOT (the work tree root), LK_STATE (the state folder,
    # created and excluded from git before anything is written there) and LK_MEMORY (the
    # contract's memory file, may be empty). CONTRACT defaults to the caller's $contract;
    # DOC is an attempt document whose contract and task apply.
    local file=${1-${contract:-}} doc=${2:-/dev/null} out line key val rc
    git rev-parse --show-toplevel >/dev/null 2>&1 ||
        lk_die "$LK_EXIT_SETUP" "$(pwd): not a git repository"
    out=$(lk workspace ${file:+--contract "$file"} <"$doc")
    rc=$?
    [ "$rc" = 0 ] || lk_die "$rc" "lk workspace failed (exit $rc): see the line above"
    LK_ROOT='' LK_STATE='' LK_MEMORY=''
    while IFS= read -r line; do
        key=${line%%=*}
        val=${line#*=}
        eval "val=$val" # lk workspace quotes every value for the shell
        case $key in
        root) LK_ROOT=$val ;;
        state_dir) LK_STATE=$val ;;
        memory) LK_MEMORY=$val ;;
        esac
    done <<<"$out"
    [ -n "$LK_ROOT" ] && [ -n "$LK_STATE" ] || lk_die 70 "lk workspace gave no root or state folder"
    export LOOPKIT_STATE_DIR=$LK_STATE
}

lk_tree_dirty() {
    # True when the work tree has changes git would commit (ignored files do not count).
    [ -n "$(git status --porcelain --untracked-files=all 2>/dev/null)" ]
}

lk_safe_name() {
    # A task id made safe for a ref and a folder name.
    local name
    name=$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '-' | sed -e 's/^[.-]*//' -e 's/\.\.*/./g' -e 's/\.lock$/-lock/')
    printf '%s' "${name:-task}"
}

# --- RESET_PATHS: named ignored paths a revert must also reset -----------------------

lk_reset_paths_check() {
    # Refuse entries that could wipe something a revert must never touch. Records which
    # entries are directories now (LK_RESET_DIRS), so a directory an attempt deleted
    # still comes back -- empty.
    LK_RESET_DIRS=" "
    local p entries=()
    read -r -a entries <<<"${RESET_PATHS:-}" # split on blanks, never globbed
    for p in ${entries[@]+"${entries[@]}"}; do
        case $p in
        /* | '~'* | . | ./ | .. | ../* | */.. | */../* | .git | .git/*)
            lk_die "$LK_EXIT_SETUP" "RESET_PATHS entry '$p' is unsafe: use a path inside the repository"
            ;;
        esac
        local stripped=${p%/}
        stripped=${stripped#./}
        [ -n "$stripped" ] || lk_die "$LK_EXIT_SETUP" "RESET_PATHS entry '$p' is empty"
        case "$LK_STATE/" in
        "$LK_ROOT/$stripped/"*) lk_die "$LK_EXIT_SETUP" "RESET_PATHS entry '$p' holds loopkit's state folder" ;;
        esac
        if [ -L "$LK_ROOT/$stripped" ] || ! lk_physical_parent_inside "$LK_ROOT/$stripped"; then
            lk_die "$LK_EXIT_SETUP" "RESET_PATHS entry '$p' is (or lies under) a symlink: name the real path inside the repository"
        fi
        if [ -n "$(git ls-files -- "$stripped" 2>/dev/null)" ]; then
            lk_die "$LK_EXIT_SETUP" "RESET_PATHS entry '$p' holds tracked files: git reset restores those; name only ignored paths"
        fi
        if [ "$p" != "${p%/}" ]; then
            LK_RESET_DIRS="$LK_RESET_DIRS$stripped " # written as a directory: dir/
        elif [ -d "$LK_ROOT/$stripped" ] && [ ! -L "$LK_ROOT/$stripped" ]; then
            LK_RESET_DIRS="$LK_RESET_DIRS$stripped "
        fi
    done
}

lk_physical_parent_inside() {
    # True when the nearest existing folder above PATH, symlinks resolved, is inside
    # LK_ROOT: an attempt may have turned a parent into a symlink to somewhere else.
    local parent root
    parent=$(dirname "$1")
    while [ ! -d "$parent" ]; do parent=$(dirname "$parent"); done
    parent=$(cd "$parent" 2>/dev/null && pwd -P) || return 1
    root=$(cd "$LK_ROOT" && pwd -P) || return 1
    case "$parent/" in "$root/"*) return 0 ;; esac
    return 1
}

lk_reset_paths() {
    # Wipe every RESET_PATHS entry; a directory is recreated empty, never left missing.
    local p stripped target entries=()
    read -r -a entries <<<"${RESET_PATHS:-}"
    for p in ${entries[@]+"${entries[@]}"}; do
        stripped=${p%/}
        stripped=${stripped#./}
        target=$LK_ROOT/$stripped
        if ! lk_physical_parent_inside "$target"; then
            lk_log "RESET_PATHS entry $stripped now lies outside the repository (a symlink?): left alone"
            continue
        fi
        if [ -L "$target" ]; then
            rm -f -- "$target" || return 1
        elif [ -d "$target" ]; then
            rm -rf -- "$target" || return 1
            mkdir -p -- "$target" || return 1
        elif [ -e "$target" ]; then
            rm -f -- "$target" || return 1
        fi
        case "${LK_RESET_DIRS:- }" in
        *" $stripped "*) mkdir -p -- "$target" || return 1 ;;
        esac
        lk_log "reset $stripped"
    done
}

# --- saving an attempt before any revert ---------------------------------------------

lk_save_attempt() {
    # lk_save_attempt TASK LABEL MESSAGE -> prints the ref that now holds the whole work
    # tree (tracked and untracked files, not ignored ones) as a commit whose parent is
    # HEAD. Uses a temporary index: the real index and the work tree are not touched.
    local task label msg
    task=$(lk_safe_name "$1")
    label=$(lk_safe_name "$2")
    msg=$3
    local index tree commit ref n=1
    index=$(git rev-parse --git-path "loopkit-save-$$.index") || return 1
    case $index in /*) ;; *) index=$(pwd)/$index ;; esac
    rm -f -- "$index"
    if git rev-parse -q --verify HEAD >/dev/null; then
        GIT_INDEX_FILE=$index git read-tree HEAD || { rm -f -- "$index"; return 1; }
    fi
    if ! GIT_INDEX_FILE=$index git -c advice.addEmbeddedRepo=false add -A -- . ||
        ! tree=$(GIT_INDEX_FILE=$index git write-tree); then
        rm -f -- "$index"
        return 1
    fi
    rm -f -- "$index"
    if git rev-parse -q --verify HEAD >/dev/null; then
        commit=$(git commit-tree "$tree" -p HEAD -m "$msg") || return 1
    else
        commit=$(git commit-tree "$tree" -m "$msg") || return 1
    fi
    ref=refs/loopkit/$task/$label
    while git rev-parse -q --verify "$ref" >/dev/null; do
        n=$((n + 1))
        ref=refs/loopkit/$task/$label-$n
    done
    # The empty old value makes update-ref refuse to overwrite a ref that appeared meanwhile.
    git update-ref -m "loopkit: save attempt" "$ref" "$commit" "" || return 1
    printf '%s\n' "$ref"
}

# --- committing ----------------------------------------------------------------------

lk_commit_all() {
    # lk_commit_all MESSAGE: `git add -A` and commit; hooks run. Returns non-zero unless a
    # new commit really landed on HEAD (a hook that rejects it, a broken identity, an
    # index.lock: all stop the loop).
    local msg=$1 before after
    before=$(git rev-parse -q --verify HEAD || true)
    git add -A || return 1
    git commit -q --allow-empty -m "$msg" || return 1
    after=$(git rev-parse -q --verify HEAD || true)
    [ -n "$after" ] && [ "$after" != "$before" ]
}

lk_commit_paths() {
    # lk_commit_paths MESSAGE PATH...: commit just these paths (the checklist, the memory
    # file) if they changed; paths git ignores or outside the work tree are skipped.
    # These bookkeeping commits hold no code, so they skip the hooks (--no-verify): a hook
    # that runs the checks -- red at a park, by definition -- must not block the record of
    # that very park. The task's own commit (lk_commit_all) always runs the hooks.
    local msg=$1
    shift
    local p rel keep=()
    for p in "$@"; do
        [ -n "$p" ] && [ -e "$p" ] || continue
        rel=$(git ls-files --full-name --others --exclude-standard --cached -- "$p" 2>/dev/null | head -n 1)
        [ -n "$rel" ] || continue # ignored, or outside this work tree
        keep+=("$p")
    done
    [ "${#keep[@]}" -gt 0 ] || return 0
    git add -- "${keep[@]}" || return 1
    if git diff --cached --quiet -- "${keep[@]}"; then
        return 0
    fi
    local before after
    before=$(git rev-parse -q --verify HEAD || true)
    git commit -q --no-verify -m "$msg" -- "${keep[@]}" || return 1
    after=$(git rev-parse -q --verify HEAD || true)
    [ "$after" != "$before" ]
}

# --- the memory file ------------------------------------------------------------------

lk_one_line() {
    # Squeeze text onto one bounded line.
    printf '%s' "$1" | tr '\n\r\t' '   ' | sed -e 's/  */ /g' -e 's/^ //' | cut -c "1-${2:-300}"
}

lk_retrospective() {
    # lk_retrospective MEMORY_FILE DOC OUTCOME REF: append a short, human-reviewable note
    # on why a task was parked. Every later handoff carries the memory file.
    local memory=$1 doc=$2 outcome=$3 ref=$4
    [ -n "$memory" ] || return 0
    local id text attempt klass reason feedback judge checks
    id=$(lk_json "$doc" .task.id)
    text=$(lk_json "$doc" .task.text)
    attempt=$(lk_json "$doc" .decision.attempt)
    klass=$(lk_json "$doc" .decision.failure_class)
    reason=$(lk_json "$doc" .decision.reason)
    feedback=$(lk_json "$doc" .decision.feedback)
    judge=$(lk_json "$doc" .judge.feedback)
    if command -v jq >/dev/null 2>&1 && [ "${LK_JSON:-}" != python ] && [ -s "$doc" ]; then
        checks=$(jq -r '[.verify.checks[]? | select(.passed == false) | .name] | join(", ")' "$doc" 2>/dev/null || true)
    else
        checks=
    fi
    mkdir -p "$(dirname "$memory")"
    {
        printf '\n## %s parked: %s (%s)\n' "$(date -u +%Y-%m-%d)" "${id:-?}" "$outcome"
        printf -- '- task: %s\n' "$(lk_one_line "${text:-?}" 200)"
        printf -- '- attempts: %s\n' "${attempt:-?}"
        printf -- '- last failure: %s%s\n' "${klass:-$outcome}" "${reason:+ — $(lk_one_line "$reason" 300)}"
        [ -z "$checks" ] || printf -- '- failing checks: %s\n' "$(lk_one_line "$checks" 200)"
        [ -z "$feedback" ] || printf -- '- feedback: %s\n' "$(lk_one_line "$feedback" 400)"
        [ -z "$judge" ] || printf -- '- judge: %s\n' "$(lk_one_line "$judge" 400)"
        printf -- '- the attempt is saved: git show %s\n' "$ref"
    } >>"$memory"
}

# --- the ratchet's three ends: save, park, complete ------------------------------------
# They read the caller's LK_TASK_ID, LK_BASE (the commit the attempts started from),
# LK_LABEL (the attempt, for the ref's name), LK_TASKS (TASKS.md, may be empty),
# and LK_RUN_DIR; park and complete exit.

lk_memory_file() {
    # The contract's memory file: MEMORY_FILE if set, else the newest document's contract,
    # else the workspace's (LK_MEMORY, from lk_setup_state).
    local doc m=${MEMORY_FILE:-}
    for doc in "$@"; do
        [ -z "$m" ] || break
        m=$(lk_json "$doc" .contract.memory)
    done
    if [ -z "$m" ]; then
        printf '%s' "${LK_MEMORY:-}"
        return 0
    fi
    case $m in /*) printf '%s' "$m" ;; *) printf '%s/%s' "$LK_ROOT" "$m" ;; esac
}

lk_save() {
    # save OUTCOME -> the ref holding the tree; never returns on failure.
    local ref
    ref=$(lk_save_attempt "$LK_TASK_ID" "$LK_LABEL" "loopkit: $LK_TASK_ID attempt $LK_LABEL ($1), saved by ${LK_PROG:-a recipe}") ||
        lk_die "$LK_EXIT_NO_COMMIT" "could not save the attempt under refs/loopkit/: NOT reverting anything"
    lk_log "saved the work tree of $LK_TASK_ID attempt $LK_LABEL as $ref"
    printf '%s' "$ref"
}

lk_park() {
    # park CODE OUTCOME DOC: save, revert, reset RESET_PATHS, retrospective, mark, commit.
    local code=$1 outcome=$2 doc=$3 ref memory reason
    ref=$(lk_save "$outcome") || exit "$LK_EXIT_NO_COMMIT"
    git reset -q --hard "$LK_BASE" || lk_die "$LK_EXIT_NO_COMMIT" "git reset --hard failed (the attempt is saved as $ref)"
    git clean -fdq || lk_die "$LK_EXIT_NO_COMMIT" "git clean -fd failed (the attempt is saved as $ref)"
    lk_reset_paths || lk_die "$LK_EXIT_NO_COMMIT" "resetting RESET_PATHS failed (the attempt is saved as $ref)"
    memory=$(lk_memory_file "$doc" "${LK_RUN_DIR:-.}/start.json")
    if [ -n "$memory" ]; then
        lk_retrospective "$memory" "$doc" "$outcome" "$ref" ||
            lk_die "$LK_EXIT_NO_COMMIT" "could not append the retrospective to $memory"
    fi
    if [ -n "${LK_TASKS:-}" ]; then
        reason=$(lk_one_line "$outcome: $(lk_json "$doc" .decision.reason)" 200)
        lk-plan mark "${LK_TASKS:-}" --task "$LK_TASK_ID" --status parked --reason "$reason" ||
            lk_die "$LK_EXIT_NO_COMMIT" "lk-plan mark $LK_TASK_ID parked failed"
    fi
    lk_commit_paths "loopkit: park $LK_TASK_ID ($outcome)" "$memory" "${LK_TASKS:-}" ||
        lk_die "$LK_EXIT_NO_COMMIT" "the commit of the park record (memory, checklist) failed"
    lk_log "parked $LK_TASK_ID ($outcome); the attempt is saved as $ref"
    exit "$code"
}

lk_complete() {
    # complete DOC: commit everything; the task is marked done only once the commit landed.
    local doc=$1 text attempt_id reason ref msg
    text=$(lk_one_line "$(lk_json "$doc" .task.text)" 72)
    attempt_id=$(lk_json "$doc" .attempt_id)
    reason=$(lk_one_line "$(lk_json "$doc" .decision.reason)" 300)
    msg=$(printf 'loopkit: %s: %s\n\n%s\n\nLoopkit-Task: %s\nLoopkit-Attempt: %s\n' \
        "$LK_TASK_ID" "${text:-$LK_TASK_ID}" "${reason:-complete}" "$LK_TASK_ID" "${attempt_id:-$LK_LABEL}")
    if ! lk_commit_all "$msg"; then
        ref=$(lk_save "complete, commit failed") || exit "$LK_EXIT_NO_COMMIT"
        lk_die "$LK_EXIT_NO_COMMIT" "the commit of $LK_TASK_ID failed (a hook rejected it?): the loop stops; the green tree is left on disk and saved as $ref; the task is NOT marked done"
    fi
    lk_log "committed $LK_TASK_ID as $(git rev-parse --short HEAD)"
    if [ -n "${LK_TASKS:-}" ]; then
        lk-plan mark "${LK_TASKS:-}" --task "$LK_TASK_ID" --status "done" ||
            lk_die "$LK_EXIT_NO_COMMIT" "$LK_TASK_ID is committed but lk-plan mark failed"
        lk_commit_paths "loopkit: mark $LK_TASK_ID done" "${LK_TASKS:-}" ||
            lk_die "$LK_EXIT_NO_COMMIT" "$LK_TASK_ID is committed but the commit of its checklist mark failed"
    fi
    exit 0
}

lk_abspath() {
    # lk_abspath PATH: PATH made absolute against the current directory (no symlinks resolved)
    case $1 in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$(pwd)" "$1" ;; esac
}

lk_stage() {
    # lk_stage NAME IN OUT CMD... -> the command's exit code. Runs one loopkit command with
    # IN on stdin and its document in OUT (stderr kept beside it as OUT.err). Notes use the
    # caller's $task_id and $round.
    local name=$1 in=$2 out=$3
    shift 3
    "$@" <"$in" >"$out" 2> >(tee "${out%.json}.err" >&2)
    local rc=$?
    if [ ! -s "$out" ] && { [ "$rc" -lt 2 ] || { [ "$rc" -ge 10 ] && [ "$rc" -le 30 ]; }; }; then
        # A verdict or a decision without its document is a bug, never a result to act on.
        lk_log "$name exited $rc but printed no document: stopping"
        rc=70
    fi
    lk_note "${task_id:-?} round ${round:-?}: $name exited $rc ($out)"
    return "$rc"
}

# shellcheck disable=SC2154 # cargs is the caller's, like expect
lk_attempt() {
    # lk_attempt P BASE [INVOKE-ARGS...] -> lk-decide's exit code. One admitted attempt:
    # invoke (on P-admit.json), diff against BASE, verify, judge (a goal whose checks pass),
    # decide into P-decide.json. Uses the caller's cargs (contract arguments) and its
    # expect RC NAME OK-CODES..., which stops the loop on any other code.
    local p=$1 base=$2 vrc last
    shift 2
    lk_stage invoke "$p-admit.json" "$p-invoke.json" lk-invoke ${cargs[@]+"${cargs[@]}"} "$@"
    expect $? lk-invoke 0 1
    lk_stage diff "$p-invoke.json" "$p-diff.json" lk-diff ${cargs[@]+"${cargs[@]}"} --base "$base"
    expect $? lk-diff 0 1
    lk_stage verify "$p-diff.json" "$p-verify.json" lk-verify ${cargs[@]+"${cargs[@]}"}
    vrc=$?
    expect "$vrc" lk-verify 0 1
    last=$p-verify.json
    if [ "$vrc" = 0 ] && [ "$(lk_json "$last" .task.kind)" = goal ]; then
        lk_stage judge "$last" "$p-judge.json" lk-judge ${cargs[@]+"${cargs[@]}"}
        expect $? lk-judge 0 1
        last=$p-judge.json
    fi
    lk_stage decide "$last" "$p-decide.json" lk-decide ${cargs[@]+"${cargs[@]}"}
}
