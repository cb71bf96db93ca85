#!/bin/sh
# usageagent.sh is a scripted agent that speaks Claude Code's stream-json
# (claude -p --output-format stream-json --verbose): a system init event, a
# rate_limit_event with status allowed (every real run carries one), and a
# result event with usage and total_cost_usd. Each run costs $0.10, 1000
# input, 200 output, 3000 cache-read and 100 cache-creation tokens.
#
#   usageagent.sh PROFILE tree     plan → 1 spec → 1 phase → 2 tasks. Every
#                                  run appends "<profile> <id> <iteration>
#                                  <type>" to $LOOPR_HOME/e2e-runs.log.
#   usageagent.sh PROFILE limit    the tree; on profile "main", the first
#                                  ralph run is refused: a rate_limit_event
#                                  rejected (five_hour) with resetsAt an hour
#                                  ahead, a failed result, exit 1.
#   usageagent.sh PROFILE late     the tree, but the plan writes no artifact
#                                  before its iteration 4 (those iterations
#                                  fail, and still cost).
set -u
profile=$1
mode=${2:-tree}
cat >/dev/null
id=$LOOPR_LOOP_ID
it=$LOOPR_ITERATION
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
echo "$profile $id $it $LOOPR_LOOP_TYPE" >>"$LOOPR_HOME/e2e-runs.log"

printf '{"type":"system","subtype":"init","session_id":"s-%s","model":"claude-sonnet-4-5"}\n' "$id"

if [ "$mode" = limit ] && [ "$profile" = main ] && [ "$LOOPR_LOOP_TYPE" = ralph ] && mkdir "$LOOPR_HOME/e2e-limited" 2>/dev/null; then
	reset=$(($(date +%s) + 3600))
	printf '{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":%s,"rateLimitType":"five_hour"}}\n' "$reset"
	printf '{"type":"result","subtype":"success","is_error":true,"result":"You'"'"'ve hit your session limit · resets 11:25pm (UTC)","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}\n'
	exit 1
fi
printf '{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":%s,"rateLimitType":"five_hour"}}\n' "$(($(date +%s) + 7200))"

mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
case $LOOPR_LOOP_TYPE in
plan)
	if [ "$mode" != late ] || [ "$it" -ge 4 ]; then
		printf '# Plan: %s\n\nOne spec.\n\n## Specs\n\n### Spec 1: Storage\n\nKeep things.\n' "$title" >"$LOOPR_ARTIFACT"
	fi
	;;
spec)
	printf '# Spec: %s\n\nOne phase.\n\n## Phases\n\n### Phase 1: Groundwork\n\nLay it.\n' "$title" >"$LOOPR_ARTIFACT"
	;;
phase)
	printf '# Phase: %s\n\nTwo tasks.\n\n## Tasks\n\n### Task 1: First task\n\nDo one thing.\n\n### Task 2: Second task\n\nDo another.\n' "$title" >"$LOOPR_ARTIFACT"
	;;
*)
	mkdir -p out
	printf 'done by %s on %s\n' "$id" "$profile" >"out/$id.txt"
	;;
esac
printf '{"type":"result","subtype":"success","is_error":false,"duration_ms":1200,"num_turns":2,"result":"Done: implemented the token-bucket rate limiter (answers HTTP 429).","total_cost_usd":0.1,"usage":{"input_tokens":1000,"output_tokens":200,"cache_read_input_tokens":3000,"cache_creation_input_tokens":100}}\n'
