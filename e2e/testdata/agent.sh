#!/bin/sh
# agent.sh is the scripted agent of loopr's end-to-end tests. It keeps the
# agent contract of docs/agent-contract.md (the prompt on stdin, the LOOPR_* environment,
# the artifact at $LOOPR_ARTIFACT, the exit status) and behaves as the
# tests need:
#
#   agent.sh tree               a plan of 2 specs, each of 2 phases, each of 2
#                               tasks (15 loops); the first phase to run names
#                               its Task 1 "Fragile task", which leaves BROKEN in
#                               its file on iteration 1 (validate.sh rejects it);
#                               the first spec call answers a 429 with
#                               "retry-after: 2" and exits 1.
#   agent.sh crash LOG SLEEP    the same tree without the failures; every run
#                               appends "start|end <id> <iteration> <unix-ns> <pid> <type> <daemon>"
#                               to LOG and sleeps SLEEP seconds in between
#                               (<daemon> is $LOOPR_E2E_DAEMON, which the test sets
#                               on each daemon it starts and agents inherit).
#   agent.sh bad                what the loop's title says: bad:hang, bad:flood,
#                               bad:exit3, bad:malformed, bad:rmworktree, or any
#                               other title for a healthy run.
#   agent.sh queue              a plan of 1 spec, 1 phase, 3 tasks (Alpha,
#                               Beta, Gamma) for the merge queue: Alpha and
#                               Gamma write alpha.flag and gamma.flag, "v1" on
#                               iteration 1 (mergecheck.sh rejects the two v1
#                               together), "v2" after (or always, with
#                               LOOPR_E2E_NO_CLASH=1). Every run appends
#                               "<id> <iteration> <type>" to $LOOPR_E2E_STARTS, if set.
#
# Each ralph loop writes out/<loop id>.txt in its working directory.
set -u

mode=${1:-tree}
cat >/dev/null # the prompt; loopr also saved it at $LOOPR_PROMPT_FILE
id=$LOOPR_LOOP_ID
it=$LOOPR_ITERATION
# The first line of every built-in prompt ends with: loop <id>, "<title>".
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')

# note appends one line to the crash log in a single write.
note() {
	printf '%s %s %s %s %s %s %s\n' "$1" "$id" "$it" "$(date +%s%N)" "$$" "$LOOPR_LOOP_TYPE" "${LOOPR_E2E_DAEMON:-0}" >>"$log"
}

artifact() {
	mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
	case $LOOPR_LOOP_TYPE in
	plan)
		printf '# Plan: %s\n\nTwo specs.\n\n## Specs\n\n### Spec 1: Storage\n\nKeep things.\n\n### Spec 2: Interface\n\nShow things.\n' "$title" >"$LOOPR_ARTIFACT"
		;;
	spec)
		printf '# Spec: %s\n\nTwo phases.\n\n## Phases\n\n### Phase 1: Groundwork\n\nLay it.\n\n### Phase 2: Finish\n\nPolish it.\n' "$title" >"$LOOPR_ARTIFACT"
		;;
	phase)
		first="First task"
		# mkdir is atomic: exactly one phase of the tree gets the fragile task.
		if [ "$mode" = tree ] && mkdir "$LOOPR_HOME/e2e-fragile" 2>/dev/null; then
			first="Fragile task"
		fi
		printf '# Phase: %s\n\nTwo tasks.\n\n## Tasks\n\n### Task 1: %s\n\nDo one thing.\n\n### Task 2: Second task\n\nDo another.\n' "$title" "$first" >"$LOOPR_ARTIFACT"
		;;
	esac
}

code() {
	mkdir -p out
	if [ "$title" = "Fragile task" ] && [ "$it" = 1 ]; then
		printf 'BROKEN by %s iteration %s\n' "$id" "$it" >"out/$id.txt"
	else
		printf 'done by %s iteration %s\n' "$id" "$it" >"out/$id.txt"
	fi
}

work() {
	case $LOOPR_LOOP_TYPE in
	plan | spec | phase) artifact ;;
	*) code ;;
	esac
}

# queue mode: its own tree, and flags that clash on the plan branch.
queue_artifact() {
	mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
	case $LOOPR_LOOP_TYPE in
	plan) printf '# Plan: %s\n\n## Specs\n\n### Spec 1: Storage\n\nKeep things.\n' "$title" >"$LOOPR_ARTIFACT" ;;
	spec) printf '# Spec: %s\n\n## Phases\n\n### Phase 1: Groundwork\n\nLay it.\n' "$title" >"$LOOPR_ARTIFACT" ;;
	phase) printf '# Phase: %s\n\n## Tasks\n\n### Task 1: Alpha\n\nA.\n\n### Task 2: Beta\n\nB.\n\n### Task 3: Gamma\n\nC.\n' "$title" >"$LOOPR_ARTIFACT" ;;
	esac
}

queue_code() {
	mkdir -p out
	printf 'done by %s iteration %s\n' "$id" "$it" >"out/$id.txt"
	version=v2
	[ "$it" = 1 ] && [ "${LOOPR_E2E_NO_CLASH:-}" != 1 ] && version=v1
	case $title in
	Alpha) echo "$version" >alpha.flag ;;
	Gamma) echo "$version" >gamma.flag ;;
	esac
}

case $mode in
queue)
	[ -z "${LOOPR_E2E_STARTS:-}" ] || printf '%s %s %s\n' "$id" "$it" "$LOOPR_LOOP_TYPE" >>"$LOOPR_E2E_STARTS"
	case $LOOPR_LOOP_TYPE in
	plan | spec | phase) queue_artifact ;;
	*) queue_code ;;
	esac
	;;
tree)
	if [ "$LOOPR_LOOP_TYPE" = spec ] && mkdir "$LOOPR_HOME/e2e-429" 2>/dev/null; then
		echo "$id" >"$LOOPR_HOME/e2e-429/loop"
		echo "Error: 429 Too Many Requests, retry-after: 2"
		exit 1
	fi
	work
	;;
crash)
	log=$2
	note start
	sleep "$3"
	work
	note end
	;;
bad)
	case $title in
	bad:hang)
		trap '' TERM # a stuck agent that ignores SIGTERM: only SIGKILL ends it
		echo "thinking forever"
		sleep 60
		;;
	bad:flood)
		yes 'all work and no play makes the agent a dull boy' | head -c 20971520
		echo "flood done"
		exit 4
		;;
	bad:exit3)
		echo "something went wrong"
		exit 3
		;;
	bad:malformed)
		mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
		printf '# Plan: %s\n\nI forgot the list of specs.\n' "$title" >"$LOOPR_ARTIFACT"
		;;
	bad:rmworktree)
		rm -rf "$LOOPR_WORKDIR"
		;;
	*)
		code
		;;
	esac
	;;
*)
	echo "agent.sh: unknown mode $mode" >&2
	exit 2
	;;
esac
