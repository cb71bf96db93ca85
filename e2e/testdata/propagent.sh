#!/bin/sh
# propagent.sh MARKS is the agent of the randomized property test (issue
# 10). The test draws, for each title and loop type, what the agent does on
# each start and writes it to MARKS/plan/<title>.<type>, one behaviour a
# line (line n for the loop's n-th start; past the end: ok). Every start
# appends "<type> <id> <iteration> <behaviour>" to MARKS/starts.log first.
#
# Behaviours of every type:
#   exit:N      exit N (after writing its output or a valid artifact)
#   ratelimit   exit 75, the configured rate-limit exit code
#   killself    SIGKILL itself
#   setsid:N    start a detached grandchild (setsid), then as exit:N
#   envi:N      the same with a cleared environment (env -i)
# ralph loops (write out/<id>.txt first):
#   ok | lock | rmgit | detach | branch   git abuse as abuseagent.sh
#   bigout      2 MB on stdout
# plan, spec and phase loops (ok writes a valid artifact with one child):
#   fifo        the artifact is a named pipe
#   big         a 2 MB artifact (the limit is 1 MiB)
#   bigsection  one 300000-byte section (the limit is 256 KiB)
# Grandchildren append their pid to MARKS/escapees and sleep forever.
set -u
marks=$1
cat >/dev/null
id=$LOOPR_LOOP_ID typ=$LOOPR_LOOP_TYPE it=$LOOPR_ITERATION
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
n=$(grep -c " $id " "$marks/starts.log" 2>/dev/null)
n=$((${n:-0} + 1))
b=$(sed -n "${n}p" "$marks/plan/$title.$typ" 2>/dev/null)
[ -n "$b" ] || b=ok
echo "$typ $id $it $b" >>"$marks/starts.log"
name=${b%%:*} arg=${b#*:}
[ "$arg" = "$b" ] && arg=0
g() { git -c user.name=agent -c user.email=agent@localhost -c commit.gpgsign=false "$@"; }

body='echo $$ >>"$0"; while :; do sleep 0.1; done'
case $name in
setsid) setsid sh -c "$body" "$marks/escapees" </dev/null >/dev/null 2>&1 & ;;
envi) env -i PATH="$PATH" setsid sh -c "$body" "$marks/escapees" </dev/null >/dev/null 2>&1 & ;;
ratelimit) exit 75 ;;
killself) kill -9 $$ ;;
esac

case $typ in
plan | spec | phase)
	case $typ in
	plan) h=Plan s=Specs c=Spec ;;
	spec) h=Spec s=Phases c=Phase ;;
	phase) h=Phase s=Tasks c=Task ;;
	esac
	mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
	case $name in
	fifo) mkfifo "$LOOPR_ARTIFACT" ;;
	big) head -c 2000000 /dev/zero | tr '\0' x >"$LOOPR_ARTIFACT" ;;
	*)
		{
			printf '# %s: %s\n\nOne child.\n\n## %s\n\n### %s 1: %s\n\n' "$h" "$title" "$s" "$c" "$title"
			if [ "$name" = bigsection ]; then
				head -c 300000 /dev/zero | tr '\0' x
				echo
			else
				echo "Do it."
			fi
		} >"$LOOPR_ARTIFACT"
		;;
	esac
	;;
ralph)
	mkdir -p out
	echo "done by $id" >"out/$id.txt"
	case $name in
	lock) touch "$(git rev-parse --git-path index.lock)" ;;
	rmgit) rm -f .git ;;
	detach)
		g checkout -q --detach
		g add -A && g commit -q -m "agent work on a detached HEAD"
		;;
	branch)
		g checkout -q -b "side-$id-$it"
		g add -A && g commit -q -m "agent work on its own branch"
		;;
	bigout) head -c 2000000 /dev/zero | tr '\0' y ;;
	esac
	;;
esac
case $name in
exit | setsid | envi) exit "$arg" ;;
esac
exit 0
