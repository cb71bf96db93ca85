package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/internal/testslack"
)

// TestNotifyCommandBounded: the notify command gets the event in its
// environment, and one that hangs is killed with its whole process group
// after the timeout.
func TestNotifyCommandBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cfg := config.Default()
	cfg.Notify.Command = []string{"sh", "-c",
		`printf '%s|%s|%s|%s|%s|%s\n' "$LOOPR_EVENT" "$LOOPR_LOOP_ID" "$LOOPR_TITLE" "$LOOPR_REASON" "$LOOPR_ACTION" "$$" > ` + out + `; sleep 30 & wait`}
	var logBuf lockedBuffer
	d := &daemon{log: slog.New(slog.NewTextHandler(&logBuf, nil))}
	d.paths.Workspace = dir
	d.cfg.Store(cfg)
	n := newNotifier(d)
	n.timeout = 300 * time.Millisecond
	start := time.Now()
	n.exec(context.Background(), note{Event: "needs_human", Loop: "q1", Title: "Pick a port", Reason: "question: which port?", Action: `loopr answer q1 "…"`})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a hanging notify command held the notifier %s; want about the timeout", took)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(strings.TrimSpace(string(b)), "|")
	if len(f) != 6 || f[0] != "needs_human" || f[1] != "q1" || f[2] != "Pick a port" || f[3] != "question: which port?" || f[4] != `loopr answer q1 "…"` {
		t.Fatalf("the command saw %q", b)
	}
	pgid, _ := strconv.Atoi(f[5])
	deadline := time.Now().Add(testslack.Scale(3 * time.Second))
	// A member killed but not yet reaped is a zombie: it counts as gone
	// (another test's daemon in this process may be the child subreaper
	// that inherited it, and it reaps only while it runs).
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d of the notify command still alive", pgid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logBuf.String(), "notify: command failed") {
		t.Errorf("the killed command was not logged:\n%s", logBuf.String())
	}
}

// groupAlive reports whether a process of group pgid runs (zombies aside).
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces: split after ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return true
		}
	}
	return false
}
