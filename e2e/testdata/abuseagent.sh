#!/bin/sh
# abuseagent.sh is the agent of the abuse tests (issue 10, items 1 and 2).
# Every plan's title names an abuse; its one spec, phase and task carry the
# same title down to a ralph loop, which writes out/<id>.txt and then does
# the abuse in its worktree:
#
#   lock     leaves .git/index.lock behind (no git holds it)
#   rmgit    deletes the worktree's .git file
#   detach   commits its work on a detached HEAD
#   branch   checks out a branch of its own and commits there
#   orphan   commits its work on an orphan branch (unrelated history), on
#            iteration 1 only
#   clean    nothing: a healthy run
#
# A plan titled "bigsection" writes one 300000-byte spec section instead.
# Every run appends "<type> <id> <iteration>" to $LOOPR_HOME/e2e-starts.log.
set -u
cat >/dev/null
id=$LOOPR_LOOP_ID
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
echo "$LOOPR_LOOP_TYPE $id $LOOPR_ITERATION" >>"$LOOPR_HOME/e2e-starts.log"
g() { git -c user.name=agent -c user.email=agent@localhost -c commit.gpgsign=false "$@"; }

case $LOOPR_LOOP_TYPE in
plan | spec | phase)
	case $LOOPR_LOOP_TYPE in
	plan) h=Plan s=Specs c=Spec ;;
	spec) h=Spec s=Phases c=Phase ;;
	phase) h=Phase s=Tasks c=Task ;;
	esac
	mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
	{
		printf '# %s: %s\n\nOne child.\n\n## %s\n\n### %s 1: %s\n\n' "$h" "$title" "$s" "$c" "$title"
		if [ "$title" = bigsection ]; then
			head -c 300000 /dev/zero | tr '\0' 'x'
			echo
		else
			echo "Do it."
		fi
	} >"$LOOPR_ARTIFACT"
	exit 0
	;;
esac

mkdir -p out
echo "done by $id" >"out/$id.txt"
case $title in
lock) touch "$(git rev-parse --git-path index.lock)" ;;
rmgit) rm -f .git ;;
detach)
	g checkout -q --detach
	g add -A && g commit -q -m "agent work on a detached HEAD"
	;;
branch)
	g checkout -q -b "side-$id"
	g add -A && g commit -q -m "agent work on its own branch"
	;;
orphan)
	[ "$LOOPR_ITERATION" = 1 ] || exit 0
	g checkout -q --orphan "orphan-$id"
	g add -A && g commit -q -m "agent work on an orphan branch"
	;;
esac
exit 0
