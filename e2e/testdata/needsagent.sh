#!/bin/sh
# needsagent.sh is the scripted agent of the "needs you" tests (issue 12).
# It behaves as the loop's title says:
#
#   silent   prints nothing and changes nothing for 30 s (a stall)
#   same     fails the same way every time: exit 1 after an error line whose
#            numbers, paths and hash change from run to run
#   ask…     without an answer in its prompt: writes a question to
#            $LOOPR_QUESTION_FILE and exits 0; with one: writes
#            out/<id>.txt and exits 0
#   lazy     exits 0 without changing anything
#   tree     a plan of one spec of one phase of one task; the task writes
#            out/<id>.txt
set -u
cat >/dev/null # the prompt; loopr also saved it at $LOOPR_PROMPT_FILE
id=$LOOPR_LOOP_ID
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
# Every agent but the silent one says something at once: on a loaded machine
# its work may take longer than the tests' short stall timeout.
[ "$title" = silent ] || echo "needsagent: $LOOPR_LOOP_TYPE $id iteration $LOOPR_ITERATION: $title"

case $LOOPR_LOOP_TYPE in
plan)
	printf '# Plan: %s\n\nOne spec.\n\n## Specs\n\n### Spec 1: Only\n\nDo it.\n' "$title" >"$LOOPR_ARTIFACT"
	exit 0
	;;
spec)
	printf '# Spec: %s\n\nOne phase.\n\n## Phases\n\n### Phase 1: Only\n\nDo it.\n' "$title" >"$LOOPR_ARTIFACT"
	exit 0
	;;
phase)
	printf '# Phase: %s\n\nOne task.\n\n## Tasks\n\n### Task 1: Only task\n\nDo it.\n' "$title" >"$LOOPR_ARTIFACT"
	exit 0
	;;
esac

case $title in
silent)
	exec sleep 30
	;;
same)
	echo "building $LOOPR_WORKDIR/pkg at $(date +%s%N)"
	echo "error: /tmp/build-$$/main.go:$LOOPR_ITERATION: checksum $(date +%s%N | sha1sum | cut -c1-12) mismatch" >&2
	exit 1
	;;
ask*)
	if grep -q '^## Answer from the user' "$LOOPR_PROMPT_FILE"; then
		mkdir -p out
		grep -A3 '^## Answer from the user' "$LOOPR_PROMPT_FILE" >"out/$id.txt"
		exit 0
	fi
	printf 'Which port should the server listen on?\n(8080 is taken by the proxy.)\n' >"$LOOPR_QUESTION_FILE"
	exit 0
	;;
lazy)
	echo "all done, nothing to do"
	exit 0
	;;
*)
	mkdir -p out
	echo "$title by $id" >"out/$id.txt"
	exit 0
	;;
esac
