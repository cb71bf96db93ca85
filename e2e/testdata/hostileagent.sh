#!/bin/sh
# hostileagent.sh OUTSIDE is the agent of the path-safety tests. It does
# to $LOOPR_ARTIFACT what its task says (MODE=<mode> in the prompt), then
# exits 0 as if all went well:
#   fifo      a named pipe (loopr used to block on it forever)
#   environ   a symlink to /proc/self/environ (the daemon's environment)
#   outside   a symlink to OUTSIDE/plan.md, a valid plan outside the home
#   zero      a symlink to /dev/zero (endless data)
#   huge      a 3 MB regular file (the limit is 1 MiB)
#   dirlink   its iteration directory replaced by a symlink to OUTSIDE
#   good      a valid artifact with one child
# A spec, phase or ralph loop only exits 0.
set -u
outside=$1
prompt=$(cat)
case $LOOPR_LOOP_TYPE in
plan) ;;
*) exit 0 ;;
esac
dir=$(dirname "$LOOPR_ARTIFACT")
case $prompt in
*MODE=fifo*) mkfifo "$LOOPR_ARTIFACT" ;;
*MODE=environ*) ln -s /proc/self/environ "$LOOPR_ARTIFACT" ;;
*MODE=outside*) ln -s "$outside/plan.md" "$LOOPR_ARTIFACT" ;;
*MODE=zero*) ln -s /dev/zero "$LOOPR_ARTIFACT" ;;
*MODE=huge*) head -c 3000000 /dev/zero | tr '\0' x >"$LOOPR_ARTIFACT" ;;
*MODE=dirlink*)
	cd / && rm -rf "$dir" && ln -s "$outside" "$dir"
	;;
*MODE=good*)
	printf '# Plan: approved text\n\nThe plan as validated.\n\n## Specs\n\n### Spec 1: only child\n\nVALIDATED-SECTION-TEXT\n' >"$LOOPR_ARTIFACT"
	;;
esac
echo "did what MODE said"
