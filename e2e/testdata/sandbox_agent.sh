# The agent of e2e/sandbox_test.go, run in a bwrap sandbox as a ralph loop
# (preset command): it tries what a sandbox must stop and prints what it
# managed (a line starting ESCAPED is a broken promise), then writes
# done.txt, which the loop's validate checks.
# Arguments: files | net ALLOWED-URL OTHER-URL
mode=$1
ws=$(cd ../../.. && pwd) # the workdir is <workspace>/.loopr/worktrees/<id>
echo "sandbox agent in $PWD"
if [ "$mode" = files ]; then
	# Both loops' agents run at once: the test creates $ws/go (the workspace
	# is visible, read-only) once both are running.
	i=0
	while [ ! -e "$ws/go" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
	echo "siblings: $(ls .. | tr '\n' ' ')"
	for d in ../* "$ws"/.loopr/worktrees/*; do
		[ "$(cd "$d" 2>/dev/null && pwd)" = "$PWD" ] && continue
		echo pwned > "$d/pwned" 2>/dev/null && echo "ESCAPED: wrote $d/pwned"
	done
	echo hacked >> ../../../loopr.yml 2>/dev/null && echo "ESCAPED: wrote ../../../loopr.yml"
	echo hacked >> ../../loopr.yml 2>/dev/null && echo "ESCAPED: wrote ../../loopr.yml"
	echo hacked >> "$ws/loopr.yml" 2>/dev/null && echo "ESCAPED: wrote $ws/loopr.yml"
	test -e "$ws/.loopr/loopr.db" && echo "ESCAPED: the store is visible"
fi
if [ "$mode" = net ]; then
	allowed=$2 other=$3
	echo "allowed: $(curl -s -m 20 "$allowed" 2>&1 || echo "curl failed: $?")"
	curl -s -m 20 -o /dev/null "$other" && echo "ESCAPED: reached $other"
	# Through the proxy explicitly: refused with 403.
	echo "other via the proxy: $(curl -s -m 20 -o /dev/null -w '%{http_code}' --noproxy '' --proxy "$HTTP_PROXY" "$other" 2>&1)"
fi
echo done > done.txt
