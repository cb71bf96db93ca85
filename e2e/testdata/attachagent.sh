#!/bin/sh
# The agent of TestAttachUnderTmux: it works forever until a person has
# left manual.txt in its worktree (loopr attach), then it is done.
cat >/dev/null
if [ -f manual.txt ]; then
	echo "a person did it: done"
	exit 0
fi
echo "working"
exec sleep 600
