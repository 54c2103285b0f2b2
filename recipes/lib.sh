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

# bash 4.2 and later tell the time themselves (printf's %(...)T): no `date` process.
if [ "${BASH_VERSINFO[0]}" -gt 4 ] || { [ "${BASH_VERSINFO[0]}" = 4 ] && [ "${BASH_VERSINFO[1]}" -ge 2 ]; }; then
    LK_BASH_CLOCK=1
else
    LK_BASH_CLOCK=0
fi

lk_put() {
    # lk_put VAR VALUE: a function's result -- set in VAR when the caller names one (no
    # subshell, no fork: ~2.5 ms each on a small VM), else printed. Callers name a VAR that
    # is none of the function's own locals.
    if [ -n "$1" ]; then printf -v "$1" '%s' "$2"; else printf '%s' "$2"; fi
}

lk_now() {
    # lk_now VAR [FORMAT]: the UTC time now into VAR (strftime FORMAT, default ISO 8601).
    local lk_now_fmt=${2:-%Y-%m-%dT%H:%M:%SZ}
    if [ "$LK_BASH_CLOCK" = 1 ]; then
        TZ=UTC0 printf -v "$1" "%($lk_now_fmt)T" -1
    else
        printf -v "$1" '%s' "$(date -u "+$lk_now_fmt")"
    fi
}

lk_log() {
    # One line on stderr, and the same line in the loop's own log under the state folder
    # (which git ignores through .git/info/exclude: no `git add -A` sweeps it, no park
    # reverts it).
    local line now
    lk_now now
    line="$now ${LK_PROG:-loopkit}: $*"
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
    local now
    if [ -n "${LK_STATE:-}" ] && [ -d "$LK_STATE" ]; then
        lk_now now
        printf '%s %s: %s\n' "$now" "${LK_PROG:-loopkit}" "$*" >>"$LK_STATE/recipes.log" 2>/dev/null || true
    fi
}

lk_die() {
    # lk_die CODE MESSAGE...
    local code=$1
    shift
    lk_start_forget
    lk_log "error: $*"
    exit "$code"
}

lk_rm_f() {
    # lk_rm_f FILE...: rm -f the FILEs that are there (no process at all when none is: the
    # scratch files below are gone again more often than not).
    local f there=()
    for f in "$@"; do
        if [ -e "$f" ] || [ -L "$f" ]; then there+=("$f"); fi
    done
    [ "${#there[@]}" = 0 ] || rm -f -- "${there[@]}"
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

lk_doc() {
    # lk_doc FILE: the fields the recipes act on, read from the attempt document FILE in
    # one jq (or python3) call into LK_DOC_* variables -- empty for null, false or missing,
    # objects and lists as JSON (`lk attempt --shell` prints the same for its last one):
    #   LK_DOC_TASK_ID .task.id            LK_DOC_OUTCOME  .decision.outcome
    #   LK_DOC_TASK_TEXT .task.text        LK_DOC_ATTEMPT  .decision.attempt
    #   LK_DOC_TASK_KIND .task.kind        LK_DOC_REASON   .decision.reason
    #   LK_DOC_ATTEMPT_ID .attempt_id      LK_DOC_BACKOFF  .decision.backoff_s
    #   LK_DOC_TREE .verify.tree           LK_DOC_CLASS    .decision.failure_class
    #   LK_DOC_SESSION .run.session_id     LK_DOC_FEEDBACK .decision.feedback
    #   LK_DOC_MEMORY .contract.memory     LK_DOC_JUDGE    .judge.feedback
    #   LK_DOC_FAILING the names of the failing checks (.verify.checks), comma-separated
    # A second call on the same FILE reads nothing (lk_add_note forgets it).
    local file=$1 out
    [ "${LK_DOC_FILE:-}" = "$file" ] && return 0
    LK_DOC_FILE=
    # shellcheck disable=SC2034 # read by the recipes that source this file
    LK_DOC_TASK_ID='' LK_DOC_TASK_TEXT='' LK_DOC_TASK_KIND='' LK_DOC_ATTEMPT_ID='' LK_DOC_TREE='' \
        LK_DOC_SESSION='' LK_DOC_MEMORY='' LK_DOC_OUTCOME='' LK_DOC_ATTEMPT='' LK_DOC_REASON='' \
        LK_DOC_BACKOFF='' LK_DOC_CLASS='' LK_DOC_FEEDBACK='' LK_DOC_JUDGE='' LK_DOC_FAILING=''
    [ -s "$file" ] || return 0
    if [ "${LK_JSON:-}" != python ] && command -v jq >/dev/null 2>&1; then
        out=$(jq -r 'def f(n; p): "LK_DOC_\(n)=" + ((p // "") | if type == "string" then . else tojson end | @sh);
            f("TASK_ID"; .task.id), f("TASK_TEXT"; .task.text), f("TASK_KIND"; .task.kind),
            f("ATTEMPT_ID"; .attempt_id), f("TREE"; .verify.tree), f("SESSION"; .run.session_id),
            f("MEMORY"; .contract.memory), f("OUTCOME"; .decision.outcome),
            f("ATTEMPT"; .decision.attempt), f("REASON"; .decision.reason),
            f("BACKOFF"; .decision.backoff_s), f("CLASS"; .decision.failure_class),
            f("FEEDBACK"; .decision.feedback), f("JUDGE"; .judge.feedback),
            f("FAILING"; [.verify.checks[]? | select(.passed == false) | .name | tostring] | join(", "))' "$file") || return 1
    else
        out=$("${LK_PYTHON:-python3}" - "$file" <<'PY'
import json, shlex, sys
with open(sys.argv[1], encoding="utf-8") as f:
    text = f.read().strip()
try:
    doc = json.loads(text)
except ValueError:  # several lines: the last one is the newest document
    doc = json.loads(text.splitlines()[-1])
def get(path):
    value = doc
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if value is None or value is False:
        return ""
    if value is True:
        return "true"
    return json.dumps(value, separators=(",", ":")) if isinstance(value, (dict, list)) else str(value)
checks = (doc.get("verify") or {}).get("checks") or []
fields = {
    "TASK_ID": get("task.id"), "TASK_TEXT": get("task.text"), "TASK_KIND": get("task.kind"),
    "ATTEMPT_ID": get("attempt_id"), "TREE": get("verify.tree"), "SESSION": get("run.session_id"),
    "MEMORY": get("contract.memory"), "OUTCOME": get("decision.outcome"),
    "ATTEMPT": get("decision.attempt"), "REASON": get("decision.reason"),
    "BACKOFF": get("decision.backoff_s"), "CLASS": get("decision.failure_class"),
    "FEEDBACK": get("decision.feedback"), "JUDGE": get("judge.feedback"),
    "FAILING": ", ".join(str(c.get("name")) for c in checks
                         if isinstance(c, dict) and c.get("passed") is False),
}
for name, value in fields.items():
    print(f"LK_DOC_{name}={shlex.quote(value)}")
PY
) || return 1
    fi
    eval "$out" # every value is quoted for the shell (jq's @sh, shlex.quote)
    LK_DOC_FILE=$file
}

lk_add_note() {
    # lk_add_note DOC TEXT: append TEXT to the task's notes in the attempt document DOC
    # (the handoff carries them to the worker).
    local doc=$1 text=$2 tmp
    tmp=$doc.note-$$
    if [ "${LK_JSON:-}" != python ] && command -v jq >/dev/null 2>&1; then
        jq -c --arg t "$text" '.task.notes = ((.task.notes // []) + [$t])' "$doc" >"$tmp"
    else
        "${LK_PYTHON:-python3}" -c '
import json, sys
doc = json.loads(open(sys.argv[1], encoding="utf-8").read().strip().splitlines()[-1])
doc.setdefault("task", {}).setdefault("notes", []).append(sys.argv[2])
print(json.dumps(doc))
' "$doc" "$text" >"$tmp"
    fi && mv -f -- "$tmp" "$doc" && LK_DOC_FILE=
}

lk_json_string() {
    # lk_json_string TEXT [VAR] -> TEXT as a JSON string, quotes included (bash alone, no
    # process; lk_put).
    local s=$1 i oct c u
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    s=${s//$'\t'/\\t}
    for ((i = 1; i < 32; i++)); do
        printf -v oct '%03o' "$i"
        printf -v c '%b' "\\$oct"
        case $s in *"$c"*) printf -v u '\\u%04x' "$i" && s=${s//"$c"/"$u"} ;; esac
    done
    lk_put "${2:-}" "\"$s\""
}

lk_scratch_file() {
    # lk_scratch_file PREFIX VAR: a new empty file PREFIX-<pid>-<random> of this loop's
    # alone, its path in VAR: created only where nothing is (noclobber opens it O_EXCL, so
    # no file or symlink planted in a shared /tmp is followed), without a process (mktemp).
    local name n=0 was=+C
    case $- in *C*) was=-C ;; esac
    set -C
    while [ "$n" -lt 20 ]; do
        name=$1-$$-$RANDOM$RANDOM
        if { : >"$name"; } 2>/dev/null; then
            set "$was"
            printf -v "$2" '%s' "$name"
            return 0
        fi
        n=$((n + 1))
    done
    set "$was"
    lk_log "cannot create a scratch file beside $1"
    return 1
}

lk_task_doc() {
    # lk_task_doc ID TEXT [KIND [VAR]] -> a minimal attempt document holding one task
    # (lk_put).
    local id text kind doc
    lk_json_string "$1" id
    lk_json_string "$2" text
    lk_json_string "${3:-task}" kind
    printf -v doc '{"kind":"loopkit/attempt","version":1,"task":{"id":%s,"text":%s,"kind":%s}}\n' \
        "$id" "$text" "$kind"
    lk_put "${4:-}" "$doc"
}

# --- git, with nothing of the worker's running inside it --------------------------------
# The worker has a shell in the repository: it can plant hooks (.git/hooks, core.hooksPath),
# an fsmonitor command, a filter driver (`[filter "x"] clean = ...` in .git/config and
# `* filter=x` in .git/info/attributes) or a replace ref that would run, or lie, inside the
# recipe's own git calls -- a `git add -A` runs clean filters, a checkout smudge filters,
# a commit its hooks, `BASE^{tree}` follows refs/replace/. Every git call of the recipes
# goes through lk_git, with the settings loopkit's own git calls use (loopkit/git.py): no
# hooks, no fsmonitor, no untracked cache, no replace objects, no signing, and no filter
# driver that the repository's own config defines (.git/config, config.worktree and what
# they include). Drivers of the user's global or system config (git-lfs) keep working.
# The settings travel as GIT_CONFIG_KEY_n/VALUE_n (git >= 2.31): they win over every
# config file and take a key as written, even a filter named `a=b`.

lk_git_may_filter() {
    # lk_git_may_filter ARGS...: could `git ARGS` run a filter driver (read or write a
    # work tree file's content)? Subcommands that never do need no look-up of the drivers
    # first -- the same list as loopkit/git.py's _FILTER_FREE.
    local a sub='' next_is_value=0
    for a in "$@"; do
        if [ "$next_is_value" = 1 ]; then
            next_is_value=0
            continue
        fi
        case $a in
        -c | -C | --config-env) next_is_value=1 ;;
        -*) ;;
        *)
            sub=$a
            break
            ;;
        esac
    done
    case $sub in
    rev-parse | config | update-ref | symbolic-ref | diff-tree | ls-tree | for-each-ref | \
        show-ref | commit-tree | merge-base | rev-list | mktree) return 1 ;;
    cat-file)
        for a in "$@"; do
            case $a in --filters | --textconv | --path*) return 0 ;; esac
        done
        return 1
        ;;
    esac
    return 0
}

lk_git_no_filters() {
    # True when the repository's own config files surely define no filter driver, as
    # loopkit.git's _may_define_filters: neither the git folder's config nor its
    # config.worktree so much as mentions "filter" or "include" (any case). Then no git
    # call is needed to know (global and system drivers are the user's, and trusted).
    # Read with builtins alone, every NUL-separated piece of them. At the work tree root
    # lk_setup_state found only; elsewhere, git is asked.
    [ -n "${LK_GIT_DIR:-}" ] && [ "$PWD" = "${LK_ROOT:-}" ] || return 1
    local common=$LK_GIT_DIR file piece
    if [ -e "$LK_GIT_DIR/commondir" ]; then
        IFS= read -r common <"$LK_GIT_DIR/commondir" || [ -n "$common" ] || return 1
        case $common in /*) ;; *) common=$LK_GIT_DIR/$common ;; esac
    fi
    for file in "$common/config" "$LK_GIT_DIR/config.worktree"; do
        [ -e "$file" ] || [ -L "$file" ] || continue
        [ -f "$file" ] && [ -r "$file" ] || return 1
        while IFS= read -r -d '' piece || [ -n "$piece" ]; do
            case $piece in *[Ff][Ii][Ll][Tt][Ee][Rr]* | *[Ii][Nn][Cc][Ll][Uu][Dd][Ee]*) return 1 ;; esac
        done <"$file" || return 1
    done
    return 0
}

lk_git() {
    local cfg=(core.hooksPath /dev/null core.fsmonitor false core.untrackedCache false
        commit.gpgSign false)
    local scope entry key name seen=$'\n' n i vars=()
    # Looked up on every call that may run a filter: between two of them a process of the
    # worker's may add one.
    lk_git_may_filter "$@" && ! lk_git_no_filters && while IFS= read -r -d '' scope && IFS= read -r -d '' entry; do
        case $scope in system | global | command) continue ;; esac
        key=${entry%%$'\n'*}
        name=${key#*.} # filter.<name>.<key>: the name lies between the first and last dot
        case $name in *.*) name=${name%.*} ;; *) continue ;; esac
        case $seen in *$'\n'"$name"$'\n'*) continue ;; esac
        seen="$seen$name"$'\n'
        cfg+=("filter.$name.clean" '' "filter.$name.smudge" '' "filter.$name.process" ''
            "filter.$name.required" false)
    done < <(command git config -z --show-scope --get-regexp '^filter\.' 2>/dev/null)
    n=${GIT_CONFIG_COUNT:-0}
    case $n in '' | *[!0-9]*) n=0 ;; esac
    for ((i = 0; i < ${#cfg[@]}; i += 2)); do
        vars+=("GIT_CONFIG_KEY_$n=${cfg[i]}" "GIT_CONFIG_VALUE_$n=${cfg[i + 1]}")
        n=$((n + 1))
    done
    # A subshell that becomes git: the settings reach git alone, with no env(1) between.
    (
        export GIT_NO_REPLACE_OBJECTS=1 "${vars[@]}" "GIT_CONFIG_COUNT=$n"
        exec git "$@"
    )
}

lk_git_path() {
    # lk_git_path NAME [VAR] -> the absolute path of NAME inside this work tree's git folder
    # (set in VAR when given: lk_put). A
    # loopkit-* file is the work tree's own, beside its index: at the root lk_setup_state
    # found, in the git folder it asked for once (LK_GIT_DIR); so is the index, unless
    # GIT_INDEX_FILE names another. Other names, and other work trees, are git's to place.
    case $1 in
    loopkit-* | index)
        if [ -n "${LK_GIT_DIR:-}" ] && [ "$PWD" = "${LK_ROOT:-}" ] &&
            { [ "$1" != index ] || [ -z "${GIT_INDEX_FILE+set}" ]; }; then
            lk_put "${2:-}" "$LK_GIT_DIR/$1"
            return 0
        fi
        ;;
    esac
    local path
    path=$(lk_git rev-parse --git-path "$1") || return 1
    case $path in /*) ;; *) path=$PWD/$path ;; esac
    lk_put "${2:-}" "$path"
}

# --- the repository and the state folder -------------------------------------------

lk_setup_state() {
    # lk_setup_state [CONTRACT [DOC]]: asks `lk workspace` (the answers every loopkit
    # command uses) and sets LK_ROOT (the work tree root), LK_STATE (the state folder,
    # created and excluded from git before anything is written there), LK_MEMORY (the
    # contract's memory file, may be empty) and LK_WS_TASK (DOC's task id, may be empty).
    # CONTRACT defaults to the caller's $contract; DOC is an attempt document whose
    # contract and task apply.
    local file=${1-${contract:-}} doc=${2:-/dev/null} out line key val rc top=''
    # The git folder and the work tree, and where HEAD stands (LK_HEAD_SEEN, for lk_begin
    # to take once the lock is held, if HEAD has not moved by then): one git call.
    LK_HEAD_SEEN=
    if out=$(lk_git rev-parse --absolute-git-dir --show-toplevel \
        'HEAD^{commit}' 'HEAD^{tree}' --symbolic-full-name HEAD 2>/dev/null); then
        LK_GIT_DIR=${out%%$'\n'*}
        out=${out#*$'\n'}
        top=${out%%$'\n'*}
        LK_HEAD_SEEN=${out#*$'\n'}
    elif out=$(lk_git rev-parse --absolute-git-dir --show-toplevel 2>/dev/null); then
        LK_GIT_DIR=${out%%$'\n'*}
        top=${out#*$'\n'}
    else
        LK_GIT_DIR=$(lk_git rev-parse --absolute-git-dir 2>/dev/null) ||
            lk_die "$LK_EXIT_SETUP" "$(pwd): not a git repository"
    fi
    [ "${LK_START_EARLY:-}" != 1 ] || [ -z "$top" ] || lk_start_early "$top"
    # Answered by an early lk attempt when there is one (no Python start of its own).
    if ! lk_workspace_call "$doc" workspace ${file:+--contract "$file"}; then
        out=$(lk workspace ${file:+--contract "$file"} <"$doc")
        rc=$?
    fi
    [ "$rc" = 0 ] || lk_die "$rc" "lk workspace failed (exit $rc): see the line above"
    LK_ROOT='' LK_STATE='' LK_MEMORY='' LK_WS_TASK=''
    while IFS= read -r line; do
        key=${line%%=*}
        val=${line#*=}
        eval "val=$val" # lk workspace quotes every value for the shell
        case $key in
        root) LK_ROOT=$val ;;
        state_dir) LK_STATE=$val ;;
        memory) LK_MEMORY=$val ;;
        task) export LK_WS_TASK=$val ;; # read by the recipes that source this file
        esac
    done <<<"$out"
    [ -n "$LK_ROOT" ] && [ -n "$LK_STATE" ] || lk_die 70 "lk workspace gave no root or state folder"
    if [ "$top" != "$LK_ROOT" ]; then # the workspace is another work tree's
        lk_start_forget
        LK_HEAD_SEEN=
    fi
    export LOOPKIT_STATE_DIR=$LK_STATE
}

lk_start_early() {
    # lk_start_early TOP: the start check's walk (lk_start_dirty) begun now, in the
    # background at the work tree's root TOP, while `lk workspace` runs beside it (two
    # cores: ~40 ms of a 10,000-file tree off the loop's start). It writes nothing
    # (GIT_OPTIONAL_LOCKS=0). lk_start_dirty takes its answer only when it found the tree
    # clean and nothing may have changed the tree since (lk_recover forgets it); else it
    # walks again. Set LK_START_EARLY=1 before lk_setup_state to have it.
    LK_START_FILE=$LK_GIT_DIR/loopkit-recipe-$$.start
    lk_rm_f "$LK_START_FILE" "$LK_START_FILE.part"
    (
        cd "$1" || exit 1
        GIT_OPTIONAL_LOCKS=0 lk_start_walk >"$LK_START_FILE.part" &&
            mv -f -- "$LK_START_FILE.part" "$LK_START_FILE"
    ) &
    LK_START_PID=$!
}

lk_start_wait() {
    # Wait for an early start check (lk_start_early) to end.
    if [ -n "${LK_START_PID:-}" ]; then
        wait "$LK_START_PID" 2>/dev/null || true
        LK_START_PID=
    fi
}

lk_start_forget() {
    # Wait for an early start check (lk_start_early) and drop its answer (its file goes
    # with the loop's other scratch files when the loop ends: lk_on_exit).
    lk_start_wait
    if [ -n "${LK_START_FILE:-}" ]; then
        LK_LEAVE+=("$LK_START_FILE" "$LK_START_FILE.part")
        LK_START_FILE=
    fi
}

lk_state_rel() {
    # The state folder relative to the work tree root, when it lies inside it.
    case "$LK_STATE/" in
    "$LK_ROOT/"?*) printf '%s\n' "${LK_STATE#"$LK_ROOT/"}" ;;
    esac
}

lk_tree_dirty() {
    # True when the work tree has changes git would commit (ignored files do not count).
    [ -n "$(lk_git status --porcelain --untracked-files=all 2>/dev/null)" ]
}

lk_start_dirty() {
    # lk_tree_dirty, in the same walk recording what the start's rules ignore (files, and
    # folders as a whole) in LK_START_IGNORED: a park never removes them as debris, even
    # when the attempt left a .gitignore of its own that un-ignores them and ignores itself.
    lk_start_wait
    if [ -n "${LK_START_FILE:-}" ] && [ -f "$LK_START_FILE" ]; then
        # The early walk's answer, when it says clean (the state folder may have been made
        # meanwhile: that only adds entries, and any entry means "walk again").
        if ! lk_start_read <"$LK_START_FILE"; then
            lk_start_forget
            return 1
        fi
        lk_start_forget
    fi
    lk_start_read < <(lk_start_walk)
}

lk_start_walk() {
    # The start check's walk: what git would commit, and what the rules ignore (-z).
    lk_git status --porcelain -z --untracked-files=normal --ignored=matching 2>/dev/null
}

lk_start_read() {
    # lk_start_read < WALK: true when the walk lists a change; LK_START_IGNORED set to
    # what it lists as ignored.
    local entry dirty=1
    LK_START_IGNORED=()
    while IFS= read -r -d '' entry; do
        case $entry in
        '!! '*) LK_START_IGNORED+=("${entry#'!! '}") ;;
        *) dirty=0 ;;
        esac
    done
    return "$dirty"
}

lk_keep_pattern() {
    # lk_keep_pattern PATH: LK_PATTERN = PATH as a literal `git clean -e` pattern anchored
    # at the root (no subshell: a park may name hundreds); fails for a name holding a line
    # break, which no pattern can name.
    local p=$1
    LK_PATTERN=
    case $p in *$'\n'*) return 1 ;; esac
    p=${p//\\/\\\\}
    p=${p//\*/\\*}
    p=${p//\?/\\?}
    p=${p//\[/\\[}
    p=${p//\]/\\]}
    case $p in [#!]*) p=\\$p ;; esac
    case $p in *' ') p="${p% }\\ " ;; esac
    LK_PATTERN=/$p
}

# The characters a ref or folder name keeps, spelled out: a range would follow the locale.
LK_NAME_CHARS=ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-

lk_safe_name() {
    # lk_safe_name ID [VAR]: a task id made safe for a ref and a folder name (lk_put).
    local name=$1
    case $name in
    '' | [.-]* | *[!$LK_NAME_CHARS]* | *..* | *.lock) # else it is safe as it stands
        name=$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '-' | sed -e 's/^[.-]*//' -e 's/\.\.*/./g' -e 's/\.lock$/-lock/')
        ;;
    esac
    lk_put "${2:-}" "${name:-task}"
}

# --- one loop per work tree ---------------------------------------------------------------
# Two loops on one checkout would save, revert and park each other's work. The lock is a
# directory (mkdir is atomic everywhere; macOS has no flock(1)) holding the owner's pid and
# start time; a lock whose owner is gone is taken over, and said so. A loop started by a
# loop (phased-loop.sh -> loop.sh) runs under its parent's lock (LK_LOCK_OWNER).

lk_proc_started() {
    # lk_proc_started PID -> when the process started (empty when it cannot be told): a
    # reused pid is not mistaken for the loop that held the lock. Linux: its start time in
    # clock ticks since boot, read from /proc (no process started); elsewhere ps's lstart.
    local line rest
    if [ -r "/proc/$1/stat" ]; then
        IFS= read -r line <"/proc/$1/stat" 2>/dev/null || return 0
        rest=${line##*) } # after "pid (name) ": field 3 (state) onwards; 22 is starttime
        # shellcheck disable=SC2086 # split into fields on purpose
        set -- $rest
        [ "$#" -ge 20 ] && printf 'ticks %s\n' "${20}"
        return 0
    fi
    command -v ps >/dev/null 2>&1 || return 0
    ps -o lstart= -p "$1" 2>/dev/null | sed -e 's/^ *//' -e 's/ *$//'
}

lk_lock_alive() {
    # lk_lock_alive LOCKDIR PID -> true when PID still runs and is the process that took it.
    local started
    # kill -0 fails for another user's process too: ps tells whether it exists at all.
    kill -0 "$2" 2>/dev/null || { command -v ps >/dev/null 2>&1 && ps -p "$2" >/dev/null 2>&1; } || return 1
    started=
    { IFS= read -r started <"$1/started"; } 2>/dev/null || true
    [ -z "$started" ] || [ "$(lk_proc_started "$2")" = "$started" ]
}

lk_lock() {
    # Take $LK_STATE/loop.lock or refuse (exit 4) while another loop holds it. Released on
    # exit (lk_on_exit, installed as the EXIT trap).
    local lock=$LK_STATE/loop.lock pid waited=0 moved
    LK_LOCK=
    while ! mkdir "$lock" 2>/dev/null; do
        pid=$(cat "$lock/pid" 2>/dev/null || true)
        if [ -z "$pid" ] && [ "$waited" -lt 20 ]; then
            waited=$((waited + 1)) # taken this very moment: its pid is on the way
            sleep 0.1
            continue
        fi
        if [ -n "$pid" ] && lk_lock_alive "$lock" "$pid"; then
            if [ "$pid" = "${LK_LOCK_OWNER:-}" ]; then
                return 0 # the loop that started this one holds it
            fi
            lk_die "$LK_EXIT_SETUP" "another loop (pid $pid) is running in this work tree ($LK_ROOT): one loop per work tree -- two would save, revert and park each other's work. Wait for it to end, or stop it (kill $pid)"
        fi
        # Gone (killed, or the machine restarted): take it over. Moved aside first, and
        # checked: a loop that took it over meanwhile keeps its lock.
        moved=$lock.stale-$$
        rm -rf -- "$moved"
        mv -- "$lock" "$moved" 2>/dev/null || continue
        if [ -n "$pid" ] && [ "$(cat "$moved/pid" 2>/dev/null || true)" != "$pid" ]; then
            mv -- "$moved" "$lock" 2>/dev/null || rm -rf -- "$moved"
            continue
        fi
        # An attempt in progress when it died: recovered below, once the lock is ours.
        [ ! -f "$moved/attempt" ] || mv -f -- "$moved/attempt" "$LK_STATE/interrupted.attempt"
        rm -rf -- "$moved"
        lk_log "took over the lock of a loop that is gone (pid ${pid:-unknown}): $lock"
        waited=0
    done
    lk_proc_started $$ >"$lock/started" 2>/dev/null || true
    # One small write: a loop that reads it meanwhile sees it empty (its pid "on the way",
    # above) or whole.
    printf '%s\n' "$$" >"$lock/pid" || lk_die "$LK_EXIT_SETUP" "cannot write $lock/pid"
    LK_LOCK=$lock
    export LK_LOCK_OWNER=$$
    trap lk_on_exit EXIT
    lk_recover
}

lk_mark_attempt() {
    # What a loop that dies mid-attempt leaves for the next start: the task and where it
    # began, beside the lock (removed with it at a normal end).
    local lock=$LK_STATE/loop.lock
    [ -d "$lock" ] || return 0
    printf 'task=%s\nbase=%s\nstart_tree=%s\nstart_index=%s\n' \
        "$LK_TASK_ID" "$LK_BASE" "$LK_START_TREE" "${LK_START_INDEX:-}" >"$lock/attempt.part" &&
        mv -f -- "$lock/attempt.part" "$lock/attempt"
}

lk_recover() {
    # After a loop that died mid-attempt (kill -9, a reboot): its tree is saved under
    # refs/loopkit/<task>/interrupted[-n], the start it began from is restored, the ledger
    # records the attempt as interrupted -- no --allow-dirty, no person. Idempotent: the
    # marker goes once this is done, and a second start finds nothing to do.
    local marker=$LK_STATE/interrupted.attempt task base start_tree start_index head ref saved
    [ -f "$marker" ] || return 0
    lk_start_forget # the tree may be restored below: an early start check no longer holds
    task=$(sed -n 's/^task=//p' "$marker")
    base=$(sed -n 's/^base=//p' "$marker")
    start_tree=$(sed -n 's/^start_tree=//p' "$marker")
    start_index=$(sed -n 's/^start_index=//p' "$marker")
    head=$(lk_git rev-parse -q --verify HEAD || true)
    if [ -z "$task" ] || [ -z "$base" ] || [ "$head" != "$base" ]; then
        lk_log "an interrupted loop ($task) left the branch at ${head:-?}, not where it began (${base:-?}): nothing restored"
        rm -f -- "$marker"
        return 0
    fi
    ref=$(lk_save_attempt "$task" interrupted "loopkit: $task interrupted (the loop died before a decision), saved at the next start") ||
        lk_die "$LK_EXIT_NO_COMMIT" "could not save the interrupted attempt of $task: NOT restoring anything"
    saved=$(lk_git rev-parse "$ref^{tree}" 2>/dev/null || true)
    if [ "$saved" = "$start_tree" ]; then
        lk_git update-ref -d "$ref" >/dev/null 2>&1 || true
        lk_log "an interrupted loop ($task) left nothing to restore"
    else
        lk_sync_to "$start_tree" "${start_index:-$start_tree}" ||
            lk_die "$LK_EXIT_NO_COMMIT" "could not restore the start of $task (the interrupted attempt is saved as $ref)"
        lk_log "recovered an interrupted attempt of $task: saved as $ref, the tree is back where it began"
    fi
    lk-decide --interrupted "$task" --reason "the loop died before a decision; recovered at the next start" >/dev/null ||
        lk_log "could not record the interrupted attempt of $task in the ledger"
    rm -f -- "$marker"
}

lk_unlock() {
    # Release the lock (when it is this loop's) and remove the loop's scratch files
    # (LK_LEAVE, LK_TMP_START): one rm for all.
    local pid='' gone=(${LK_LEAVE[@]+"${LK_LEAVE[@]}"})
    LK_LEAVE=()
    [ -z "${LK_TMP_START:-}" ] || gone+=("$LK_TMP_START")
    LK_TMP_START=
    if [ -n "${LK_LOCK:-}" ]; then
        { IFS= read -r pid <"$LK_LOCK/pid"; } 2>/dev/null || true
        [ "$pid" != "$$" ] || gone+=("$LK_LOCK")
        LK_LOCK=
    fi
    [ "${#gone[@]}" = 0 ] || rm -rf -- "${gone[@]}"
}

lk_on_exit() {
    # The EXIT trap: end an early lk attempt no round was handed; release the lock and
    # remove the loop's scratch files (lk_unlock); write the exit code to LK_STATUS_FILE
    # when set.
    local rc=$?
    lk_attempt_drop
    lk_unlock
    if [ -n "${LK_STATUS_FILE:-}" ]; then
        printf '%s\n' "$rc" >"$LK_STATUS_FILE" 2>/dev/null || true
    fi
    return "$rc"
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
        if [ -n "$(lk_git ls-files -- "$stripped" 2>/dev/null)" ]; then
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

# --- trees: what is on disk, and bringing the disk to a tree -----------------------------

lk_live_tree() {
    # lk_live_tree [KEEP [EXPECT]] -> the tree id of the work tree as it stands: tracked and untracked
    # files, ignored ones and the state folder left out -- what lk-diff and lk-verify hash.
    # Built in a temporary index seeded from HEAD, never from a copy of the real index (whose
    # flags and stat data the worker can write: an assume-unchanged bit or a forged stat
    # hides a change from git). Right after an attempt (LK_FRESH_STAT, set by lk_attempt)
    # it starts from the stat cache lk-decide has just left instead (loopkit.evidence.statcache: an
    # index loopkit wrote once the worker had ended), so only files that changed since are
    # read again. With KEEP (a path in the git folder) the index is left there: it holds the
    # tree with stat data just taken from the files -- with EXPECT, only when the tree is
    # EXPECT (exit 2, the tree printed, when it could not be moved there). What the start's
    # rules ignored (LK_START_IGNORED) is left out too, even where the attempt's own
    # .gitignore lets it in: a park's save never holds the user's .env (and fan-out pushes
    # saves).
    local index tree state ok=0 path drop=() ndrop=0
    lk_git_path "loopkit-recipe-$$.index" index || return 1
    lk_rm_f "$index" "$index.lock"
    if [ -n "${LK_FRESH_STAT:-}" ] && [ -f "$LK_FRESH_STAT" ]; then
        cp -p -- "$LK_FRESH_STAT" "$index" || ok=1 # -p: its mtime (git's racy-entry rule)
    elif lk_git rev-parse -q --verify HEAD >/dev/null; then
        GIT_INDEX_FILE=$index lk_git read-tree HEAD || ok=1
    fi
    if [ "$ok" = 0 ]; then
        GIT_INDEX_FILE=$index lk_git -c advice.addEmbeddedRepo=false add -A -- . || ok=1
    fi
    if [ "$ok" = 0 ] && [ -n "${2:-}" ]; then
        # Expected to be EXPECT (a commit's verified tree): when it is, nothing of the state
        # folder or of what the start ignored is in it (EXPECT holds neither), and nothing
        # needs dropping. Else the drops below, and the tree written again.
        tree=$(GIT_INDEX_FILE=$index lk_git write-tree) || ok=1
        if [ "$ok" = 0 ] && [ "$tree" = "$2" ]; then
            if [ -n "${1:-}" ]; then mv -f -- "$index" "$1" || ok=2; fi
            lk_rm_f "$index" "$index.lock"
            printf '%s\n' "$tree"
            return "$ok" # 2: the tree is EXPECT, but its index could not be kept
        fi
        set -- "" "$2" # not EXPECT: the index is kept nowhere
    fi
    state=$(lk_state_rel)
    if [ "$ok" = 0 ]; then
        GIT_INDEX_FILE=$index lk_git rm -r --cached -q --ignore-unmatch -- \
            ':(top,literal).loopkit' ${state:+":(top,literal)$state"} >/dev/null || ok=1
    fi
    for path in ${LK_START_IGNORED[@]+"${LK_START_IGNORED[@]}"}; do
        case $path in .loopkit/ | "${state:-.loopkit}/") continue ;; esac # dropped above
        drop+=("${path%/}")
        ndrop=$((ndrop + 1))
    done
    if [ "$ok" = 0 ] && [ "$ndrop" -gt 0 ]; then
        printf '%s\0' "${drop[@]}" | GIT_INDEX_FILE=$index GIT_LITERAL_PATHSPECS=1 lk_git rm -r \
            --cached -q --ignore-unmatch --pathspec-from-file=- --pathspec-file-nul >/dev/null || ok=1
    fi
    if [ "$ok" = 0 ]; then
        tree=$(GIT_INDEX_FILE=$index lk_git write-tree) || ok=1
    fi
    if [ "$ok" = 0 ] && [ -n "${1:-}" ]; then
        mv -f -- "$index" "$1" || ok=1
    fi
    lk_rm_f "$index" "$index.lock"
    [ "$ok" = 0 ] || return 1
    printf '%s\n' "$tree"
}

lk_index_tree() {
    # The tree the real index holds (what is staged), written from a copy: the index itself
    # is not touched. Fails on unmerged paths.
    local real index tree ok=0
    real=$(lk_git_path index) || return 1
    index=$(lk_git_path "loopkit-recipe-$$.index") || return 1
    lk_rm_f "$index"
    if [ -f "$real" ]; then cp -- "$real" "$index" || return 1; fi
    tree=$(GIT_INDEX_FILE=$index lk_git write-tree 2>/dev/null) || ok=1
    lk_rm_f "$index" "$index.lock"
    [ "$ok" = 0 ] || return 1
    printf '%s\n' "$tree"
}

lk_sync_to() {
    # lk_sync_to TREE-ISH [INDEX-TREE]: make the work tree hold exactly TREE-ISH and the
    # index INDEX-TREE (default TREE-ISH). Ignored files and the state folder are left alone.
    # The index is rebuilt from the tree first -- the worker may have written the real one
    # (assume-unchanged or skip-worktree bits, forged stat data: a plain `git reset --hard`
    # then leaves its files on disk, hidden from `git status`) -- then untracked debris is
    # removed and every file whose content differs is written back. Only files that differ
    # are written: unchanged files keep their timestamps (no full rebuild after). What is
    # debris is untracked under both sets of ignore rules: the attempt's (a file it hid
    # with its own .gitignore was not saved: it stays on disk) and TREE-ISH's, whose
    # .gitignore files are written back first (an attempt that emptied .gitignore does
    # not get the user's ignored files -- local databases, .env -- deleted).
    local target=$1 index=${2:-$1} state path keep=() clean=1
    state=$(lk_state_rel)
    lk_git read-tree "$target" || return 1
    lk_git update-index -q --refresh >/dev/null 2>&1 || true # differing files are listed below
    # What the attempt's rules ignore now, and what the start's ignored (lk_start_dirty),
    # each as a literal pattern for `git clean -e`.
    while IFS= read -r -d '' path; do
        lk_keep_pattern "$path" || clean=0 # no pattern can name it: remove no debris
        keep+=(-e "$LK_PATTERN")
    done < <(lk_git ls-files -z --others --ignored --exclude-standard --directory)
    for path in ${LK_START_IGNORED[@]+"${LK_START_IGNORED[@]}"}; do
        lk_keep_pattern "$path" || clean=0
        keep+=(-e "$LK_PATTERN")
    done
    (
        set -o pipefail
        lk_git diff-files --name-only -z -- ':(glob)**/.gitignore' |
            lk_git checkout-index -f -u -z --stdin
    ) || return 1
    if [ "$clean" = 1 ]; then
        lk_git clean -fdq ${state:+-e "/$state/"} ${keep[@]+"${keep[@]}"} -- . || return 1
    else
        lk_log "an ignored file's name holds a line break: no untracked debris removed"
    fi
    (
        set -o pipefail
        lk_git diff-files --name-only -z | lk_git checkout-index -f -u -z --stdin
    ) || return 1
    if [ "$index" != "$target" ]; then
        lk_git read-tree "$index" || return 1
        lk_git update-index -q --refresh >/dev/null 2>&1 || true
    fi
}

# --- saving an attempt before any revert ---------------------------------------------

lk_save_parent() {
    # The parent a saved tree gets: where the attempt began (LK_DIFF_BASE, the user's
    # starting state under --allow-dirty), or HEAD once the branch moved on from there
    # (a commit since), or again the start when HEAD lost it (a reset): the commit the
    # task began from stays reachable from the saved ref whatever happened to the branch.
    local head
    head=$(lk_git rev-parse -q --verify HEAD) || return 0
    if [ -z "${LK_BASE:-}" ]; then
        printf '%s\n' "$head"
    elif [ "$head" = "$LK_BASE" ]; then
        printf '%s\n' "${LK_DIFF_BASE:-$LK_BASE}"
    elif lk_git merge-base --is-ancestor "$LK_BASE" "$head" 2>/dev/null; then
        printf '%s\n' "$head"
    else
        printf '%s\n' "${LK_DIFF_BASE:-$LK_BASE}"
    fi
}

lk_keep_commit() {
    # lk_keep_commit TASK LABEL COMMIT -> prints refs/loopkit/TASK/LABEL[-N], a new ref
    # that now holds COMMIT (never an existing one overwritten).
    local task label ref n=1
    task=$(lk_safe_name "$1")
    label=$(lk_safe_name "$2")
    ref=refs/loopkit/$task/$label
    while lk_git rev-parse -q --verify "$ref" >/dev/null; do
        n=$((n + 1))
        ref=refs/loopkit/$task/$label-$n
    done
    # The empty old value makes update-ref refuse to overwrite a ref that appeared meanwhile.
    lk_git update-ref -m "loopkit: save" "$ref" "$3" "" || return 1
    printf '%s\n' "$ref"
}

lk_save_attempt() {
    # lk_save_attempt TASK LABEL MESSAGE -> prints the ref that now holds the whole work
    # tree (tracked and untracked files, not ignored ones) as a commit (parent: see
    # lk_save_parent). The real index and the work tree are not touched.
    local tree parent commit
    tree=$(lk_live_tree) || return 1
    parent=$(lk_save_parent)
    commit=$(lk_git commit-tree "$tree" ${parent:+-p "$parent"} -m "$3") || return 1
    lk_keep_commit "$1" "$2" "$commit"
}

# --- where a task begins ------------------------------------------------------------------

lk_begin() {
    # lk_begin ALLOW_DIRTY: record where the task begins, for the ends of the ratchet:
    #   LK_BASE        the commit at HEAD; a commit or a park refuses once HEAD left it
    #   LK_BRANCH      the branch HEAD is on (empty when detached)
    #   LK_DIFF_BASE   what the worker's change is measured from (lk-diff --base)
    #   LK_START_TREE  the tree a park brings the work tree back to
    #   LK_START_INDEX the tree a park brings the index back to (empty: LK_START_TREE)
    # A dirty work tree is refused unless ALLOW_DIRTY is 1: then the user's starting state
    # is saved as refs/loopkit/<task>/user-start (a commit on LK_BASE) and becomes the diff
    # base -- the user's edits are not the worker's -- and a park restores it, staged
    # changes included.
    local ids=${LK_HEAD_SEEN:-} rest
    # The commit, its tree and the branch in one question: three lines, or no commit yet --
    # asked already by lk_setup_state, and taken when HEAD is still there (lk_branch_unmoved).
    LK_HEAD_SEEN=
    if [ -n "$ids" ]; then
        LK_BASE=${ids%%$'\n'*} LK_BRANCH=${ids##*$'\n'}
        case $LK_BRANCH in refs/*) ;; *) LK_BRANCH= ;; esac
        lk_branch_unmoved || ids=
    fi
    if [ -z "$ids" ]; then
        ids=$(lk_git rev-parse 'HEAD^{commit}' 'HEAD^{tree}' --symbolic-full-name HEAD 2>/dev/null) ||
            lk_die "$LK_EXIT_SETUP" "the repository has no commit yet"
    fi
    LK_BASE=${ids%%$'\n'*}
    rest=${ids#*$'\n'}
    LK_START_TREE=${rest%%$'\n'*}
    case $LK_BASE$'\n'$LK_START_TREE in
    *[!0-9a-f$'\n']* | $'\n'* | *$'\n') # files named HEAD^{commit} print as themselves
        lk_die "$LK_EXIT_SETUP" "the repository has no commit yet" ;;
    esac
    LK_BRANCH=${rest#*$'\n'}
    case $LK_BRANCH in refs/*) ;; *) LK_BRANCH= ;; esac # HEAD: detached
    LK_DIFF_BASE=$LK_BASE
    LK_START_INDEX=
    lk_start_dirty || return 0
    if [ "${1:-0}" != 1 ]; then
        lk_die "$LK_EXIT_SETUP" "the work tree has uncommitted changes; commit or stash them first (a park would revert them, a commit would sweep them in), or pass --allow-dirty"
    fi
    local index_tree ref staged=
    index_tree=$(lk_index_tree) ||
        lk_die "$LK_EXIT_SETUP" "--allow-dirty: the index cannot be recorded (unmerged paths? finish or abort the merge first)"
    ref=$(lk_save_attempt "$LK_TASK_ID" user-start "loopkit: the work tree as $LK_TASK_ID began (uncommitted changes, recorded by --allow-dirty)") ||
        lk_die "$LK_EXIT_SETUP" "--allow-dirty: could not record the work tree under refs/loopkit/"
    if ! LK_DIFF_BASE=$(lk_git rev-parse "$ref") || ! LK_START_TREE=$(lk_git rev-parse "$ref^{tree}"); then
        lk_die "$LK_EXIT_SETUP" "--allow-dirty: cannot read $ref"
    fi
    LK_START_INDEX=$index_tree
    if [ "$index_tree" != "$(lk_git rev-parse "$LK_BASE^{tree}")" ]; then
        if ! staged=$(lk_git commit-tree "$index_tree" -p "$LK_BASE" -m "loopkit: the index as $LK_TASK_ID began (staged changes, recorded by --allow-dirty)") ||
            ! staged=$(lk_keep_commit "$LK_TASK_ID" user-index "$staged"); then
            lk_die "$LK_EXIT_SETUP" "--allow-dirty: could not record the index under refs/loopkit/"
        fi
    fi
    lk_log "--allow-dirty: your uncommitted changes are recorded as $ref${staged:+ (what was staged as $staged)}; the worker's change is measured from there, and a park brings them back"
}

# --- committing ----------------------------------------------------------------------

lk_commit_paths() {
    # lk_commit_paths MESSAGE PATH...: commit just these paths (the checklist, the memory
    # file) if they changed; paths git ignores or outside the work tree are skipped. Like
    # every git call here, no hook runs (lk_git).
    local msg=$1
    shift
    local p rel keep=()
    for p in "$@"; do
        [ -n "$p" ] && [ -e "$p" ] || continue
        rel=$(lk_git ls-files --full-name --others --exclude-standard --cached -- "$p" 2>/dev/null | head -n 1)
        [ -n "$rel" ] || continue # ignored, or outside this work tree
        keep+=("$p")
    done
    [ "${#keep[@]}" -gt 0 ] || return 0
    lk_git add -- "${keep[@]}" || return 1
    if lk_git diff --cached --quiet --no-ext-diff -- "${keep[@]}"; then
        return 0
    fi
    local before after
    before=$(lk_git rev-parse -q --verify HEAD || true)
    lk_git commit -q --no-verify -m "$msg" -- "${keep[@]}" || return 1
    after=$(lk_git rev-parse -q --verify HEAD || true)
    [ "$after" != "$before" ]
}

# --- the memory file ------------------------------------------------------------------

lk_one_line() {
    # lk_one_line TEXT [MAX [VAR]]: squeeze text onto one bounded line; a cut one ends with
    # an ellipsis (lk_put).
    local text=${1//[$'\n\r\t']/ } max=${2:-300}
    # Linear in the text's length: `${text# }` and `${text#*  }` are not, in bash.
    while case $text in *'  '*) true ;; *) false ;; esac do text=${text//  / }; done
    case $text in ' '*) text=${text:1} ;; esac
    if [ "${#text}" -gt "$max" ]; then
        text="${text:0:$((max - 1))}…"
    fi
    lk_put "${3:-}" "$text"
}

lk_retrospective() {
    # lk_retrospective MEMORY_FILE DOC OUTCOME REF: append a short, human-reviewable note
    # on why a task was parked. Every later handoff carries the memory file.
    local memory=$1 doc=$2 outcome=$3 ref=$4
    [ -n "$memory" ] || return 0
    local id text attempt klass reason feedback judge checks
    lk_doc "$doc" || true
    id=$LK_DOC_TASK_ID text=$LK_DOC_TASK_TEXT attempt=$LK_DOC_ATTEMPT klass=$LK_DOC_CLASS
    reason=$LK_DOC_REASON feedback=$LK_DOC_FEEDBACK judge=$LK_DOC_JUDGE checks=$LK_DOC_FAILING
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
# They read the caller's LK_TASK_ID, LK_BASE, LK_BRANCH, LK_DIFF_BASE, LK_START_TREE and
# LK_START_INDEX (see lk_begin), LK_LABEL (the attempt, for the ref's name), LK_TASKS
# (TASKS.md, may be empty) and LK_RUN_DIR; lk_park and lk_complete exit.

lk_memory_file() {
    # The contract's memory file: MEMORY_FILE if set, else the newest document's contract,
    # else the workspace's (LK_MEMORY, from lk_setup_state).
    local doc m=${MEMORY_FILE:-}
    for doc in "$@"; do
        [ -z "$m" ] || break
        lk_doc "$doc" || true
        m=$LK_DOC_MEMORY
    done
    if [ -z "$m" ]; then
        printf '%s' "${LK_MEMORY:-}"
        return 0
    fi
    case $m in /*) printf '%s' "$m" ;; *) printf '%s/%s' "$LK_ROOT" "$m" ;; esac
}

lk_save() {
    # lk_save OUTCOME [LABEL] -> the ref holding the work tree; never returns on failure.
    local ref label=${2:-$LK_LABEL}
    ref=$(lk_save_attempt "$LK_TASK_ID" "$label" "loopkit: $LK_TASK_ID attempt $LK_LABEL ($1), saved by ${LK_PROG:-a recipe}") ||
        lk_die "$LK_EXIT_NO_COMMIT" "could not save the attempt under refs/loopkit/: NOT reverting anything"
    lk_log "saved the work tree of $LK_TASK_ID attempt $LK_LABEL as $ref"
    printf '%s' "$ref"
}

lk_short() {
    # lk_short REV [VAR]: REV abbreviated for a line of the log (lk_put). A full object id is cut to its
    # first 12 hex digits, with no git call (the happy path logs two); anything else (a
    # ref, HEAD) is git's own abbreviation.
    case $1 in
    *[!0-9a-f]* | '') ;;
    *)
        if [ "${#1}" -ge 40 ]; then
            lk_put "${2:-}" "${1:0:12}"
            return 0
        fi
        ;;
    esac
    local abbrev
    abbrev=$(lk_git rev-parse --short "$1" 2>/dev/null) || abbrev=$1
    lk_put "${2:-}" "$abbrev"
}

lk_branch_unmoved() {
    # True when the git folder's own files say at once that HEAD is on LK_BRANCH at LK_BASE
    # (or detached at LK_BASE): HEAD's text and the branch's loose ref, read with builtins
    # -- git prefers a loose ref to a packed one, so the loose one is the branch's value.
    # False proves nothing (a packed ref, a reftable, a ref being written, another work
    # tree than the one lk_setup_state found): git is asked.
    [ -n "${LK_GIT_DIR:-}" ] && [ -n "${LK_BASE:-}" ] && [ "$PWD" = "${LK_ROOT:-}" ] || return 1
    local head='' value='' common=$LK_GIT_DIR
    { IFS= read -r head <"$LK_GIT_DIR/HEAD"; } 2>/dev/null || return 1
    if [ -z "${LK_BRANCH:-}" ]; then
        [ "$head" = "$LK_BASE" ]
        return
    fi
    [ "$head" = "ref: $LK_BRANCH" ] || return 1
    if [ -e "$LK_GIT_DIR/commondir" ]; then # a linked worktree: branches live in the common folder
        { IFS= read -r common <"$LK_GIT_DIR/commondir"; } 2>/dev/null || return 1
        case $common in /*) ;; *) common=$LK_GIT_DIR/$common ;; esac
    fi
    { IFS= read -r value <"$common/$LK_BRANCH"; } 2>/dev/null || return 1
    [ "$value" = "$LK_BASE" ]
}

lk_branch_check() {
    # lk_branch_check WHAT [REF]: return when the branch is where the task began (HEAD at
    # LK_BASE, on LK_BRANCH); otherwise say so and exit 40, committing and reverting
    # nothing. A commit made meanwhile (by the user, or the worker's own), a reset
    # (`git reset --soft HEAD~2`) or a checkout all move it: committing or reverting then
    # would drop or bury someone's work. The work tree is saved first (REF, or saved here).
    # One move is undone, since that loses nothing: a branch rewound to an ancestor of
    # LK_BASE (commits dropped from it) is put back at LK_BASE; files and index stay.
    local what=$1 ref=${2:-} head branch where back=''
    lk_branch_unmoved && return 0
    # Both in one question while HEAD has a commit (a detached HEAD names itself "HEAD").
    head=$(lk_git rev-parse 'HEAD^{commit}' --symbolic-full-name HEAD 2>/dev/null || true)
    branch=${head#*$'\n'}
    head=${head%%$'\n'*}
    case $head in
    *[!0-9a-f]* | '') # no commit at HEAD (or a file of that name printed as itself)
        head=$(lk_git rev-parse -q --verify HEAD || true)
        branch=$(lk_git symbolic-ref -q HEAD || true)
        ;;
    *) case $branch in refs/*) ;; *) branch= ;; esac ;;
    esac
    [ "$head" = "$LK_BASE" ] && [ "$branch" = "${LK_BRANCH:-}" ] && return 0
    [ -n "$ref" ] || ref=$(lk_save "branch moved") || exit "$LK_EXIT_NO_COMMIT"
    where="${LK_BRANCH:-HEAD (detached)} was at $(lk_short "$LK_BASE"), now ${branch:-HEAD (detached)} is at $(lk_short "${head:-none}")"
    if [ -n "$head" ] && [ "$branch" = "${LK_BRANCH:-}" ] &&
        lk_git merge-base --is-ancestor "$head" "$LK_BASE" 2>/dev/null; then
        if lk_git update-ref -m "loopkit: $LK_TASK_ID: the branch back where the task began" HEAD "$LK_BASE" "$head"; then
            back=" It had been rewound to an ancestor (its last commits dropped): it is back at $(lk_short "$LK_BASE"), where the task began; the files and the index are as they were."
        else
            back=" It had been rewound to an ancestor: to put it back, git reset --soft $LK_BASE."
        fi
    elif [ -n "$head" ] && ! lk_git merge-base --is-ancestor "$LK_BASE" "$head" 2>/dev/null; then
        back=" The commit the task began from is no longer on it (it is kept: an ancestor of $ref)."
    fi
    lk_die "$LK_EXIT_NO_COMMIT" "$what refused: the branch moved since $LK_TASK_ID began ($where: a commit made meanwhile, the worker's own commit or reset, or a checkout). Nothing is committed or reverted: the work tree is left as it is and saved as $ref; the task is NOT marked.$back"
}

lk_notify() {
    # lk_notify EVENT [DOC]: run $LK_NOTIFY (--notify CMD) with DOC on stdin and the event
    # in LK_EVENT (complete, parked, blocked, cancelled, end) and the task in LK_TASK_ID.
    # notify-send, ntfy, a webhook through curl: whatever the command does, its failure
    # is said on stderr and never stops the loop.
    [ -n "${LK_NOTIFY:-}" ] || return 0
    local doc=${2:-/dev/null}
    [ -f "$doc" ] || doc=/dev/null
    if ! LK_EVENT=$1 LK_TASK_ID=${LK_TASK_ID:-} sh -c "$LK_NOTIFY" <"$doc" >/dev/null 2>&1; then
        lk_log "warning: the notify command failed for '$1' ($LK_NOTIFY)"
    fi
    return 0
}

lk_park() {
    # park CODE OUTCOME DOC: save, check the branch, revert, reset RESET_PATHS, record.
    local code=$1 outcome=$2 doc=$3 ref
    ref=$(lk_save "$outcome") || exit "$LK_EXIT_NO_COMMIT"
    lk_branch_check "the revert of $LK_TASK_ID" "$ref"
    lk_sync_to "$LK_START_TREE" "${LK_START_INDEX:-}" ||
        lk_die "$LK_EXIT_NO_COMMIT" "bringing the work tree back to where $LK_TASK_ID began failed (the attempt is saved as $ref)"
    if [ -n "${LK_START_INDEX:-}" ]; then
        lk_log "your uncommitted changes are back as they were when $LK_TASK_ID began (--allow-dirty)"
    elif lk_tree_dirty; then
        lk_log "warning: files the attempt hid from git (its own ignore rules) are left on disk, not deleted: see git status"
    fi
    lk_reset_paths || lk_die "$LK_EXIT_NO_COMMIT" "resetting RESET_PATHS failed (the attempt is saved as $ref)"
    lk_park_record "$code" "$outcome" "$doc" "$ref"
}

lk_park_record() {
    # lk_park_record CODE OUTCOME DOC REF: the retrospective, the parked mark, their commit;
    # exits CODE.
    local code=$1 outcome=$2 doc=$3 ref=$4 memory reason
    memory=$(lk_memory_file "$doc" "${LK_RUN_DIR:-.}/start.json")
    if [ -n "$memory" ]; then
        lk_retrospective "$memory" "$doc" "$outcome" "$ref" ||
            lk_die "$LK_EXIT_NO_COMMIT" "could not append the retrospective to $memory"
    fi
    if [ -n "${LK_TASKS:-}" ]; then
        lk_doc "$doc" || true
        reason=$(lk_one_line "$outcome: $LK_DOC_REASON" 200)
        lk-plan mark "${LK_TASKS:-}" --task "$LK_TASK_ID" --status parked --reason "$reason" ||
            lk_die "$LK_EXIT_NO_COMMIT" "lk-plan mark $LK_TASK_ID parked failed"
    fi
    lk_commit_paths "loopkit: park $LK_TASK_ID ($outcome)" "$memory" "${LK_TASKS:-}" ||
        lk_die "$LK_EXIT_NO_COMMIT" "the commit of the park record (memory, checklist) failed"
    lk_log "parked $LK_TASK_ID ($outcome); the attempt is saved as $ref"
    if [ "$code" = 20 ]; then lk_notify blocked "$doc"; else lk_notify parked "$doc"; fi
    exit "$code"
}

lk_no_verified_tree() {
    # lk_no_verified_tree TREE: the decided document names no tree object its checks ran
    # on: nothing is committed, the work tree is saved; exits 40.
    local ref
    ref=$(lk_save "complete, no verified tree") || exit "$LK_EXIT_NO_COMMIT"
    lk_die "$LK_EXIT_NO_COMMIT" "the decided document names no tree its checks ran on (verify.tree '${1:-}'): nothing committed; the work tree is left as it is and saved as $ref; the task is NOT marked done"
}

lk_commit_verified() {
    # lk_commit_verified DOC: commit the tree the decided document's checks ran on
    # (verify.tree: lk-decide completes only when it is the tree on disk, and lk-verify ran
    # the checks in a clean checkout of exactly it) -- never a fresh `git add -A`, which
    # would take whatever a process the worker left running wrote since. The commit
    # (`git commit-tree`, no hook runs) goes on LK_DIFF_BASE and the branch moves to it from
    # LK_BASE (`git update-ref` with the old value: refused if the branch moved meanwhile).
    # Then the index and the work tree are brought to the commit; if the work tree changed
    # since the checks ran, it is saved first under refs/loopkit/<task>/<attempt>-after-verify.
    # Exits 40 (the task not marked) when the commit cannot land.
    local doc=$1 tree subject attempt_id why msg new ref live kept real short
    lk_doc "$doc" || lk_die "$LK_EXIT_NO_COMMIT" "$doc: cannot read the decided document; nothing committed"
    tree=$LK_DOC_TREE
    case $tree in
    '' | *[!0-9a-f]*) lk_no_verified_tree "$tree" ;; # not an object id at all
    esac
    lk_branch_check "the commit of $LK_TASK_ID"
    lk_one_line "$LK_DOC_TASK_TEXT" 72 subject
    attempt_id=$LK_DOC_ATTEMPT_ID
    lk_one_line "$LK_DOC_REASON" 300 why
    printf -v msg 'loopkit: %s: %s\n\n%s\n\nLoopkit-Task: %s\nLoopkit-Attempt: %s\nLoopkit-Tree: %s' \
        "$LK_TASK_ID" "${subject:-$LK_TASK_ID}" "${why:-complete}" "$LK_TASK_ID" "${attempt_id:-$LK_LABEL}" "$tree"
    if ! new=$(lk_git commit-tree "$tree" -p "${LK_DIFF_BASE:-$LK_BASE}" -m "$msg"); then
        # commit-tree takes a tree object alone (not a commit, not a blob): asked only now
        # whether that is what failed, or the commit itself.
        [ "$(lk_git cat-file -t "$tree" 2>/dev/null)" = tree ] || lk_no_verified_tree "$tree"
        ref=$(lk_save "complete, commit failed") || exit "$LK_EXIT_NO_COMMIT"
        lk_die "$LK_EXIT_NO_COMMIT" "the commit of $LK_TASK_ID failed (no user.name / user.email?): the loop stops; the green tree is left on disk and saved as $ref; the task is NOT marked done"
    fi
    if ! lk_git update-ref -m "loopkit: $LK_TASK_ID complete" HEAD "$new" "$LK_BASE"; then
        ref=$(lk_save "complete, branch moved") || exit "$LK_EXIT_NO_COMMIT"
        lk_die "$LK_EXIT_NO_COMMIT" "the commit of $LK_TASK_ID refused: the branch moved while it was being committed; nothing is committed or reverted (the refused commit is $new); the work tree is left as it is and saved as $ref; the task is NOT marked done"
    fi
    lk_short "$new" short
    lk_log "committed $LK_TASK_ID as $short: the tree its checks ran on"
    # The index that hashes the work tree becomes the real one when the files are the
    # commit's (built from HEAD and the files, not from the worker's index: nothing is read
    # twice); lk_live_tree moves it there only then.
    if ! lk_git_path index real || [ -d "$real" ]; then # (mv would put it inside a directory)
        real=
    fi
    live=$(lk_live_tree "$real" "$tree")
    kept=$?
    if [ "$live" != "$tree" ]; then
        ref=$(lk_save "changed after verification" "$LK_LABEL-after-verify") ||
            lk_die "$LK_EXIT_NO_COMMIT" "$LK_TASK_ID is committed, but the work tree changed after its checks ran and could not be saved: left as it is; the task is NOT marked done"
        lk_log "the work tree changed after the checks ran (a process the worker left running?): the commit holds the tree that was checked; what was on disk is saved as $ref"
        lk_sync_to HEAD ||
            lk_die "$LK_EXIT_NO_COMMIT" "$LK_TASK_ID is committed, but the work tree could not be brought to the commit (what was on disk is saved as $ref); the task is NOT marked done"
        if lk_tree_dirty; then
            lk_log "warning: the work tree still differs from the commit (is something still writing into it?): see git status"
        fi
    elif [ "$kept" != 0 ] || [ -z "$real" ]; then
        # The files are the commit's already: only the index follows (rebuilt, not trusted).
        lk_git read-tree HEAD ||
            lk_die "$LK_EXIT_NO_COMMIT" "$LK_TASK_ID is committed, but the index could not be brought to the commit; the task is NOT marked done"
        lk_git update-index -q --refresh >/dev/null 2>&1 || true
    fi
}

lk_mark_done() {
    # The task is marked done only once its commit landed; the mark is committed on its own.
    [ -n "${LK_TASKS:-}" ] || return 0
    lk-plan mark "${LK_TASKS:-}" --task "$LK_TASK_ID" --status "done" ||
        lk_die "$LK_EXIT_NO_COMMIT" "$LK_TASK_ID is committed but lk-plan mark failed"
    lk_commit_paths "loopkit: mark $LK_TASK_ID done" "${LK_TASKS:-}" ||
        lk_die "$LK_EXIT_NO_COMMIT" "$LK_TASK_ID is committed but the commit of its checklist mark failed"
}

lk_complete() {
    # complete DOC: commit the verified tree, then mark the task done; exits 0.
    lk_commit_verified "$1"
    lk_mark_done
    lk_notify complete "$1"
    exit 0
}

lk_abspath() {
    # lk_abspath PATH [VAR]: PATH made absolute against the current directory (no symlinks
    # resolved; lk_put)
    case $1 in /*) lk_put "${2:-}" "$1" ;; *) lk_put "${2:-}" "$PWD/$1" ;; esac
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

lk_attempt_early() {
    # Starts the first round's `lk attempt --early` now, as a coprocess of the loop (bash
    # 4.3 and later; else it returns 1 and lk_attempt starts its command then): Python
    # and the modules an attempt needs load while the recipe does its own work, and
    # lk_attempt hands it the round's call (lk_attempt_call). Its parent is the loop
    # itself (a kill -9 of the loop ends it, and the worker with it); a loop that ends
    # before the call closes its stdin, and it ends without running anything. The first
    # round only: before any worker of the loop has run, no process it left behind can
    # write into that stdin (through /proc/PID/fd, without the sandbox) a call of its own;
    # later rounds take their call on the command line, as before.
    [ -z "${LK_EARLY_PID:-}" ] || return 0
    [ "${LK_EARLY:-1}" != 0 ] || return 1
    [ "${BASH_VERSINFO[0]}" -gt 4 ] || { [ "${BASH_VERSINFO[0]}" = 4 ] && [ "${BASH_VERSINFO[1]}" -ge 3 ]; } ||
        return 1
    # eval: bash 3.2 cannot even parse coproc and {fd} redirections. The ends are copied
    # to descriptors of the loop's own: bash closes a coprocess's when it has ended,
    # perhaps before its output was read -- and forgets its name and pid at once when it
    # ended at once (lk cannot start): then there is no early attempt, and no error.
    LK_EARLY_IN='' LK_EARLY_OUT=''
    eval 'coproc LK_EARLY_CO { exec lk attempt --early; }' || return 1
    LK_EARLY_PID=${LK_EARLY_CO_PID:-}
    local ends=''
    eval 'ends=${LK_EARLY_CO[0]:-}:${LK_EARLY_CO[1]:-}'
    case $ends in [0-9]*:[0-9]*) ;; *) ends='' ;; esac
    if [ -z "$LK_EARLY_PID" ] || [ -z "$ends" ] ||
        ! eval 'exec {LK_EARLY_IN}>&"${ends#*:}" {LK_EARLY_OUT}<&"${ends%%:*}"' 2>/dev/null; then
        lk_attempt_drop
        return 1
    fi
    eval "exec ${ends#*:}>&-" # the loop keeps one end to write: its own
}

lk_attempt_drop() {
    # Ends an early `lk attempt` no round was handed (the loop's EXIT trap): at once,
    # not when it has loaded and found its stdin closed; and closes the loop's ends of its
    # pipes, so that no later child holds them.
    if [ -n "${LK_EARLY_PID:-}" ]; then
        kill "$LK_EARLY_PID" 2>/dev/null
        wait "$LK_EARLY_PID" 2>/dev/null
        LK_EARLY_PID=
    fi
    [ -z "${LK_EARLY_IN:-}" ] || eval 'exec {LK_EARLY_IN}>&-'
    [ -z "${LK_EARLY_OUT:-}" ] || eval 'exec {LK_EARLY_OUT}<&-'
    LK_EARLY_IN='' LK_EARLY_OUT=''
}

# shellcheck disable=SC2153 # LK_EARLY_IN and LK_EARLY_OUT are set in lk_attempt_early's eval
lk_early_send() {
    # lk_early_send COUNT FIELD...: writes a call's fields (COUNT of them after it) to the
    # early `lk attempt`, false when it cannot take them. SIGPIPE is ignored meanwhile (no
    # subshell): a process that has ended fails the write, not the loop.
    local ok=0
    trap '' PIPE
    { printf '%s\0' "$@" >&"$LK_EARLY_IN"; } 2>/dev/null || ok=1
    trap - PIPE
    return "$ok"
}

lk_workspace_call() {
    # lk_workspace_call DOC workspace [--contract FILE]: `lk workspace`'s answer for the
    # document DOC from the early `lk attempt` (lk_attempt_early), which goes on waiting
    # for the round's call: `out` its output, `rc` its exit code (the caller's). False
    # (nothing set) when there is no early process, or it did not answer: the early
    # process is then ended, and the caller asks `lk workspace` itself.
    [ -n "${LK_EARLY_PID:-}" ] || return 1
    if lk_early_send "$((2 + $#))" "$PWD" "$1" "$(($# - 1))" "${@:2}" &&
        IFS= read -r -d '' out <&"$LK_EARLY_OUT" && IFS= read -r -d '' rc <&"$LK_EARLY_OUT"; then
        case $rc in '' | *[!0-9]*) ;; *) return 0 ;; esac
    fi
    lk_attempt_drop
    return 1
}

# shellcheck disable=SC2153 # LK_EARLY_IN and LK_EARLY_OUT are set in lk_attempt_early's eval
lk_attempt_call() {
    # lk_attempt_call IN ARGS...: hands the early `lk attempt` (lk_attempt_early) its call
    # -- ARGS, the document IN, the working directory and the environment as they stand
    # now -- and waits for it: LK_EARLY_RC its exit code, LK_EARLY_FIELDS what it printed.
    local in=$1 name env=()
    shift
    case $in in /*) ;; *) in=$PWD/$in ;; esac
    for name in $(compgen -e); do
        [ -z "${!name+set}" ] || env+=("$name=${!name}") # exported and set: in the environment
    done
    lk_early_send "$((3 + $# + ${#env[@]}))" "$PWD" "$in" "$#" "$@" ${env[@]+"${env[@]}"}
    eval 'exec {LK_EARLY_IN}>&-'
    LK_EARLY_IN='' LK_EARLY_FIELDS=''
    IFS= read -r -d '' LK_EARLY_FIELDS <&"$LK_EARLY_OUT"
    eval 'exec {LK_EARLY_OUT}<&-'
    LK_EARLY_OUT=''
    wait "$LK_EARLY_PID"
    LK_EARLY_RC=$?
    LK_EARLY_PID=
}

# shellcheck disable=SC2154 # cargs is the caller's
lk_attempt() {
    # lk_attempt IN P BASE [ARGS...] -> the decision's exit code. One attempt, admission to
    # decision, in one process (`lk attempt`: lk-decide --admit, lk-invoke, lk-diff --base
    # BASE, lk-verify, lk-judge for a goal whose checks pass, lk-decide -- each stage the
    # published command itself), on the document IN. Every stage's document is kept as
    # P-<stage>.json beside its stderr (P-<stage>.err); LK_LAST names the last one written
    # (P-decide.json, or P-admit.json when admission refused), LK_FRESH_STAT the stat cache
    # lk-decide left (see lk_live_tree). ARGS go to lk attempt (--resume ID). Uses the
    # caller's cargs (contract arguments).
    local in=$1 p=$2 base=$3 rc stage fields
    shift 3
    LK_FRESH_STAT=
    set -- --keep "$p" --shell ${cargs[@]+"${cargs[@]}"} --base "$base" "$@"
    if [ -n "${LK_EARLY_PID:-}" ]; then
        lk_attempt_call "$in" "$@"
        rc=$LK_EARLY_RC fields=$LK_EARLY_FIELDS
    else
        # exec: lk attempt is the loop's own child, not a subshell's -- so it (and the
        # worker with it) ends when the loop is killed (its parent-death signal).
        fields=$(exec lk attempt "$@" <"$in")
        rc=$?
    fi
    LK_LAST=
    for stage in decide judge verify diff invoke admit; do
        if [ -s "$p-$stage.json" ]; then
            LK_LAST=$p-$stage.json
            break
        fi
    done
    LK_DOC_FILE=
    if [ -n "$fields" ] && [ -n "$LK_LAST" ]; then
        # The last document's fields, as lk_doc would read them (no jq call): quoted for
        # the shell by lk attempt itself.
        eval "$fields"
        LK_DOC_FILE=$LK_LAST
    fi
    if [ "$LK_LAST" = "$p-decide.json" ]; then
        # lk-decide has just hashed the work tree through loopkit's stat cache and left it
        # there; no worker has run since: lk_live_tree may start from it.
        LK_FRESH_STAT=$LK_STATE/stat-index
    fi
    lk_note "${task_id:-?} round ${round:-?}: lk attempt exited $rc (${LK_LAST:-no document})"
    return "$rc"
}
