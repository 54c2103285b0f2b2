# shellcheck shell=bash
# loopkit recipes: logging and notifying -- the only shell the recipes share. Every
# guarantee of the ratchet (the lock, saves, landing, parking, recovery) is a command:
# `lk task`. LK_PROG names the recipe; LK_STATE, once known, gets a copy of each line.

lk_now() { TZ=UTC0 printf -v "$1" '%(%Y-%m-%dT%H:%M:%SZ)T' -1; } # lk_now VAR: the time, no fork

lk_log() { # lk_log MESSAGE...: one line on stderr and in $LK_STATE/recipes.log
    local line now
    lk_now now
    line="$now ${LK_PROG:-loopkit}: $*"
    printf '%s\n' "$line" >&2
    [ -z "${LK_STATE:-}" ] || [ ! -d "$LK_STATE" ] || printf '%s\n' "$line" >>"$LK_STATE/recipes.log" 2>/dev/null || true
}

lk_note() { # lk_note MESSAGE...: into the log file only (and stderr with LK_VERBOSE=1)
    if [ "${LK_VERBOSE:-0}" = 1 ]; then lk_log "$@"; return 0; fi
    local now
    lk_now now
    [ -z "${LK_STATE:-}" ] || [ ! -d "$LK_STATE" ] ||
        printf '%s %s: %s\n' "$now" "${LK_PROG:-loopkit}" "$*" >>"$LK_STATE/recipes.log" 2>/dev/null || true
}

lk_die() { # lk_die CODE MESSAGE...
    local code=$1
    shift
    lk_log "error: $*"
    exit "$code"
}

lk_notify() { # lk_notify EVENT [DOC]: $LK_NOTIFY (sh -c) with DOC on stdin; never fatal
    [ -n "${LK_NOTIFY:-}" ] || return 0
    local doc=${2:-/dev/null}
    [ -f "$doc" ] || doc=/dev/null
    LK_EVENT=$1 LK_TASK_ID=${LK_TASK_ID:-} sh -c "$LK_NOTIFY" <"$doc" >/dev/null 2>&1 ||
        lk_log "warning: the notify command failed for '$1' ($LK_NOTIFY)"
}
