#!/bin/sh
# mergecheck.sh is the merge.validate of the merge-queue tests (agent.sh
# queue): it runs in the merge worktree, on the result of the merge, and
# rejects Alpha's and Gamma's first versions together, though each passes
# alone.
#
#   LOOPR_E2E_MERGE_MARK=FILE   append "<daemon> <commit>" to FILE at each run
#   LOOPR_E2E_MERGE_GATE=FILE   then wait until FILE exists (a run held open)
set -u
[ -z "${LOOPR_E2E_MERGE_MARK:-}" ] || echo "${LOOPR_E2E_DAEMON:-0} ${LOOPR_MERGE_COMMIT:-}" >>"$LOOPR_E2E_MERGE_MARK"
if [ -n "${LOOPR_E2E_MERGE_GATE:-}" ]; then
	while [ ! -e "$LOOPR_E2E_MERGE_GATE" ]; do sleep 0.1; done
fi
if [ "$(cat alpha.flag 2>/dev/null)" = v1 ] && [ "$(cat gamma.flag 2>/dev/null)" = v1 ]; then
	echo "mergecheck: alpha.flag and gamma.flag are both v1: they clash"
	exit 1
fi
echo "mergecheck: ok"
