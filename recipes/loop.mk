# loop.mk -- the ratchet as make targets (GNU make >= 3.82, bash).
#
#   make -f recipes/loop.mk loop CONTRACT=loop.yaml TASK_ID=fix-value TASK='Make value good'
#   make -f recipes/loop.mk loop START=next.json TASKS=TASKS.md
#   make -f recipes/loop.mk phased TASKS=TASKS.md CONTRACT=loop.yaml
#
# Targets:
#   loop    one task: rounds until it is committed or parked. The round's files under
#           .loopkit/runs/<task>/<run>/ are made one from the other, like the pipe:
#             IN -> N-invoke.json -> N-diff.json -> N-verify.json
#                -> N-judged.json (lk-judge for a GOAL whose checks passed) -> N-decide.json
#           admission (lk-decide --admit) before each round; retry/replan feeds N-decide.json
#           (its feedback) into the next round, the broken code left on disk, the worker's
#           session resumed, backoff_s slept.
#   round   one such chain (R=<prefix> IN=<document> BASE=<commit> [SESSION=<id>]).
#   phased  every ready task of TASKS.md in turn (lk-plan next), then `lk report`.
#
# The ends of the ratchet are the `lk task` steps loop.sh takes too: `lk task land` commits
# only green, and exactly the tree its checks ran on (verify.tree, commit-tree + a guarded
# update-ref: no hook runs; a failed commit stops: 40, nothing marked); `lk task save`
# keeps a red tree under refs/loopkit/; `lk task park` saves before any revert, brings the
# work tree back to where the task began + RESET_PATHS, writes the retrospective and marks
# the task. A commit or a park refuses when the branch moved (40); one loop per work tree
# (a second one: 4); a loop stopped at any point is finished by the plain rerun.
#
# make turns every failing recipe into its own exit status 2; the loop's real exit code
# (0, 20, 21, 22, 30, 40, 41, or a command's) is written to STATUS=<file> when given.

SHELL := /bin/bash
.SHELLFLAGS := -u -c
.ONESHELL:
.DEFAULT_GOAL := help
.PHONY: help loop round phased

HERE := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
THIS := $(HERE)/loop.mk
LOG := . "$(HERE)/log.sh"; LK_PROG=loop.mk

CONTRACT ?=
TASKS ?=
START ?=
TASK_ID ?=
TASK ?=
STATUS ?=
MAX_ROUNDS ?= 50
# Values that may hold quotes or spaces reach the shell through the environment.
export TASK_ID TASK RESET_PATHS MEMORY_FILE LK_RESUME

CONTRACT_ABS := $(if $(CONTRACT),$(abspath $(CONTRACT)))
TASKS_ABS := $(if $(TASKS),$(abspath $(TASKS)))
START_ABS := $(if $(START),$(abspath $(START)))
CARGS := $(if $(CONTRACT_ABS),--contract "$(CONTRACT_ABS)")
# Not $(MAKE) itself in the recipes: with .ONESHELL that would make `make -n loop` run the
# whole loop; through this variable `make -n` only prints it.
SUBMAKE = $(MAKE) -s --no-print-directory -f "$(THIS)"

help:
	@sed -n '2,27s/^# \{0,1\}//p' "$(THIS)"

# --- one round: each stage's document made from the previous one ----------------------------
ifneq ($(R),)
round: $(R)-decide.json

$(R)-invoke.json: $(IN)
	@lk-invoke $(CARGS) $(if $(SESSION),--resume "$(SESSION)") <"$<" >"$@.part"; rc=$$?
	[ $$rc -le 1 ] || exit $$rc
	mv "$@.part" "$@"

$(R)-diff.json: $(R)-invoke.json
	@lk-diff $(CARGS) --base "$(BASE)" <"$<" >"$@.part"; rc=$$?
	[ $$rc -le 1 ] || exit $$rc
	mv "$@.part" "$@"

$(R)-verify.json: $(R)-diff.json
	@lk-verify $(CARGS) <"$<" >"$@.part"; rc=$$?
	[ $$rc -le 1 ] || exit $$rc
	echo $$rc >"$(R)-verify.rc"
	mv "$@.part" "$@"

$(R)-judged.json: $(R)-verify.json
	@if [ "$$(cat "$(R)-verify.rc")" = 0 ] && [ "$(KIND)" = goal ]; then
	    lk-judge $(CARGS) <"$<" >"$@.part"; rc=$$?
	    [ $$rc -le 1 ] || exit $$rc
	    mv "$@.part" "$@"
	else
	    cp "$<" "$@"
	fi

$(R)-decide.json: $(R)-judged.json
	@lk-decide $(CARGS) <"$<" >"$@.part"; echo $$? >"$(R)-decide.rc"
	mv "$@.part" "$@"
endif

# --- one task -----------------------------------------------------------------------------------
loop:
	@$(LOG)
	status="$(if $(STATUS),$(abspath $(STATUS)))"
	trap 'rc=$$?; [ -z "$$status" ] || echo $$rc >"$$status"' EXIT
	if [ -n "$$TASK_ID" ]; then start=(--task-id "$$TASK_ID" --task "$${TASK:-$$TASK_ID}")
	elif [ -n "$(START_ABS)" ]; then start=("$(START_ABS)")
	else lk_die 2 "give TASK_ID=... (and TASK=...) or START=<attempt document>"; fi
	out=$$(lk task begin "$${start[@]}" $(CARGS) $(if $(TASKS_ABS),--tasks "$(TASKS_ABS)") --owner $$$$ --shell) || exit $$?
	eval "$$out"
	trap 'rc=$$?; lk task end --owner $$$$ >/dev/null; [ -z "$$status" ] || echo $$rc >"$$status"' EXIT
	[ -z "$${LK_FINISHED:-}" ] || exit "$$LK_FINISHED" # the stopped loop's task, finished by begin
	in=$$LK_START session=
	for round in $$(seq 1 $(MAX_ROUNDS)); do
	    R=$$LK_RUN_DIR/$$round
	    lk-decide --admit $(CARGS) <"$$in" >"$$R-admit.json"; rc=$$?
	    case $$rc in
	    0) ;;
	    20 | 22) lk task park "$$R-admit.json" >/dev/null || exit $$?; exit $$rc ;;
	    30) lk task cancel "$$R-admit.json" >/dev/null || exit $$?; exit 30 ;;
	    *) lk_die "$$rc" "lk-decide --admit failed with exit $$rc" ;;
	    esac
	    session_arg=; [ "$${LK_RESUME:-auto}" = never ] || session_arg=$$session
	    $(SUBMAKE) round R="$$R" IN="$$R-admit.json" BASE="$$LK_DIFF_BASE" KIND="$$LK_TASK_KIND" \
	        SESSION="$$session_arg" CONTRACT="$(CONTRACT_ABS)" || lk_die "$$?" "round $$round failed; see $$LK_RUN_DIR"
	    drc=$$(cat "$$R-decide.rc") last=$$R-decide.json
	    case $$drc in
	    0) lk task land "$$last" >/dev/null || exit $$?; exit 0 ;;
	    10 | 11)
	        out=$$(lk task save --doc "$$last" --shell) || exit $$?
	        eval "$$out" # the decision's fields: LK_DOC_BACKOFF, LK_DOC_SESSION, ...
	        case $$LK_DOC_BACKOFF in '' | 0 | 0.0 | *[!0-9.]*) ;; *) lk_log "waiting $${LK_DOC_BACKOFF}s"; sleep "$$LK_DOC_BACKOFF" ;; esac
	        session=$$LK_DOC_SESSION in=$$last
	        ;;
	    20 | 21 | 22) lk task park "$$last" >/dev/null || exit $$?; exit $$drc ;;
	    30) lk task cancel "$$last" >/dev/null || exit $$?; exit 30 ;;
	    *) lk_die "$$drc" "lk-decide failed with exit $$drc" ;;
	    esac
	done
	lk task save runaway >/dev/null
	lk_die 41 "more than $(MAX_ROUNDS) rounds (saved under refs/loopkit/)"

# --- a whole TASKS.md ----------------------------------------------------------------------------
phased:
	@$(LOG)
	out=$$(lk workspace $(CARGS) </dev/null) || exit $$?
	eval "$$out" # root, state_dir, contract (CONTRACT=, else ./loop.yaml)
	lk task begin --owner $$$$ >/dev/null || exit $$? # the lock for the whole run
	export LK_LOCK_OWNER=$$$$ # each task's loop works under it
	trap 'lk task end --owner $$$$ >/dev/null' EXIT
	tasks="$(or $(TASKS_ABS),$$root/TASKS.md)"
	mkdir -p "$$state_dir/runs"
	next=$$state_dir/runs/next.json status=$$state_dir/runs/make-status handled=' ' parked=0
	while :; do
	    lk-plan next "$$tasks" --contract "$$contract" >"$$next"; rc=$$?
	    [ $$rc = 1 ] && break
	    [ $$rc = 0 ] || lk_die "$$rc" "lk-plan next failed with exit $$rc"
	    eval "$$(lk workspace <"$$next")" # task: its id
	    case $$handled in *" $$task "*) lk_die 41 "task $$task came back after it was handled" ;; esac
	    handled="$$handled$$task "
	    # The task's scope travels in its document: no CONTRACT= for the round.
	    $(SUBMAKE) loop START="$$next" TASKS="$$tasks" CONTRACT= \
	        TASK_ID= STATUS="$$status"
	    rc=$$(cat "$$status" 2>/dev/null || echo 70)
	    case $$rc in
	    0) ;;
	    20 | 21 | 22) parked=$$((parked + 1)) ;;
	    *) lk report; lk_die "$$rc" "task $$task stopped the run (exit $$rc)" ;;
	    esac
	done
	lk report
	[ "$$parked" = 0 ]
