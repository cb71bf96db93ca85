// Package runner runs one iteration of a loop (SPEC §6): it renders the
// prompt, runs the agent in its own process group with the prompt on stdin,
// classifies the result (passed, failed, rate limited, cancelled) from the
// agent's structured output first (preset.Parse, Settings.Preset), then the
// rate-limit exit code, then the text pattern, which counts only for a run
// that failed (non-zero exit, an error result, no artifact) or, on exit 0,
// for a usage-limit line at the very end: a run that passes is never a rate
// limit. It checks the artifact of plan, spec and phase loops, runs the
// validate commands, and writes everything to the iteration's directory:
//
//	<home>/loops/<id>/iterations/<NNN>/
//	    prompt.md        the rendered prompt (the agent's stdin)
//	    agent.log        the agent's stdout and stderr, bounded (head and tail)
//	    usage.json       tokens, cost and agent seconds the run reported (loop.Usage)
//	    session          the agent CLI's session id of the run, one line (SessionFile)
//	    validation.log   the artifact check and every validate command, bounded
//	    <type>.md        the artifact, written by the agent ($LOOPR_ARTIFACT)
//	    attempt-<k>/     the files of an earlier run of the same iteration
//	                     (a rate-limited or interrupted attempt, or a resume
//	                     the CLI refused: it did not know the session)
//	<home>/loops/<id>/accepted/<NNN>-<type>.md
//	                     loopr's copy of the artifact that passed, which
//	                     approve and the children's prompts read
//
// Every file it reads back that the agent could have replaced goes through
// internal/safefile: a FIFO, a symlink or an oversize file fails the
// iteration with a one-line reason instead of blocking it or leaking what
// the link points to.
//
// A Runner holds no loop state; the caller turns a Result into a store
// transition. Run never panics on bad input or a misbehaving agent: every
// problem becomes a failed Result with a one-line Reason.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/internal/contain"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/preset"
	"github.com/loopr-dev/loopr/procenv"
	"github.com/loopr-dev/loopr/redact"
	"github.com/loopr-dev/loopr/sandbox"
)

// Defaults for zero Settings fields.
const (
	DefaultValidateTimeout = 10 * time.Minute
	DefaultMaxLogBytes     = 4 << 20
	DefaultFeedbackBytes   = 4096
	DefaultGrace           = 5 * time.Second
)

// maxParseBytes bounds how much of agent.log is read back to parse the
// agent's output (its structured events and usage); the bounded log keeps
// its head and tail, so the final events are always there.
const maxParseBytes = 8 << 20

// logSlack covers the marker the bounded log writes where it cut.
const logSlack = 4 << 10

// Settings configure how an iteration runs (loopr.yml agent.* and
// loops.<type>.*, resolved for one loop type).
type Settings struct {
	Agent             []string      // argv of the agent; never a shell string
	Validate          []string      // each run as `sh -c` in the workdir after the agent exits 0
	PromptFile        string        // optional template overriding the embedded prompt; the caller resolves relative paths
	Timeout           time.Duration // agent wall-clock limit; 0: none
	ValidateTimeout   time.Duration // per validate command; default 10m
	RateLimitExitCode int           // agent exit status meaning "rate limited"; 0: none
	RateLimitPattern  *regexp.Regexp
	MaxLogBytes       int64 // per log file, default 4 MiB; the head and tail are kept
	FeedbackBytes     int   // bound of Result.Feedback, default 4096
	Grace             time.Duration
	// Profile says what of the daemon's environment the agent and the
	// validate commands get, and the profile's own values and secrets
	// (package procenv). The zero Profile: the base set alone.
	Profile procenv.Profile
	// Env holds extra KEY=value pairs for the agent and validate commands,
	// after the profile's (LOOPR_WORKER). Values are never logged.
	Env []string
	// Preset names the parser of the agent's output (preset package):
	// claude, codex, gemini, opencode, or command (text only).
	Preset string
	// StallTimeout kills an agent that writes no output and changes no
	// file in the workdir for that long; 0: never.
	StallTimeout time.Duration
	// RetryTimeout stops an agent whose CLI has printed only notices of
	// retrying a failed provider call (preset.Line) for that long: the
	// iteration is rate limited, or a transient failure, as what it
	// retried says (preset.Retried); 0: the CLI retries as long as it
	// likes.
	RetryTimeout time.Duration
	// ResumeArgs and SessionPattern are the command preset's way to
	// resume a session (preset.ResumeArgv) and to find its id in the
	// output (preset.SessionLine); the other presets know their own.
	ResumeArgs     []string
	SessionPattern *regexp.Regexp
	// ResumePromptFile overrides the embedded resume prompt template
	// (prompts/resume.md); the caller resolves relative paths.
	ResumePromptFile string
	// Sandbox is the profile's sandbox: when On, the agent and the
	// validate commands run in bwrap (package sandbox).
	Sandbox sandbox.Policy
	// MCP gives the agent loopr's MCP server when the Runner has one
	// (agent.mcp, default true).
	MCP bool
}

func (s Settings) withDefaults() Settings {
	if s.ValidateTimeout <= 0 {
		s.ValidateTimeout = DefaultValidateTimeout
	}
	if s.MaxLogBytes <= 0 {
		s.MaxLogBytes = DefaultMaxLogBytes
	}
	if s.FeedbackBytes <= 0 {
		s.FeedbackBytes = DefaultFeedbackBytes
	}
	if s.Grace <= 0 {
		s.Grace = DefaultGrace
	}
	return s
}

// Job is one iteration to run.
type Job struct {
	Loop               loop.Loop // ID, Type, Title, Task, Iteration, MaxIterations and Feedback are used
	Home               string
	Workdir            string
	ParentArtifact     string // path of the parent's artifact, or ""
	ParentArtifactText string // its content; read from ParentArtifact when empty
	Settings           Settings
	Refresh            Refresh // a merge from the plan branch left for the agent to conclude
	// Resume, when set, continues that agent session with the short
	// resume prompt; a CLI that does not know the session is started
	// fresh with the whole prompt, in the same Run (Result.SessionNote).
	Resume *Resume
}

// Outcome classifies how an iteration ended.
type Outcome string

// The outcomes. RateLimited does not spend an iteration; Cancelled means the
// context ended (daemon shutdown or `loopr cancel`).
const (
	Passed      Outcome = "passed"
	Failed      Outcome = "failed"
	RateLimited Outcome = "rate_limited"
	Cancelled   Outcome = "cancelled"
)

// Result is what one iteration did.
type Result struct {
	Outcome   Outcome
	Iteration int
	Dir       string // <home>/loops/<id>/iterations/<NNN>, absolute
	// Artifact and Doc are set when a plan, spec or phase loop wrote an
	// artifact that parsed; the Outcome says whether validation then passed.
	// Once it passed, Artifact names loopr's copy (AcceptedPath), not the
	// agent's file.
	Artifact string
	Doc      *artifact.Doc
	ExitCode int    // the agent's exit status; -1 when it did not exit on its own or never ran
	Feedback string // for a failed iteration: what failed and the tail of the relevant log, at most FeedbackBytes
	Reason   string // one line: why the iteration did not pass; "" when it passed
	// RateLimitUntil is when the provider said the limit ends, and
	// RateLimitAfter the same as a wait from the end of the run; both are
	// zero when the output announced nothing.
	RateLimitUntil       time.Time
	RateLimitAfter       time.Duration
	AgentStart, AgentEnd time.Time

	// Usage is what the agent reported consuming (its structured output),
	// zero when it reported nothing.
	Usage loop.Usage
	// Transient marks a failure the provider caused and that may pass on
	// its own (5xx, overloaded, connection reset): retried without
	// spending the iteration, a bounded number of times.
	Transient bool
	// TransientWhat names what failed for a Transient result when it was
	// not the agent's provider (e.g. "git remote out of reach"); "" = the
	// provider.
	TransientWhat string
	// Setup marks a failure before the agent started, of this machine's
	// making: the iteration directory, the prompt or the agent's log could
	// not be written (a read-only or full home). The agent never ran:
	// the caller should not spend the iteration.
	Setup bool
	// Stalled marks an agent killed for producing no output and changing
	// no file for Settings.StallTimeout.
	Stalled bool
	// Question is what the agent wrote to $LOOPR_QUESTION_FILE, if
	// anything: the loop waits for a person's answer.
	Question string
	// Evidence is the validate commands that ran, in the workdir (the
	// last one the failing one, when one failed); the caller adds the
	// commit they validated.
	Evidence []loop.Evidence
	// Session is the agent's session id of the run, once its CLI
	// reported it ("" when it did not); Resumed says the run continued
	// Job.Resume's session, and SessionNote why it could not (the CLI
	// did not know the session: the run started fresh instead).
	Session     string
	Resumed     bool
	SessionNote string
}

// Runner runs iterations. The zero value is ready to use; several Runs may
// proceed at once.
type Runner struct {
	Now func() time.Time // default time.Now
	Log *slog.Logger     // default: discard
	// OnAgentStart, when set, is called with the pid (which is also the
	// process group id) of each process group an iteration starts: the
	// agent's once it runs, then each validate command's. They run one
	// after the other, each group gone before the next starts, so the
	// caller can record the live one in the loop's lease and a daemon
	// restarted after a crash can kill it: a validation left running (a
	// long test suite) would otherwise share the worktree with the next
	// iteration. It must not block.
	OnAgentStart func(loopID string, pid int)
	// AgentSlots, when set, limits how many agents run at once across all
	// Runs (max_api_calls): a buffered channel whose capacity is the limit.
	// Run sends to it before starting the agent and receives once the
	// agent's process group is gone; validation does not hold a slot.
	AgentSlots chan struct{}
	// Redact replaces secrets in what an iteration writes and returns
	// (agent.log, validation.log, feedback): the daemon's one Redactor,
	// which knows every secret handed to an agent. nil: token shapes only.
	Redact *redact.Redactor
	// Jail contains the processes an iteration starts beyond their process
	// group (cgroups, the subreaper; package contain). nil: the group and
	// nothing more.
	Jail *contain.Jail
	// OnRefused, when set, is called the first time in a process run that
	// the sandbox's proxy refuses a host (network allow: not in
	// allow_hosts), for the journal. It must not block for long.
	OnRefused func(loopID string, iteration int, target string)
	// OnSession, when set, is called with the agent's session id once the
	// run knows it (claude's is set up front; the others' come with the
	// CLI's first event), while the agent runs: the caller records it, so
	// a daemon restarted after a crash can resume it. It must not block
	// for long.
	OnSession func(loopID, session string)
	// MCP, when set, starts loopr's MCP server beside the agents of
	// profiles with Settings.MCP (runner/mcp.go).
	MCP *MCP
}

// IterationDir returns <home>/loops/<id>/iterations/<NNN>.
func IterationDir(home, id string, iteration int) string {
	return filepath.Join(home, "loops", id, "iterations", fmt.Sprintf("%03d", iteration))
}

// ArtifactPath returns where loop l writes its artifact in its current
// iteration: <iteration dir>/<type>.md.
func ArtifactPath(home string, l loop.Loop) string {
	return filepath.Join(IterationDir(home, l.ID, l.Iteration), l.Type+".md")
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) logger() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Run runs iteration j.Loop.Iteration of j.Loop and reports how it went. It
// returns when the agent's process group and every validate command are
// gone. Cancelling ctx stops the agent (SIGTERM, then SIGKILL after the
// grace period) and yields Cancelled.
func (r *Runner) Run(ctx context.Context, j Job) Result {
	j.Settings = j.Settings.withDefaults()
	it := &iteration{r: r, j: j, s: j.Settings, res: Result{Iteration: j.Loop.Iteration, ExitCode: -1}}
	it.log = r.logger().With("loop", j.Loop.ID, "type", j.Loop.Type, "iteration", j.Loop.Iteration)
	res := r.redactResult(it.run(ctx))
	if res.Outcome == Passed {
		it.log.Info("iteration passed")
	} else {
		it.log.Info("iteration ended", "outcome", res.Outcome, "reason", res.Reason)
	}
	return res
}

// iteration is the state of one Run.
type iteration struct {
	r   *Runner
	j   Job
	s   Settings
	log *slog.Logger
	res Result

	env        []string // the agent's (env.go)
	cmdEnv     []string // its validate commands'
	promptPath string
	agentLog   string
	validLog   string
	artifact   string
	question   string
	output     string        // agent.log as read back after the agent exited
	report     preset.Report // what the output says (preset.Parse)

	sessMu  sync.Mutex
	session string // the run's session id (setSession)
}

func (it *iteration) run(ctx context.Context) Result {
	j := &it.j
	if err := it.prepare(); err != nil {
		return it.fail(err.Error(), "", "")
	}
	if ctx.Err() != nil {
		return it.cancelled("cancelled before the agent started")
	}

	// 1 and 2. The prompt and the agent: a resume, or a fresh start.
	p, failed := it.start(ctx, j.Resume)
	if failed != nil {
		return *failed
	}
	if msg := it.unknownSession(p); msg != "" {
		// The CLI does not know the session (expired, deleted, made
		// elsewhere): start fresh, in this same attempt; the failed
		// resume's files move to attempt-<k>/.
		it.res.SessionNote = fmt.Sprintf("the agent could not resume session %s (%s): started fresh", j.Resume.Session, msg)
		it.log.Warn("session unknown to the agent: starting fresh", "session", j.Resume.Session)
		if err := prepareDir(it.res.Dir); err != nil {
			it.res.Setup = true
			return it.fail(fmt.Sprintf("iteration directory: %v", err), "", "")
		}
		it.res.Resumed, it.session, it.res.Session = false, "", ""
		if p, failed = it.start(ctx, nil); failed != nil {
			return *failed
		}
	}
	it.res.ExitCode = p.exitCode
	it.report = it.parseOutput(p)

	// 3. Classify.
	switch {
	case p.cancelled:
		return it.cancelled("cancelled while the agent ran")
	case p.startErr != nil:
		if !dirExists(j.Workdir) {
			return it.fail("workdir vanished", "", "")
		}
		return it.fail(startReason(j.Settings.Agent, p.startErr), "", "")
	case p.timedOut && it.report.Limited:
		// Killed while the CLI was waiting out a limit itself.
		return it.limited("rate limited: "+it.report.Detail+" (agent timed out)", it.report)
	case p.retrying:
		return it.retried()
	}
	if q, err := it.readQuestion(); err != nil || q != "" {
		return it.asked(q, err)
	}
	switch {
	case p.timedOut:
		return it.fail(fmt.Sprintf("agent timed out after %s", it.s.Timeout), "agent.log", it.agentLog)
	case p.stalled:
		it.res.Stalled = true
		return it.fail("stalled: no output or file change for "+shortDuration(it.s.StallTimeout), "agent.log", it.agentLog)
	case !dirExists(j.Workdir):
		return it.fail("workdir vanished", "agent.log", it.agentLog)
	}
	if it.report.SpendCap {
		return it.spendCapped(it.report)
	}
	if reason, limited := it.rateLimited(p); limited {
		return it.limited(reason, it.report)
	}
	rep := it.report
	if rep.Transient && (p.exitCode != 0 || rep.IsError) {
		it.res.Transient = true
		return it.fail("transient provider error: "+rep.Detail, "agent.log", it.agentLog)
	}
	if p.exitCode != 0 {
		reason := fmt.Sprintf("agent exited %d", p.exitCode)
		if p.signal != 0 {
			reason = fmt.Sprintf("agent killed by signal %d (%v)", int(p.signal), p.signal)
		} else if sig := p.exitCode - 128; it.s.Sandbox.On() && sig > 0 && sig < 65 {
			// bwrap exits 128+n for a child killed by signal n: the
			// two cannot be told apart from outside.
			reason += fmt.Sprintf(" (in the sandbox: killed by signal %d (%v), or it exited %d itself)", sig, syscall.Signal(sig), p.exitCode)
		}
		return it.fail(reason, "agent.log", it.agentLog)
	}
	if rep.IsError {
		reason := "agent exited 0 but its result reports an error"
		if rep.Detail != "" {
			reason += ": " + rep.Detail
		}
		return it.fail(reason, "agent.log", it.agentLog)
	}

	// 4. Validate.
	vlog, err := it.r.openLog(it.validLog, it.s.MaxLogBytes)
	if err != nil {
		return it.fail(fmt.Sprintf("validation log: %v", err), "", "")
	}
	res := it.validate(ctx, vlog)
	if err := vlog.Close(); err != nil {
		it.log.Warn("validation log", "err", err)
	}
	return res
}

// start writes the prompt and runs the agent: resuming session r with the
// resume prompt when r is set and the preset can, else fresh with the
// whole prompt. A non-nil Result ends the iteration (the agent never ran).
func (it *iteration) start(ctx context.Context, r *Resume) (procResult, *Result) {
	j := &it.j
	argv := j.Settings.Agent
	if r != nil {
		var ok bool
		if argv, ok = preset.ResumeArgv(it.s.Preset, argv, r.Session, it.s.ResumeArgs); !ok {
			r = nil
			argv = j.Settings.Agent
		}
	}
	var prompt string
	err := it.hiddenPrompt()
	switch {
	case err != nil:
	case r != nil:
		prompt, err = ResumePromptFor(*j, *r)
		it.res.Resumed = true
	default:
		prompt, err = PromptFor(*j)
		if id := newSessionID(); !slices.Equal(preset.StartArgv(it.s.Preset, argv, id), argv) {
			argv = preset.StartArgv(it.s.Preset, argv, id)
			it.setSession(id)
		}
	}
	if err != nil {
		res := it.fail(err.Error(), "", "")
		return procResult{}, &res
	}
	stdin, err := writePrompt(it.promptPath, prompt)
	if err != nil {
		it.res.Setup = true
		res := it.fail(fmt.Sprintf("write prompt: %v", err), "", "")
		return procResult{}, &res
	}
	defer stdin.Close()
	p, err := it.runAgent(ctx, stdin, argv)
	if err != nil { // its log could not be created: the agent never ran
		it.res.Setup = true
		res := it.fail(err.Error(), "", "")
		return procResult{}, &res
	}
	if r != nil {
		it.setSession(r.Session) // unless the CLI named the session it continued
	}
	it.sessMu.Lock()
	it.res.Session = it.session
	it.sessMu.Unlock()
	return p, nil
}

// unknownSession returns the CLI's message when the resumed run p failed
// because the CLI does not know the session; "" otherwise.
func (it *iteration) unknownSession(p procResult) string {
	if !it.res.Resumed || p.exitCode == 0 || p.cancelled || p.startErr != nil {
		return ""
	}
	return preset.Unknown([]byte(readTail(it.agentLog, 64<<10)))
}

// prepare checks the job, makes paths absolute, and creates the iteration
// directory, moving files of an earlier attempt at the same iteration aside.
func (it *iteration) prepare() error {
	j := &it.j
	l := j.Loop
	switch {
	case !loop.ValidID(l.ID):
		return fmt.Errorf("invalid loop id %q", l.ID)
	case !loop.ValidTypeName(l.Type):
		return fmt.Errorf("loop %s: invalid type %q", l.ID, l.Type)
	case l.Iteration < 1:
		return fmt.Errorf("loop %s: iteration %d: must be >= 1", l.ID, l.Iteration)
	case j.Home == "":
		return errors.New("no home directory")
	case j.Workdir == "":
		return errors.New("no workdir")
	case len(j.Settings.Agent) == 0 || j.Settings.Agent[0] == "":
		return errors.New("agent command is empty")
	}
	var err error
	for _, p := range []*string{&j.Home, &j.Workdir, &j.ParentArtifact} {
		if *p == "" {
			continue
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	if fi, err := os.Stat(j.Workdir); err != nil {
		return fmt.Errorf("workdir %s: %w", j.Workdir, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("workdir %s: not a directory", j.Workdir)
	}

	it.res.Dir = IterationDir(j.Home, l.ID, l.Iteration)
	if err := prepareDir(it.res.Dir); err != nil {
		it.res.Setup = true
		return fmt.Errorf("iteration directory: %w", err)
	}
	it.promptPath = filepath.Join(it.res.Dir, "prompt.md")
	it.agentLog = filepath.Join(it.res.Dir, "agent.log")
	it.question = filepath.Join(it.res.Dir, QuestionFile)
	it.validLog = filepath.Join(it.res.Dir, "validation.log")
	it.artifact = ArtifactPath(j.Home, l)

	if err := it.environ(); err != nil {
		it.res.Setup = true
		return err
	}
	return nil
}

// prepareDir creates dir. Files from an earlier attempt at the same
// iteration (it was rate limited, or the daemon stopped) move into the next
// free attempt-<k> subdirectory, so a stale artifact is never mistaken for
// this attempt's and the earlier logs stay readable.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var old []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "attempt-") {
			old = append(old, e.Name())
		}
	}
	if len(old) == 0 {
		return nil
	}
	var attempt string
	for k := 1; ; k++ {
		attempt = filepath.Join(dir, fmt.Sprintf("attempt-%d", k))
		err := os.Mkdir(attempt, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	for _, name := range old {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(attempt, name)); err != nil {
			return err
		}
	}
	return nil
}

// writePrompt writes the prompt to a fresh file at path and returns it,
// rewound, to be the agent's stdin: the descriptor loopr wrote is the one
// the agent reads, so nothing put at the path meanwhile (a FIFO, a link)
// is ever opened.
func writePrompt(path, prompt string) (*os.File, error) {
	f, err := createFresh(path)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(f, prompt); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// runAgent waits for an agent slot and runs the agent with the prompt on
// stdin. The error is for failures of loopr itself (the log could not be
// created); what the agent did is in the procResult.
func (it *iteration) runAgent(ctx context.Context, stdin *os.File, argv []string) (procResult, error) {
	out, err := it.r.openLog(it.agentLog, it.s.MaxLogBytes)
	if err != nil {
		return procResult{}, fmt.Errorf("agent log: %w", err)
	}
	defer func() {
		if err := out.Close(); err != nil {
			it.log.Warn("agent log", "err", err)
		}
	}()

	if slots := it.r.AgentSlots; slots != nil {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			return procResult{exitCode: -1, cancelled: true}, nil
		}
	}

	argv = preset.WithArtifactDir(it.s.Preset, argv, filepath.Dir(it.artifact))
	argv, err = it.withMCP(argv)
	if err != nil {
		return procResult{exitCode: -1, startErr: err}, nil
	}
	sb, err := it.startSandbox()
	if err == nil {
		defer sb.end()
		argv, err = sb.wrap(argv)
	}
	if err != nil {
		return procResult{exitCode: -1, startErr: err}, nil
	}
	it.res.AgentStart = it.r.now()
	p := runProcess(ctx, procSpec{
		argv:       argv,
		dir:        it.j.Workdir,
		env:        it.env,
		stdin:      stdin,
		out:        io.MultiWriter(out, &sessionWatch{preset: it.s.Preset, it: it}),
		timeout:    it.s.Timeout,
		grace:      it.s.Grace,
		stall:      it.s.StallTimeout,
		stallSkip:  it.stallSkip(),
		retry:      func(line []byte) preset.LineKind { return preset.Line(it.s.Preset, line) },
		retryAfter: it.s.RetryTimeout,
		started: func(pid int) {
			it.log.Info("agent started", "pid", pid, "agent", it.s.Agent[0])
			it.groupStarted(pid)
		},
		jail: it.r.Jail, name: fmt.Sprintf("%s.%d.agent", it.j.Loop.ID, it.j.Loop.Iteration),
		loop: it.j.Loop.ID, home: it.j.Home, worktree: it.worktree(),
	})
	it.res.AgentEnd = it.r.now()
	return p, nil
}

// stallSkip lists what the stall watch leaves out: loopr's home (its
// store, logs, agent.log itself and other loops' worktrees) when the agent
// works in the workspace; nothing when the workdir is a worktree inside
// the home.
func (it *iteration) stallSkip() []string {
	if rel, err := filepath.Rel(it.j.Home, it.j.Workdir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil
	}
	return []string{it.j.Home}
}

// worktree is the loop's own working directory when it is one loopr made
// below the home, where a process found is the loop's; "" when the loop
// runs in the user's workspace, where anyone's processes may be.
func (it *iteration) worktree() string {
	home, err1 := filepath.EvalSymlinks(it.j.Home)
	wd, err2 := filepath.EvalSymlinks(it.j.Workdir)
	if err1 != nil || err2 != nil || !strings.HasPrefix(wd, home+string(filepath.Separator)) {
		return ""
	}
	return wd // as /proc/<pid>/cwd shows it: links resolved
}

// groupStarted passes the pid of a process group this iteration started
// (the agent, or a validate command) to OnAgentStart.
func (it *iteration) groupStarted(pid int) {
	if it.r.OnAgentStart != nil {
		it.r.OnAgentStart(it.j.Loop.ID, pid)
	}
}
