#!/bin/sh
# cliagent.sh is the scripted agent of the command-line tests
# (firsthour_test.go). It keeps the agent contract (the prompt on stdin, the
# LOOPR_* environment, the artifact at $LOOPR_ARTIFACT, the exit status):
#
#   a plan titled "Many …" plans 25 specs, any other plan 2;
#   a spec plans one phase, a phase one task;
#   a task titled "Slow …" prints "tick N" lines until $LOOPR_HOME/release
#   exists, then "done"; any other task prints one line and passes.
set -u
cat >/dev/null # the prompt; loopr also saved it at $LOOPR_PROMPT_FILE
# The first line of every built-in prompt ends with: loop <id>, "<title>".
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
echo "agent start $LOOPR_LOOP_ID iteration $LOOPR_ITERATION: $title"
case $LOOPR_LOOP_TYPE in
plan)
	n=2
	case $title in Many*) n=25 ;; esac
	mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
	{
		printf '# Plan: %s\n\nThe plan text a reviewer reads.\n\n## Specs\n' "$title"
		i=1
		while [ $i -le $n ]; do
			printf '\n### Spec %d: Part %02d of %s\n\nBuild part %d.\n' $i $i "$title" $i
			i=$((i + 1))
		done
	} >"$LOOPR_ARTIFACT"
	;;
spec)
	mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
	printf '# Spec: %s\n\nOne phase.\n\n## Phases\n\n### Phase 1: All of %s\n\nDo it.\n' "$title" "$title" >"$LOOPR_ARTIFACT"
	;;
phase)
	mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
	printf '# Phase: %s\n\nOne task.\n\n## Tasks\n\n### Task 1: Do %s\n\nDo it.\n' "$title" "$title" >"$LOOPR_ARTIFACT"
	;;
*)
	case $title in
	Slow*)
		i=1
		while [ ! -e "$LOOPR_HOME/release" ] && [ $i -le 400 ]; do
			echo "tick $i"
			i=$((i + 1))
			sleep 0.05
		done
		echo "done"
		;;
	*) echo "did $title" ;;
	esac
	;;
esac
exit 0
