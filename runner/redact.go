// What an iteration writes and returns passes through the Runner's
// Redactor: the agent's and validate commands' output as it is written
// (agent.log, validation.log), the files the agent leaves in the
// iteration directory once loopr has read them (question, artifact), and
// the text of the Result before the caller stores it.

package runner

import (
	"bytes"
	"io"

	"github.com/loopr-dev/loopr/internal/safefile"
)

// openLog creates a bounded log at path (createLog) whose text is
// redacted before the bound applies: the head and the tail are both
// redacted text, so cutting between them cuts no secret in two. Close
// flushes what the redactor holds back (the end of an unfinished line),
// then closes the log.
func (r *Runner) openLog(path string, limit int64) (io.WriteCloser, error) {
	f, err := createLog(path, limit)
	if err != nil {
		return nil, err
	}
	return &redactedLog{w: r.Redact.Writer(f), f: f}, nil
}

type redactedLog struct {
	w io.WriteCloser // the redactor's, onto f
	f *logFile
}

// Write never fails: logFile's Write does not, so neither does the
// redactor's onto it (a failing log must not stop the copy from the pipe).
func (l *redactedLog) Write(p []byte) (int, error) { return l.w.Write(p) }

func (l *redactedLog) Close() error {
	err := l.w.Close()
	if ferr := l.f.Close(); err == nil {
		err = ferr
	}
	return err
}

// redactResult returns res with its text redacted: what the caller
// stores (feedback, reason, question, notes) and what Run logs.
func (r *Runner) redactResult(res Result) Result {
	rd := r.Redact
	res.Feedback = rd.String(res.Feedback)
	res.Reason = rd.String(res.Reason)
	res.Question = rd.String(res.Question)
	res.SessionNote = rd.String(res.SessionNote)
	res.TransientWhat = rd.String(res.TransientWhat)
	return res
}

// scrub returns b redacted and, when that changed it, rewrites the file
// the agent left at path with the redacted text, so that the iteration
// directory keeps no secret the agent wrote into a file loopr reads (its
// question, its artifact). The agent's worktree is its own: not scanned.
func (it *iteration) scrub(path string, b []byte) []byte {
	red := it.r.Redact.Bytes(b)
	if !bytes.Equal(red, b) {
		if err := safefile.WriteAtomic(path, red, 0o644); err != nil {
			it.log.Warn("rewrite redacted", "file", path, "err", err)
		}
	}
	return red
}
