package daemon

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/redact"
)

// TestRedactingLog: the daemon's log redacts the message, string, error
// and group attributes, and attributes bound before the secret was known
// to the Redactor set later reach the loggers made before.
func TestRedactingLog(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	log := redactingLog(slog.New(slog.NewTextHandler(&buf, nil)))
	early := log.With("loop", "q1").WithGroup("g")
	rd := redact.New()
	rd.Add("PW", "hunter2-hunter2")
	log.Handler().(*redactHandler).r.Store(rd) // what useRedactor does
	early.Warn("said hunter2-hunter2", "out", "x hunter2-hunter2", "err", errors.New("exit: hunter2-hunter2"),
		slog.Group("sub", "tok", "ghp_"+strings.Repeat("a", 36)), "n", 3)
	got := buf.String()
	if strings.Contains(got, "hunter2") || strings.Contains(got, "ghp_") {
		t.Fatalf("log leaked: %s", got)
	}
	for _, want := range []string{`msg="said [redacted PW]"`, `g.out="x [redacted PW]"`, `g.err="exit: [redacted PW]"`, `g.sub.tok="[redacted github_token]"`, "g.n=3", "loop=q1"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s: %s", want, got)
		}
	}
}
