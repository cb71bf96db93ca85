#!/bin/sh
# ledgeragent.sh is the scripted agent of the usage and rate-limit tests
# (issue 20). It speaks Claude Code's stream-json (the claude preset's
# parser) and behaves as the loop's title says:
#
#   absurd   first run: a rate_limit_event rejected with resetsAt
#            99999999999 (the year 5138), a failed result, exit 1; then
#            passes
#   millis   first run: the same with resetsAt an hour ahead, in
#            milliseconds; then passes
#   brief    first run: the same with resetsAt 2 s ahead; then passes
#   huge     every run reports total_cost_usd 1e308 and fails
#   tokens   every run reports 5e18 input and 5e18 output tokens and fails
#   ask      writes a question to $LOOPR_QUESTION_FILE and exits 0; with an
#            answer in its prompt, passes
#   flaky    fails its first run, then passes
#   (other)  passes
#
# A run that passes or fails costs $0.10 and takes 0.3 s; every run appends
# "<title> <id> <iteration>" to $LOOPR_HOME/e2e-starts.log.
set -u
cat >/dev/null
id=$LOOPR_LOOP_ID
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
echo "$title $id $LOOPR_ITERATION" >>"$LOOPR_HOME/e2e-starts.log"
printf '{"type":"system","subtype":"init","session_id":"s-%s","model":"claude-sonnet-4-5"}\n' "$id"

result() { # is_error cost input output text
	printf '{"type":"result","subtype":"success","is_error":%s,"result":"%s","total_cost_usd":%s,"usage":{"input_tokens":%s,"output_tokens":%s}}\n' "$1" "$5" "$2" "$3" "$4"
}
reject() { # resetsAt
	printf '{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":%s,"rateLimitType":"five_hour"}}\n' "$1"
	result true 0 0 0 "You have hit your session limit"
	exit 1
}

first=false
mkdir "$LOOPR_HOME/e2e-ran-$id" 2>/dev/null && first=true
case $title in
absurd) $first && reject 99999999999 ;;
millis) $first && reject "$((($(date +%s) + 3600) * 1000))" ;;
brief) $first && reject "$(($(date +%s) + 2))" ;;
huge)
	sleep 0.3
	result true 1e308 1000 100 "tests fail at $LOOPR_ITERATION"
	exit 1
	;;
tokens)
	sleep 0.3
	result true 0 5000000000000000000 5000000000000000000 "tests fail at $LOOPR_ITERATION"
	exit 1
	;;
ask)
	if ! grep -q '^## Answer from the user' "$LOOPR_PROMPT_FILE"; then
		printf 'Which port should the server listen on?\n' >"$LOOPR_QUESTION_FILE"
		result false 0.3 1000 100 "I have a question"
		exit 0
	fi
	;;
flaky)
	if $first; then
		sleep 0.3
		result true 0.1 1000 100 "tests fail"
		exit 1
	fi
	;;
esac
sleep 0.3
mkdir -p out
echo "$title by $id" >"out/$id.txt"
result false 0.1 1000 100 "Done"
