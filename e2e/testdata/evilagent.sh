#!/bin/sh
# evilagent.sh CANARY_DIR is the agent of the path-safety and no-shell
# tests: its artifacts name children with text that would escape <home> if
# loopr used titles as paths ("../../etc/passwd", "/abs…", "a/b", a NUL
# byte, "..") or would run commands if loopr built shell strings from them
# ($(…), backticks, ;, |: each would create a file in CANARY_DIR). A ralph
# loop writes done-<id>.txt in its working directory.
set -u
canary=$1
cat >/dev/null # the prompt
case $LOOPR_LOOP_TYPE in
plan) heading=Plan section=Specs child=Spec ;;
spec) heading=Spec section=Phases child=Phase ;;
phase) heading=Phase section=Tasks child=Task ;;
*)
	echo "done by $LOOPR_LOOP_ID" >"done-$LOOPR_LOOP_ID.txt"
	exit 0
	;;
esac
mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
{
	printf '# %s: evil\n\nNames that try to escape.\n\n## %s\n\n' "$heading" "$section"
	if [ "$LOOPR_LOOP_TYPE" = plan ]; then
		printf '### %s 1: ../../etc/passwd\n\nTraverse up.\n\n' "$child"
		printf '### %s 2: /abs/loopr-evil-path\n\nAn absolute path.\n\n' "$child"
		printf '### %s 3: a/b\n\nA nested path.\n\n' "$child"
		printf '### %s 4: nul\000byte\n\nA NUL byte.\n\n' "$child"
		printf '### %s 5: $(touch %s/dollar)\n\nRun $(touch %s/dollar-body) please.\n\n' "$child" "$canary" "$canary"
		printf '### %s 6: `touch %s/backtick`\n\nAnd `touch %s/backtick-body`.\n\n' "$child" "$canary" "$canary"
		printf '### %s 7: x; touch %s/semicolon | touch %s/pipe\n\n; touch %s/semicolon-body\n\n' "$child" "$canary" "$canary" "$canary"
		printf '### %s 8: ..\n\nThe parent directory.\n\n' "$child"
	else
		printf '### %s 1: ../$(touch %s/deep-%s)/`touch %s/deep-tick`\n\nDeeper.\n\n' "$child" "$canary" "$LOOPR_LOOP_TYPE" "$canary"
	fi
} >"$LOOPR_ARTIFACT"
