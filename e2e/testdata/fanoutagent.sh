#!/bin/sh
# fanoutagent.sh is the scripted agent of the best-of-N tests. It speaks
# Claude Code's stream-json like usageagent.sh: each run costs $0.10.
#
#   plan → 1 spec → 1 phase → Task 1 "Pick" with **Fanout:** 3, and Task 2
#   "After", which depends on Task 1.
#   A candidate of Pick ("Pick [i/N]") numbered 2 waits (up to 60 s) until
#   every other candidate ran its first iteration, then writes out/pick.txt
#   and passes. The others fail their first iteration (out/bad: validate,
#   `test ! -e out/bad`, rejects it) and sleep 120 s in any later one, so a
#   decision finds them pending or running. Every run appends
#   "<id> <iteration> <type> <title>" to $LOOPR_HOME/e2e-runs.log.
#
#   fanoutagent.sh diff: for fanout_pick: smallest_diff. Candidate 1 passes
#   at once with a 40-line out/big.txt; candidate 2, 3 s later, with a
#   one-line out/pick.txt; candidate 3, 3 s later, fails (out/bad).
set -u
mode=${1:-first}
cat >/dev/null
id=$LOOPR_LOOP_ID
it=$LOOPR_ITERATION
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
echo "$id $it $LOOPR_LOOP_TYPE $title" >>"$LOOPR_HOME/e2e-runs.log"
result() {
	printf '{"type":"result","subtype":"success","is_error":false,"duration_ms":100,"num_turns":1,"result":"done","total_cost_usd":0.1,"usage":{"input_tokens":1000,"output_tokens":200}}\n'
}
printf '{"type":"system","subtype":"init","session_id":"s-%s","model":"claude-sonnet-4-5"}\n' "$id"
mkdir -p "$(dirname "$LOOPR_ARTIFACT")"
case $LOOPR_LOOP_TYPE in
plan) printf '# Plan: %s\n\n## Specs\n\n### Spec 1: Storage\n\nKeep things.\n' "$title" >"$LOOPR_ARTIFACT" ;;
spec) printf '# Spec: %s\n\n## Phases\n\n### Phase 1: Groundwork\n\nLay it.\n' "$title" >"$LOOPR_ARTIFACT" ;;
phase) printf '# Phase: %s\n\n## Tasks\n\n### Task 1: Pick\n\nTry three ways.\n\n**Fanout:** 3\n\n### Task 2: After\n\n**Depends on:** 1\n\nBuild on it.\n' "$title" >"$LOOPR_ARTIFACT" ;;
*)
	mkdir -p out
	case $mode/$title in
	"diff/Pick [1/"*) seq 1 40 >out/big.txt ;;
	"diff/Pick [2/"*)
		sleep 3
		echo "picked: candidate 2" >out/pick.txt
		;;
	"diff/Pick [3/"*)
		sleep 3
		echo "candidate 3: not good enough" >out/bad
		;;
	*"/Pick ["*)
		n=$(echo "$title" | sed -n 's/.*\[\([0-9]*\)\/\([0-9]*\)\]$/\1 \2/p')
		i=${n% *}
		of=${n#* }
		if [ "$i" = 2 ]; then
			k=0
			while [ $k -lt 600 ]; do
				all=1
				j=1
				while [ $j -le "$of" ]; do
					[ $j = 2 ] || [ -e "$LOOPR_HOME/e2e-ran-$j" ] || all=0
					j=$((j + 1))
				done
				[ $all = 1 ] && break
				sleep 0.1
				k=$((k + 1))
			done
			echo "picked: candidate 2" >out/pick.txt
		elif [ "$it" = 1 ]; then
			echo "candidate $i: not good enough" >out/bad
			touch "$LOOPR_HOME/e2e-ran-$i"
		else
			result
			sleep 120
		fi
		;;
	*) echo "after by $id" >out/after.txt ;;
	esac
	;;
esac
result
