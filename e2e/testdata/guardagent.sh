#!/bin/sh
# guardagent.sh MARKS is the agent of TestGuard (the guard that kills a
# dead daemon's agents). A ralph loop's title says what it does:
#
#   hold      starts a `setsid` grandchild (a session of its own) that
#             writes its pid to MARKS/<id>.grandchild and sleeps, writes
#             its own pid to MARKS/<id>.agent, and sleeps
#   validate  exits 0 at once, so the loop's validate command runs
#             (guardvalidate.sh: it writes MARKS/<id>.validate and sleeps)
set -u
marks=$1
cat >/dev/null
id=$LOOPR_LOOP_ID
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
case $title in
hold)
	setsid sh -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1"; exec sleep 300' sh "$marks/$id.grandchild" </dev/null >/dev/null 2>&1 &
	n=0
	while [ ! -s "$marks/$id.grandchild" ] && [ $n -lt 100 ]; do sleep 0.02; n=$((n + 1)); done
	echo $$ >"$marks/$id.agent.tmp" && mv "$marks/$id.agent.tmp" "$marks/$id.agent"
	exec sleep 300
	;;
validate) exit 0 ;;
*) echo "unknown title $title" >&2; exit 2 ;;
esac
