package runner

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"text/template"

	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/preset"
)

// SessionFile is the name, in the iteration directory, of the file that
// holds the agent's session id of the run (one line), once its CLI
// reported it: `loopr attach` and people read it there (or in the
// record's session). An earlier attempt's moves with it to attempt-<k>/.
const SessionFile = "session"

// Resume asks Run to continue the agent's session of an earlier run
// instead of starting the CLI cold, with the short resume prompt.
type Resume struct {
	Session string // the session id to continue
	// Why is how that run ended (loop.Session.Ended): "" or
	// "interrupted", "rate_limited", "asked", "failed".
	Why string
}

// maxSessionScan bounds how much of the agent's output is searched for
// its session id: the CLIs announce it in their first event.
const maxSessionScan = 1 << 20

// sessionWatch finds the session id in the agent's output as it streams
// and reports it once.
type sessionWatch struct {
	preset string
	it     *iteration

	mu   sync.Mutex
	line []byte
	seen int
	done bool
}

// Write never fails.
func (w *sessionWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for !w.done && len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if len(w.line) < maxWatchLine*4 {
			w.line = append(w.line, chunk[:min(len(chunk), maxWatchLine*4-len(w.line))]...)
		}
		w.seen += len(chunk) + 1
		if i < 0 {
			break
		}
		if id := preset.SessionLine(w.preset, w.line, w.it.s.SessionPattern); id != "" {
			w.done = true
			w.it.setSession(id)
		}
		w.line = w.line[:0]
		p = p[i+1:]
		if w.seen > maxSessionScan {
			w.done = true
		}
	}
	return n, nil
}

// setSession records the session id of the run under way: the session
// file, Result.Session, and OnSession. The first one of a run counts.
func (it *iteration) setSession(id string) {
	it.sessMu.Lock()
	defer it.sessMu.Unlock()
	if id == "" || it.session != "" {
		return
	}
	it.session = id
	if err := safefile.WriteAtomic(filepath.Join(it.res.Dir, SessionFile), []byte(id+"\n"), 0o644); err != nil {
		it.log.Warn("write the session file", "err", err)
	}
	if it.r.OnSession != nil {
		it.r.OnSession(it.j.Loop.ID, id)
	}
}

// newSessionID returns a random UUID (version 4): claude takes it as
// --session-id, so the session is known before the CLI prints anything.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ResumePromptData is what the resume prompt template sees: PromptData
// and how the session's last run ended.
type ResumePromptData struct {
	PromptData
	// Why is how the session's last run ended: "interrupted" (the daemon
	// stopped, a stall or the timeout killed it, a provider error),
	// "rate_limited", "asked" (Answer holds the reply) or "failed"
	// (Feedback holds why, the newest failure only).
	Why     string
	Session string
}

// resumeTemplate is the embedded resume prompt.
var resumeTemplate = sync.OnceValue(func() *template.Template {
	b, err := promptFS.ReadFile("prompts/resume.md")
	if err != nil {
		panic(err)
	}
	return template.Must(template.New("resume.md").Funcs(PromptFuncs).Option("missingkey=error").Parse(string(b)))
})

// ResumePromptFor renders the short prompt of a resumed run: what
// happened since the session's last run, not the whole task again.
// Settings.ResumePromptFile overrides the embedded template.
func ResumePromptFor(j Job, r Resume) (string, error) {
	d, err := promptData(j)
	if err != nil {
		return "", err
	}
	d.Feedback = newestFeedback(d.Feedback)
	if r.Why != "failed" {
		d.Feedback = ""
	}
	why := r.Why
	if why == "" {
		why = "interrupted"
	}
	tmpl := resumeTemplate()
	if p := j.Settings.ResumePromptFile; p != "" {
		b, err := safefile.ReadFollow(p, MaxPromptTemplate)
		if err != nil {
			return "", fmt.Errorf("resume prompt template: %w", err)
		}
		if tmpl, err = template.New(p).Funcs(PromptFuncs).Option("missingkey=error").Parse(string(b)); err != nil {
			return "", fmt.Errorf("resume prompt template: %w", err)
		}
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, ResumePromptData{PromptData: d, Why: why, Session: r.Session}); err != nil {
		return "", fmt.Errorf("resume prompt template: %w", err)
	}
	return b.String(), nil
}

// newestFeedback is the newest failure of a loop's feedback (loopmgr puts
// it first, older ones after a "--- earlier ---" line).
func newestFeedback(fb string) string {
	if i := strings.Index(fb, "\n\n--- earlier ---\n"); i >= 0 {
		return fb[:i]
	}
	return fb
}
