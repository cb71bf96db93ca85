#!/bin/sh
# escapeagent.sh MARKS MODE is the agent of the containment tests (issue 10,
# item 3). A ralph loop's title names how its escapee leaves the agent:
#
#   setsid      a `setsid` grandchild: a session and process group of its own
#   doublefork  a double fork (perl: fork, setpgrp, fork): orphaned in a
#               process group of its own, same session
#   envi        `env -i` then `setsid` in a subshell that exits: orphaned,
#               detached, and no LOOPR_* variable left in its environment
#
# The escapee writes its pid to MARKS/<id>.<iteration>.pid, then appends a
# line to MARKS/<id>.ticks and to escape.txt in its working directory (the
# loop's worktree) every 50 ms, forever.
#
# MODE exit: iteration 1 starts the escapee and exits 1 (the iteration
# fails); iteration 2 starts none, watches escape.txt for 0.5 s and writes
# MARKS/<id>.grew if anything still writes into its worktree, then exits 0.
# MODE hold: the agent starts the escapee and sleeps (cancel, stop, crash).
set -u
marks=$1 mode=$2
cat >/dev/null
id=$LOOPR_LOOP_ID it=$LOOPR_ITERATION
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
echo "ralph $id $it" >>"$marks/starts.log"

if [ "$mode" = exit ] && [ "$it" -gt 1 ]; then
	before=$(wc -c <escape.txt)
	sleep 0.5
	after=$(wc -c <escape.txt)
	[ "$before" = "$after" ] || echo "$before -> $after" >"$marks/$id.grew"
	exit 0
fi

body='echo $$ >"$0.tmp" && mv "$0.tmp" "$0"; while :; do echo tick >>"$1"; echo tick >>escape.txt; sleep 0.05; done'
pf=$marks/$id.$it.pid
ticks=$marks/$id.ticks
case $title in
setsid) setsid sh -c "$body" "$pf" "$ticks" </dev/null >/dev/null 2>&1 & ;;
doublefork) perl -e 'exit 0 if fork; setpgrp(0, 0); exit 0 if fork; exec @ARGV' sh -c "$body" "$pf" "$ticks" </dev/null >/dev/null 2>&1 ;;
envi) (env -i PATH="$PATH" setsid sh -c "$body" "$pf" "$ticks" </dev/null >/dev/null 2>&1 &) ;;
*) echo "unknown escape $title" >&2; exit 2 ;;
esac
# The escapee is on its own once its pid file is there, and has written
# into the worktree once (under load it may not have yet: iteration 1's
# commit would then hold nothing, and require_changes fail iteration 2).
n=0
while { [ ! -s "$pf" ] || [ ! -s escape.txt ]; } && [ $n -lt 250 ]; do sleep 0.02; n=$((n + 1)); done

case $mode in
exit) exit 1 ;;
hold) exec sleep 60 ;;
esac
