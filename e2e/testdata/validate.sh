#!/bin/sh
# validate.sh is the ralph validate command of the end-to-end tests: it runs
# in the loop's working directory and rejects a file left BROKEN by agent.sh.
for f in out/*.txt; do
	[ -e "$f" ] || continue
	if grep -q BROKEN "$f"; then
		echo "e2e-validate: $f still contains BROKEN"
		exit 1
	fi
done
echo "e2e-validate: ok"
