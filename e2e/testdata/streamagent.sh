#!/bin/sh
# streamagent.sh is a scripted agent that prints what claude -p
# --output-format stream-json --verbose prints (logsrender_test.go): the
# init event, words, a Bash call whose result comes once $LOOPR_HOME/release
# exists (logs -f shows the call before), a line that is not an event, a
# failed Read, the answer and the result with its cost.
set -u
cat >/dev/null
s='"session_id":"s1"'
printf '%s\n' '{"type":"system","subtype":"init","cwd":"'"$PWD"'",'"$s"',"model":"claude-test-1","tools":["Bash","Read"]}'
printf '%s\n' '{"type":"assistant","message":{"content":[{"type":"text","text":"I will run the tests."}]},'"$s"'}'
printf '%s\n' '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"go test ./...","description":"run the tests"}}]},'"$s"'}'
i=0
while [ ! -e "$LOOPR_HOME/release" ] && [ $i -lt 1200 ]; do
	i=$((i + 1))
	sleep 0.05
done
printf '%s\n' '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok  \tpkg/a\t0.1s\nok  \tpkg/b\t0.2s\nok  \tpkg/c\t0.3s\nok  \tpkg/d\t0.4s\nok  \tpkg/e\t0.5s","is_error":false}]},'"$s"'}'
printf '%s\n' 'a warning the CLI printed'
printf '%s\n' '{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"'"$PWD"'/missing.go"}}]},'"$s"'}'
printf '%s\n' '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":"File does not exist.","is_error":true}]},'"$s"'}'
printf '%s\n' '{"type":"assistant","message":{"content":[{"type":"text","text":"All tests pass."}]},'"$s"'}'
printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"result":"All tests pass.","total_cost_usd":0.0123,"duration_ms":4200,"num_turns":3,"usage":{"input_tokens":1000,"output_tokens":200,"cache_read_input_tokens":300,"cache_creation_input_tokens":0},'"$s"'}'
exit 0
