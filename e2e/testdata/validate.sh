#!/bin/sh
# validate.sh is the ralph validate command of the end-to-end tests: it runs
# in the loop's working directory and rejects a file left BROKEN by agent.sh.
#
#   validate.sh                 check at once
#   validate.sh LOG SLEEP       take SLEEP seconds, appending
#                               "start|end <id> <iteration> <unix-ns> <pid> validate <daemon>"
#                               to LOG around them (a slow test suite)
set -u
note() {
	printf '%s %s %s %s %s validate %s\n' "$1" "$LOOPR_LOOP_ID" "$LOOPR_ITERATION" "$(date +%s%N)" "$$" "${LOOPR_E2E_DAEMON:-0}" >>"$log"
}
log=${1:-}
if [ -n "$log" ]; then
	note start
	sleep "$2"
fi
status=0
for f in out/*.txt; do
	[ -e "$f" ] || continue
	if grep -q BROKEN "$f"; then
		echo "e2e-validate: $f still contains BROKEN"
		status=1
	fi
done
[ -z "$log" ] || note end
[ $status = 1 ] || echo "e2e-validate: ok"
exit $status
