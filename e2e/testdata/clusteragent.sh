#!/bin/sh
# clusteragent.sh is the scripted agent of the cluster test
# (cluster_test.go): three daemons on one etcd store, each a worker on its
# own clone of one bare repository.
#
#   clusteragent.sh SHARED PAUSE
#
# SHARED is a directory every worker sees. Each run:
#   - takes `flock -n` on SHARED/locks/<loop id> for as long as it (and
#     any process it leaves) lives; when another run of the same loop
#     holds it, the loop runs on two workers at once: it appends
#     "OVERLAP <id> <worker> <iteration>" to SHARED/overlap.log;
#   - appends "<id> <worker> <iteration> start|end <unix-ns> <pid>" to
#     SHARED/runs.log (one write each, under PIPE_BUF: lines never mix);
#     a run killed with its worker has a start and no end;
#   - sleeps PAUSE seconds, so that kills land mid-run, then does its work.
#
# The tree is 60 loops: a plan of 3 specs (Alpha, Beta, Gamma), each of 3
# phases ("<spec> 1".."<spec> 3"), each of 5 tasks, but 6 for "Alpha 1"
# and "Beta 1": 1 + 3 + 9 + 47. A ralph loop writes out/<loop id>.txt in
# its worktree (loopr commits it).
set -u
shared=$1 pause=$2
id=$LOOPR_LOOP_ID
it=$LOOPR_ITERATION
worker=${LOOPR_WORKER:-daemon${LOOPR_E2E_DAEMON:-0}}
cat >/dev/null # the prompt; loopr also saved it at $LOOPR_PROMPT_FILE
# The first line of every built-in prompt ends with: loop <id>, "<title>".
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')

note() {
	printf '%s %s %s %s %s %s\n' "$id" "$worker" "$it" "$1" "$(date +%s%N)" "$$" >>"$shared/runs.log"
}

mkdir -p "$shared/locks"
exec 9>>"$shared/locks/$id"
if ! flock -n 9; then
	printf 'OVERLAP %s %s %s\n' "$id" "$worker" "$it" >>"$shared/overlap.log"
fi
note start
sleep "$pause"

# section HEADING SECTIONS CHILD TITLE... writes an artifact with one
# child per TITLE (SPEC §7).
section() {
	heading=$1 sections=$2 child=$3
	shift 3
	mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
	{
		printf '# %s: %s\n\nWritten by the cluster test'"'"'s agent on %s.\n\n## %s\n' "$heading" "$title" "$worker" "$sections"
		i=1
		for t in "$@"; do
			printf '\n### %s %d: %s\n\nDo %s.\n' "$child" "$i" "$t" "$t"
			i=$((i + 1))
		done
	} >"$LOOPR_ARTIFACT.tmp"
	mv "$LOOPR_ARTIFACT.tmp" "$LOOPR_ARTIFACT"
}

case $LOOPR_LOOP_TYPE in
plan) section Plan Specs Spec Alpha Beta Gamma ;;
spec) section Spec Phases Phase "$title 1" "$title 2" "$title 3" ;;
phase)
	case $title in
	"Alpha 1" | "Beta 1") section Phase Tasks Task "$title task 1" "$title task 2" "$title task 3" "$title task 4" "$title task 5" "$title task 6" ;;
	*) section Phase Tasks Task "$title task 1" "$title task 2" "$title task 3" "$title task 4" "$title task 5" ;;
	esac
	;;
*)
	mkdir -p out
	printf 'done by %s on %s, iteration %s\n' "$id" "$worker" "$it" >"out/$id.txt"
	;;
esac
note end
