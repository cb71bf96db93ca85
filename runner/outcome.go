// How an iteration ends: validation (the artifact, then each validate
// command), the files an agent wrote (artifact, question) read safely, and
// the Result of a pass, a failure, a question or a cancellation.

package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/preset"
)

// validate checks the artifact of plan, spec and phase loops, then runs each
// validate command until one fails.
func (it *iteration) validate(ctx context.Context, vlog io.Writer) Result {
	typ := it.j.Loop.Type
	var accepted []byte // the artifact as validated, copied once everything passes
	if f, ok := artifact.FormatOf(typ); ok {
		data, err := it.readArtifact()
		var doc artifact.Doc
		if err == nil {
			doc, err = artifact.Parse(typ, data)
			if err == nil {
				err = doc.CheckSections() // each section becomes a child's task: bounded
			}
			if err != nil {
				err = fmt.Errorf("artifact: %w", err)
			}
		}
		if err != nil {
			// No usable artifact: the run failed, so a limit message in
			// its text counts (unless the agent's own final event said
			// it succeeded: structured output wins).
			if !preset.Final(it.s.Preset, []byte(it.output)) {
				switch rep := preset.ParseText([]byte(it.output), true, it.r.now(), it.s.RateLimitPattern); {
				case rep.Limited:
					return it.limited("rate limited: "+rep.Detail, rep)
				case rep.SpendCap:
					return it.spendCapped(rep)
				}
			}
			fmt.Fprintf(vlog, "%s: %v\n", it.artifact, err)
			hint := fmt.Sprintf("The artifact must be a regular file written to $LOOPR_ARTIFACT (%s) and start with `# %s: <title>`, then free text, then `## %s` with one `### %s <n>: <name>` heading per %s, numbered from 1.",
				it.artifact, f.Heading, f.Section, f.Child, strings.ToLower(f.Child))
			return it.failHint(err.Error(), hint, "agent.log", it.agentLog)
		}
		fmt.Fprintf(vlog, "artifact %s: ok, %d %s sections\n", it.artifact, len(doc.Sections), strings.ToLower(f.Child))
		it.res.Artifact, it.res.Doc = it.artifact, &doc
		accepted = data
	}
	l := it.j.Loop
	var sb *sandboxRun
	if len(it.s.Validate) > 0 {
		var err error
		if sb, err = it.startSandbox(); err != nil {
			return it.fail(err.Error(), "", "")
		}
		defer sb.end()
	}
	ev, f := it.r.RunChecks(ctx, Check{
		Commands: it.s.Validate, Dir: it.j.Workdir, Env: it.cmdEnv,
		Timeout: it.s.ValidateTimeout, Grace: it.s.Grace, Log: vlog,
		Where: loop.WhereWorktree, Started: it.groupStarted,
		Name: fmt.Sprintf("%s.%d.validate", l.ID, l.Iteration), Loop: l.ID, Home: it.j.Home, Worktree: it.worktree(),
		Wrap: sb.wrapper(),
	})
	it.res.Evidence = ev
	switch {
	case f != nil && f.Cancelled:
		return it.cancelled(f.Reason)
	case f != nil:
		return it.fail(f.Reason, "validation.log", it.validLog)
	}
	if accepted != nil {
		// What was validated is what gets approved and spawned: a copy
		// loopr wrote, not $LOOPR_ARTIFACT, which the agent (or a process
		// it left) could still change.
		path := AcceptedPath(it.j.Home, it.j.Loop.ID, it.j.Loop.Iteration, typ)
		if err := safefile.WriteAtomic(path, accepted, 0o600); err != nil {
			return it.fail(fmt.Sprintf("artifact: keep the accepted copy: %v", err), "", "")
		}
		it.res.Artifact = path
	}
	it.res.Outcome = Passed
	return it.res
}

// readArtifact reads the agent's artifact: a regular file of at most
// artifact.MaxSize bytes, reached from the loop's directory without a
// symlink (an artifact linked to /proc/self/environ, a FIFO or /dev/zero
// is refused, never read). The error is the iteration's one-line reason.
func (it *iteration) readArtifact() ([]byte, error) {
	l := it.j.Loop
	root := LoopDir(it.j.Home, l.ID)
	rel, err := filepath.Rel(root, it.artifact)
	if err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	b, err := safefile.ReadBeneath(root, rel, artifact.MaxSize)
	if err != nil {
		return nil, fileReason("artifact", it.artifact, "write a regular file at $LOOPR_ARTIFACT", err)
	}
	return it.scrub(it.artifact, b), nil
}

// fileReason turns a refused read of a file an agent wrote (what, at path)
// into a one-line reason that says what to do, never what the file holds.
func fileReason(what, path, todo string, err error) error {
	var nr *safefile.NotRegularError
	var tl *safefile.TooLargeError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: not written (%s)", what, todo)
	case errors.As(err, &nr) && nr.Path != path:
		return fmt.Errorf("%s: its directory %s is %s; %s", what, nr.Path, nr.Describe(), todo)
	case errors.As(err, &nr):
		return fmt.Errorf("%s is %s; %s", what, nr.Describe(), todo)
	case errors.As(err, &tl) && tl.Size > tl.Limit:
		return fmt.Errorf("%s is %d bytes; the limit is %d", what, tl.Size, tl.Limit)
	case errors.As(err, &tl):
		return fmt.Errorf("%s is larger than %d bytes, the limit", what, tl.Limit)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// LoopDir returns <home>/loops/<id>, the directory of everything loopr
// keeps for one loop.
func LoopDir(home, id string) string {
	return filepath.Join(home, "loops", id)
}

// AcceptedPath is where the runner keeps the copy of the artifact it
// validated in iteration n of loop id: loops/<id>/accepted/<NNN>-<type>.md.
// One file per iteration, never rewritten, so children spawned from it keep
// reading exactly the text they were spawned from. It is written durably
// before the Result says Passed: approve and the children's prompts read it
// after the store has recorded the pass.
func AcceptedPath(home, id string, n int, typ loop.Type) string {
	return filepath.Join(LoopDir(home, id), "accepted", fmt.Sprintf("%03d-%s.md", n, typ))
}

// QuestionFile is the name, in the iteration directory, of the file an
// agent writes a question to ($LOOPR_QUESTION_FILE) before it exits: the
// loop then waits for a person's answer without spending the iteration.
const QuestionFile = "question.md"

// MaxQuestion bounds the question file read back.
const MaxQuestion = 16 << 10

// readQuestion reads $LOOPR_QUESTION_FILE: "" when it was not written or
// holds only white space. Anything but a regular file of at most
// MaxQuestion bytes is an error (the iteration fails with it).
func (it *iteration) readQuestion() (string, error) {
	root := LoopDir(it.j.Home, it.j.Loop.ID)
	rel, err := filepath.Rel(root, it.question)
	if err != nil {
		return "", err
	}
	b, err := safefile.ReadBeneath(root, rel, MaxQuestion)
	var nr *safefile.NotRegularError
	if errors.Is(err, fs.ErrNotExist) || errors.As(err, &nr) && nr.Path != it.question {
		return "", nil // not written; or its directory was replaced, which the artifact check reports
	}
	if err != nil {
		return "", fileReason("question", it.question, "write a regular file of at most 16 KiB at $LOOPR_QUESTION_FILE", err)
	}
	b = it.scrub(it.question, b)
	return strings.TrimSpace(termsafe.Text(strings.ToValidUTF8(string(b), "\uFFFD"))), nil
}

// asked ends the iteration with the agent's question: Failed with
// Question set, which the caller turns into needs_human without spending
// the iteration. A question file loopr refused to read fails the iteration.
func (it *iteration) asked(q string, err error) Result {
	if err != nil {
		return it.fail(err.Error(), "agent.log", it.agentLog)
	}
	it.res.Outcome = Failed
	it.res.Reason = "the agent asked a question"
	it.res.Question = q
	return it.res
}

func (it *iteration) cancelled(reason string) Result {
	it.res.Outcome = Cancelled
	it.res.Reason = reason
	return it.res
}

func (it *iteration) fail(reason, logName, logPath string) Result {
	return it.failHint(reason, "", logName, logPath)
}

// failHint ends the iteration as failed. The feedback names what failed,
// adds hint, and fills the rest of FeedbackBytes with the tail of the log.
func (it *iteration) failHint(reason, hint, logName, logPath string) Result {
	it.res.Outcome = Failed
	it.res.Reason = reason
	l := it.j.Loop
	var b strings.Builder
	fmt.Fprintf(&b, "Iteration %d", l.Iteration)
	if l.MaxIterations > 0 {
		fmt.Fprintf(&b, " of %d", l.MaxIterations)
	}
	fmt.Fprintf(&b, " failed: %s.\n", reason)
	if hint != "" {
		b.WriteString(hint + "\n")
	}
	head := b.String()
	limit := it.s.FeedbackBytes
	if logPath != "" {
		label := fmt.Sprintf("\nEnd of %s:\n", logName)
		if room := limit - len(head) - len(label); room > 64 {
			if tail := strings.TrimSpace(readTail(logPath, room)); tail != "" {
				head += label + tail + "\n"
			}
		}
	}
	it.res.Feedback = clip(head, limit)
	return it.res
}

// startReason explains why the agent could not start.
func startReason(argv []string, err error) string {
	name := argv[0]
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return "agent binary not found: " + name
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EACCES):
		return "agent binary not executable: " + name
	}
	return fmt.Sprintf("agent could not start: %v", err)
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// ErrKill, as the cause of the cancel of a Run's context, stops the
// iteration's processes at once with SIGKILL, without the grace period:
// its worker lost its etcd session, so another worker may run the loop
// any moment (docs/several-machines.md).
var ErrKill = errors.New("stop at once: this worker was fenced")
