#!/bin/sh
# secretagent.sh OUT is the agent of the secrets test. It proves it was
# given ANTHROPIC_API_KEY by writing the key's SHA-256 to OUT/<loop id> and
# to its output, never the key itself. Plans, specs and phases write one
# child each; a ralph loop fails its first iteration, so feedback is stored.
set -u
out=$1
cat >/dev/null # the prompt
sum=$(printf '%s' "${ANTHROPIC_API_KEY:-}" | sha256sum | cut -d' ' -f1)
echo "ANTHROPIC_API_KEY sha256 $sum"
echo "$sum" >"$out/$LOOPR_LOOP_ID"
case $LOOPR_LOOP_TYPE in
plan) h=Plan s=Specs c=Spec ;;
spec) h=Spec s=Phases c=Phase ;;
phase) h=Phase s=Tasks c=Task ;;
*)
	if [ "$LOOPR_ITERATION" = 1 ]; then
		echo "first try fails on purpose"
		exit 1
	fi
	exit 0
	;;
esac
mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
printf '# %s: secrets\n\nKeep them.\n\n## %s\n\n### %s 1: only child\n\nDo it.\n' "$h" "$s" "$c" >"$LOOPR_ARTIFACT"
