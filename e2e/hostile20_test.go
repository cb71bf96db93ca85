package e2e

// Issue 20.15, the smaller findings of the hostile round: a notify
// command's background children, store check's exit codes, a webhook port
// out of range, two racing `daemon --detach`.

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopr-dev/loopr/internal/testslack"
)

// TestNotifyCommandLeavesNothing: a notify command that puts a sleep in the
// background — by a double fork in its process group, and by one that
// leaves the group (setsid) — is contained as agents are: when it exits,
// both sleeps are gone. Before, it ran with exec.CommandContext alone, and
// both outlived it. In each containment mode the daemon can take.
func TestNotifyCommandLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cgroup", "subreaper", "scan"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testNotifyLeavesNothing(t, mode)
		})
	}
}

func testNotifyLeavesNothing(t *testing.T, mode string) {
	marks := t.TempDir()
	p1, p2, done := filepath.Join(marks, "p1"), filepath.Join(marks, "p2"), filepath.Join(marks, "done")
	notify, _ := json.Marshal([]string{"sh", "-c", fmt.Sprintf(
		`(sleep 600 & echo $! >%[1]s.tmp; mv %[1]s.tmp %[1]s); (setsid sleep 601 & echo $! >%[2]s.tmp; mv %[2]s.tmp %[2]s); echo "$LOOPR_EVENT" >%[3]s`,
		p1, p2, done)})
	r := newRepo(t, fmt.Sprintf(`scheduler: {poll_interval_secs: 1}
agent: {command: ["sh", "-c", "cat >/dev/null; exit 3"], timeout_secs: 10}
loops:
  ralph: {max_iterations: 1, validate: ["true"]}
git: {worktrees: false}
storage: {disk_quota_min_gb: 0}
notify: {command: %s}
`, notify))
	d := startDaemonEnv(t, r, "LOOPR_CONTAINMENT="+mode)
	ok(t, r.dir, "add", "--type", "ralph", "--task", "Fail at once")
	var pids []int
	waitFor(t, 60*time.Second, "the notify command to run", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		if _, err := os.Stat(done); err != nil {
			return false
		}
		pids = nil
		for _, f := range []string{p1, p2} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatalf("the notify command wrote %s: %v", f, err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
		return true
	})
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	waitFor(t, 30*time.Second, "the notify command's background sleeps to end with it", func() bool {
		return !alive(pids[0]) && !alive(pids[1])
	})
}

// TestStoreCheckExitCodes: `loopr store check` exits 0 on a sound store, 1
// on a damaged one, 4 when it cannot look because the store is in use (the
// daemon runs, or another process holds the file), 2 where there is no
// bbolt file to check. Before, a running daemon gave 1, the code of a
// damaged store.
func TestStoreCheckExitCodes(t *testing.T) {
	t.Parallel()
	r := newRepo(t, "storage: {disk_quota_min_gb: 0}\n")
	d := startDaemon(t, r)
	ok(t, r.dir, "add", "--type", "ralph", "--task", "kept", "--at", "2099-01-01T00:00:00Z")
	res := run(t, r.dir, "", "store", "check")
	if res.code != 4 || !strings.Contains(res.stderr, "is running; stop it") {
		t.Errorf("store check with the daemon running: exit %d, stderr %q; want 4 and what to do", res.code, res.stderr)
	}
	if res := run(t, r.dir, "", "store", "repair"); res.code != 4 {
		t.Errorf("store repair with the daemon running: exit %d, stderr %q; want 4", res.code, res.stderr)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("daemon exit %d:\n%s", code, tail(d.output(), 20))
	}
	if res := run(t, r.dir, "", "store", "check"); res.code != 0 {
		t.Errorf("store check, sound: exit %d, stderr %q", res.code, res.stderr)
	}

	db := filepath.Join(r.home, "loopr.db")
	held, err := bolt.Open(db, 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res = run(t, r.dir, "", "store", "check")
	if res.code != 4 || !strings.Contains(res.stderr, "is in use by") {
		t.Errorf("store check with the file held: exit %d, stderr %q; want 4", res.code, res.stderr)
	}
	if err := held.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("idx_status")).Put([]byte("running\x00ghost"), []byte{})
	}); err != nil {
		t.Fatal(err)
	}
	held.Close()
	if res := run(t, r.dir, "", "store", "check"); res.code != 1 || !strings.Contains(res.stdout, "loop ghost: no record") {
		t.Errorf("store check, damaged: exit %d, stdout %q; want 1 naming the problem", res.code, res.stdout)
	}

	empty := plainDir(t, "storage: {disk_quota_min_gb: 0}\n")
	if res := run(t, empty.dir, "", "store", "check"); res.code != 2 || !strings.Contains(res.stderr, "no store at") {
		t.Errorf("store check with no store: exit %d, stderr %q; want 2", res.code, res.stderr)
	}
}

// TestWebhookPortOutOfRange: a webhook URL whose port is out of range
// (99999: url.Parse takes any digits) is refused by `loopr config check`
// and by the daemon, naming the key and its line; exit 2.
func TestWebhookPortOutOfRange(t *testing.T) {
	t.Parallel()
	r := plainDir(t, "storage: {disk_quota_min_gb: 0}\nwebhooks:\n  - events: [needs_human]\n    url: http://127.0.0.1:99999/hook\n")
	want := "loopr.yml:4: webhooks[0].url: port 99999: want a number from 1 to 65535"
	for _, args := range [][]string{{"config", "check"}, {"daemon"}} {
		res, _ := runWithin(t, testslack.Scale(60*time.Second), r.dir, args...) // a daemon that accepts it runs on
		if res.code != 2 || !strings.Contains(res.stderr+res.stdout, want) {
			t.Errorf("loopr %s: exit %d\nstdout %q\nstderr %q\nwant exit 2 and %q", strings.Join(args, " "), res.code, res.stdout, res.stderr, want)
		}
	}
}

// TestDetachRaceLoser: of two `loopr daemon --detach` started together,
// the one whose daemon finds the home taken says a daemon already runs,
// with the winner's pid, and exits 0, as when it finds one at once, and
// shows none of the log the two share. Deterministic: the winner is held
// (in its preflight check's git, after it took the store and logged its
// first lines) until the loser's daemon gave up. Before, the loser printed
// the shared log's tail, the winner's lines in it, and failed.
func TestDetachRaceLoser(t *testing.T) {
	t.Parallel()
	r := newRepo(t, "storage: {disk_quota_min_gb: 0}\n")
	g := newGitHold(t, map[string]string{"preflight": `" rev-parse --verify --quiet HEAD^{commit} "`})
	g.on(t, "preflight")
	stopAtEnd(t, r.dir)
	first := make(chan result, 1)
	go func() { first <- runEnv(t, r.dir, "", []string{g.env()}, "daemon", "--detach") }()
	if !testslack.Wait(60*time.Second, poll, func() bool { return g.held("rev-parse") }) {
		t.Fatal("the first daemon never reached its preflight check")
	}

	second := make(chan result, 1)
	go func() { second <- run(t, r.dir, "", "daemon", "--detach") }()
	// The second daemon finds the store taken and exits; then the first
	// may go on, and the second --detach finds it serving.
	log := filepath.Join(r.home, "logs", "daemon.log")
	if !testslack.Wait(60*time.Second, poll, func() bool {
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), "loopr: store is in use by pid")
	}) {
		b, _ := os.ReadFile(log)
		t.Fatalf("the second daemon never found the store taken; log:\n%s", b)
	}
	g.off(t, "preflight")
	lost, won := <-second, <-first
	m := regexp.MustCompile(`^daemon started, pid (\d+), log `).FindStringSubmatch(won.stdout)
	if won.code != 0 || m == nil {
		t.Fatalf("first --detach: exit %d\nstdout %q\nstderr %q", won.code, won.stdout, won.stderr)
	}
	want := "a loopr daemon already runs here (pid " + m[1] + "); nothing to start\n"
	if lost.code != 0 || lost.stdout != want || lost.stderr != "" {
		t.Errorf("the --detach that lost: exit %d\nstdout %q\nstderr %q\nwant exit 0 and stdout %q", lost.code, lost.stdout, lost.stderr, want)
	}
	// Found at once, the same words.
	if res := run(t, r.dir, "", "daemon", "--detach"); res.code != 0 || res.stdout != want {
		t.Errorf("--detach with the daemon up: exit %d, stdout %q; want 0 and %q", res.code, res.stdout, want)
	}
}
