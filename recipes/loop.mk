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
# The ends of the ratchet are lib.sh's lk_complete and lk_park -- the same code as loop.sh:
# commit only green, and exactly the tree its checks ran on (verify.tree, through
# commit-tree + update-ref: no hook runs, the contract's criteria are the gate; a failed
# commit stops: 40, nothing marked), save the tree under refs/loopkit/ before any revert,
# then the work tree back to where the task began + RESET_PATHS, the retrospective in the
# memory file, the task marked only after its commit landed. A commit or a park refuses
# when the branch moved (40); one loop per work tree (a second one: 4).
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
LIB := . "$(HERE)/lib.sh"; LK_PROG=loop.mk

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
	@$(LIB)
	if [ "$$(cat "$(R)-verify.rc")" = 0 ] && [ "$$(lk_json "$<" .task.kind)" = goal ]; then
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
	@$(LIB)
	LK_STATUS_FILE="$(if $(STATUS),$(abspath $(STATUS)))"
	trap lk_on_exit EXIT
	lk_setup_state "$(CONTRACT_ABS)"
	cd "$$LK_ROOT" || exit 4
	lk_lock
	lk_reset_paths_check
	run_id=$$(date -u +%Y%m%dT%H%M%SZ)-$$$$
	mkdir -p "$$LK_STATE/runs"
	start=$$LK_STATE/runs/.start-$$run_id.json
	if [ -n "$$TASK_ID" ]; then
	    lk_task_doc "$$TASK_ID" "$${TASK:-$$TASK_ID}" >"$$start" || exit 3
	elif [ -n "$(START_ABS)" ]; then
	    cp -- "$(START_ABS)" "$$start" || exit 3
	else
	    lk_die 2 "give TASK_ID=... (and TASK=...) or START=<attempt document>"
	fi
	LK_TASK_ID=$$(lk_json "$$start" .task.id)
	[ -n "$$LK_TASK_ID" ] || lk_die 3 "the start document names no task (.task.id)"
	LK_RUN_DIR=$$LK_STATE/runs/$$(lk_safe_name "$$LK_TASK_ID")/make-$$run_id
	mkdir -p "$$LK_RUN_DIR" && mv -- "$$start" "$$LK_RUN_DIR/start.json"
	lk_begin 0
	lk_mark_attempt
	LK_TASKS="$(TASKS_ABS)" LK_LABEL=start
	in=$$LK_RUN_DIR/start.json session=
	for round in $$(seq 1 $(MAX_ROUNDS)); do
	    R=$$LK_RUN_DIR/$$round
	    lk-decide --admit $(CARGS) <"$$in" >"$$R-admit.json"; rc=$$?
	    case $$rc in
	    0) ;;
	    20) lk_park 20 blocked "$$R-admit.json" ;;
	    22) lk_park 22 budget_exhausted "$$R-admit.json" ;;
	    30) ref=$$(lk_save cancelled) || exit 40; lk_log "cancelled (saved as $$ref)"; exit 30 ;;
	    *) lk_die "$$rc" "lk-decide --admit failed with exit $$rc" ;;
	    esac
	    session_arg=; [ "$${LK_RESUME:-auto}" = never ] || session_arg=$$session
	    $(SUBMAKE) round R="$$R" IN="$$R-admit.json" BASE="$$LK_DIFF_BASE" \
	        SESSION="$$session_arg" CONTRACT="$(CONTRACT_ABS)" || lk_die "$$?" "round $$round failed; see $$LK_RUN_DIR"
	    drc=$$(cat "$$R-decide.rc") last=$$R-decide.json
	    LK_LABEL=$$(lk_json "$$last" .decision.attempt); LK_LABEL=$${LK_LABEL:-$$round}
	    outcome=$$(lk_json "$$last" .decision.outcome)
	    lk_log "$$LK_TASK_ID attempt $$LK_LABEL: $$outcome -- $$(lk_one_line "$$(lk_json "$$last" .decision.reason)" 200)"
	    case $$drc in
	    0) lk_complete "$$last" ;;
	    10 | 11)
	        lk_save "$${outcome:-retry}" >/dev/null || exit 40
	        backoff=$$(lk_json "$$last" .decision.backoff_s)
	        case $$backoff in '' | 0 | 0.0 | *[!0-9.]*) ;; *) lk_log "waiting $${backoff}s"; sleep "$$backoff" ;; esac
	        session=$$(lk_json "$$last" .run.session_id) in=$$last
	        ;;
	    20 | 21 | 22) lk_park "$$drc" "$$outcome" "$$last" ;;
	    30) ref=$$(lk_save cancelled) || exit 40; lk_log "cancelled (saved as $$ref)"; exit 30 ;;
	    *) lk_die "$$drc" "lk-decide failed with exit $$drc" ;;
	    esac
	done
	ref=$$(lk_save runaway) || exit 40
	lk_die "$$LK_EXIT_RUNAWAY" "more than $(MAX_ROUNDS) rounds (saved as $$ref)"

# --- a whole TASKS.md ----------------------------------------------------------------------------
phased:
	@$(LIB)
	lk_setup_state "$(CONTRACT_ABS)"
	cd "$$LK_ROOT" || exit 4
	lk_lock # held for the whole run: each task's loop runs under it
	tasks="$(or $(TASKS_ABS),$$LK_ROOT/TASKS.md)" contract="$(or $(CONTRACT_ABS),$$LK_ROOT/loop.yaml)"
	mkdir -p "$$LK_STATE/runs"
	next=$$LK_STATE/runs/next.json status=$$LK_STATE/runs/make-status handled=' ' parked=0
	while :; do
	    lk-plan next "$$tasks" --contract "$$contract" >"$$next"; rc=$$?
	    [ $$rc = 1 ] && break
	    [ $$rc = 0 ] || lk_die "$$rc" "lk-plan next failed with exit $$rc"
	    id=$$(lk_json "$$next" .task.id)
	    case $$handled in *" $$id "*) lk_die 41 "task $$id came back after it was handled" ;; esac
	    handled="$$handled$$id "
	    # The task's scope travels in its document: no CONTRACT= for the round.
	    $(SUBMAKE) loop START="$$next" TASKS="$$tasks" CONTRACT= \
	        TASK_ID= STATUS="$$status"
	    rc=$$(cat "$$status" 2>/dev/null || echo 70)
	    case $$rc in
	    0) ;;
	    20 | 21 | 22) parked=$$((parked + 1)) ;;
	    *) lk report; lk_die "$$rc" "task $$id stopped the run (exit $$rc)" ;;
	    esac
	done
	lk report
	[ "$$parked" = 0 ]
