package runner

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// agent writes a shell script agent and returns its argv. Scripts run as
// `sh script` rather than being executed directly: executing a file that was
// just written races with concurrent forks in parallel tests (ETXTBSY).
func agent(t *testing.T, body string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(path, []byte("set -e\n"+body+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"sh", path}
}

func newJob(t *testing.T, typ string, argv []string) Job {
	t.Helper()
	return Job{
		Loop: loop.Loop{
			ID: "01TESTLOOP", Type: typ, Status: loop.Running, Title: "Test " + typ,
			Task: "Do the " + typ + " thing.", Iteration: 1, MaxIterations: 5,
		},
		Home:    t.TempDir(),
		Workdir: t.TempDir(),
		Settings: Settings{
			Agent:             argv,
			Timeout:           30 * time.Second,
			RateLimitExitCode: 75,
			RateLimitPattern:  regexp.MustCompile(`(?i)\b429\b|rate.?limit|usage limit`),
			Grace:             200 * time.Millisecond,
		},
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

const goodPlan = `# Plan: Cache

Free text.

## Specs

### Spec 1: Cache package
An LRU.

**Conflicts:** cache

### Spec 2: Use it
Wire it in.
`

func TestRunRalphPasses(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Ralph, agent(t, `echo working; echo done > done.txt`))
	j.Settings.Validate = []string{"test -f done.txt", "echo validated-ok"}
	res := (&Runner{}).Run(context.Background(), j)

	if res.Outcome != Passed || res.Reason != "" || res.ExitCode != 0 {
		t.Fatalf("Run() = %v %q exit %d, want passed", res.Outcome, res.Reason, res.ExitCode)
	}
	if want := IterationDir(j.Home, j.Loop.ID, 1); res.Dir != want {
		t.Errorf("Dir = %q, want %q", res.Dir, want)
	}
	if !strings.HasSuffix(res.Dir, filepath.Join("loops", "01TESTLOOP", "iterations", "001")) {
		t.Errorf("Dir = %q, want it to end in loops/01TESTLOOP/iterations/001", res.Dir)
	}
	if got := readFile(t, filepath.Join(res.Dir, "agent.log")); got != "working\n" {
		t.Errorf("agent.log = %q, want %q", got, "working\n")
	}
	vlog := readFile(t, filepath.Join(res.Dir, "validation.log"))
	for _, want := range []string{"$ test -f done.txt", "$ echo validated-ok", "validated-ok\n"} {
		if !strings.Contains(vlog, want) {
			t.Errorf("validation.log = %q, want it to contain %q", vlog, want)
		}
	}
	if res.Artifact != "" || res.Doc != nil {
		t.Errorf("ralph Result has artifact %q / doc %v, want none", res.Artifact, res.Doc)
	}
	if res.AgentStart.IsZero() || res.AgentEnd.Before(res.AgentStart) {
		t.Errorf("AgentStart/End = %v/%v", res.AgentStart, res.AgentEnd)
	}
}

func TestRunPlanArtifact(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Plan, agent(t, "cat > \"$LOOPR_ARTIFACT\" <<'EOF'\n"+goodPlan+"EOF"))
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Passed {
		t.Fatalf("Run() = %v %q, want passed; feedback:\n%s", res.Outcome, res.Reason, res.Feedback)
	}
	if want := filepath.Join(res.Dir, "plan.md"); ArtifactPath(j.Home, j.Loop) != want {
		t.Errorf("ArtifactPath = %q, want %q", ArtifactPath(j.Home, j.Loop), want)
	}
	// The Result names loopr's copy of what was validated, not the agent's file.
	if want := filepath.Join(j.Home, "loops", "01TESTLOOP", "accepted", "001-plan.md"); res.Artifact != want || AcceptedPath(j.Home, j.Loop.ID, 1, loop.Plan) != want {
		t.Errorf("Artifact = %q, want the accepted copy %q", res.Artifact, want)
	}
	if got := readFile(t, res.Artifact); got != goodPlan {
		t.Errorf("accepted copy = %q, want the artifact as validated", got)
	}
	want := &artifact.Doc{Type: "plan", Title: "Cache", Sections: []artifact.Section{
		{N: 1, Name: "Cache package", Text: "### Spec 1: Cache package\nAn LRU.\n\n**Conflicts:** cache", ConflictKey: "cache"},
		{N: 2, Name: "Use it", Text: "### Spec 2: Use it\nWire it in."},
	}}
	if diff := cmp.Diff(want, res.Doc); diff != "" {
		t.Errorf("Run() Doc mismatch (-want +got):\n%s", diff)
	}
}

func TestRunFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		typ          string
		script       string
		validate     []string
		wantOutcome  Outcome
		wantReason   string // prefix
		wantFeedback []string
		wantExit     int
	}{
		{
			name: "agent exits 3", typ: loop.Ralph, script: "echo something broke; exit 3",
			wantOutcome: Failed, wantReason: "agent exited 3", wantExit: 3,
			wantFeedback: []string{"Iteration 1 of 5 failed: agent exited 3.", "End of agent.log:\nsomething broke"},
		},
		{
			name: "agent killed by a signal", typ: loop.Ralph, script: "kill -9 $$",
			wantOutcome: Failed, wantReason: "agent killed by signal 9 (killed)", wantExit: -1,
		},
		{
			name: "malformed artifact", typ: loop.Plan,
			script:      "printf '# Plan: x\\n\\nno specs here\\n' > \"$LOOPR_ARTIFACT\"",
			wantOutcome: Failed, wantReason: "artifact: line 3: missing the `## Specs` section",
			wantFeedback: []string{"line 3: missing the `## Specs` section", "`### Spec <n>: <name>` heading per spec"},
		},
		{
			name: "artifact not written", typ: loop.Spec, script: "echo thinking",
			wantOutcome: Failed, wantReason: "artifact: not written",
			wantFeedback: []string{"`# Spec: <title>`", "`## Phases`", "End of agent.log:\nthinking"},
		},
		{
			name: "artifact is a FIFO", typ: loop.Plan, script: `mkfifo "$LOOPR_ARTIFACT"`,
			wantOutcome: Failed, wantReason: "artifact is a named pipe (FIFO); write a regular file at $LOOPR_ARTIFACT",
		},
		{
			name: "artifact is a symlink to the environment", typ: loop.Plan, script: `ln -s /proc/self/environ "$LOOPR_ARTIFACT"`,
			wantOutcome: Failed, wantReason: "artifact is a symlink to /proc/self/environ; write a regular file at $LOOPR_ARTIFACT",
		},
		{
			name: "artifact is a symlink to /dev/zero", typ: loop.Spec, script: `ln -s /dev/zero "$LOOPR_ARTIFACT"`,
			wantOutcome: Failed, wantReason: "artifact is a symlink to /dev/zero; write a regular file at $LOOPR_ARTIFACT",
		},
		{
			name: "artifact too large", typ: loop.Phase, script: `head -c 2000000 /dev/zero | tr '\0' x > "$LOOPR_ARTIFACT"`,
			wantOutcome: Failed, wantReason: "artifact is 2000000 bytes; the limit is 1048576",
		},
		{
			name: "iteration directory replaced by a symlink", typ: loop.Plan,
			script:      `d=$(dirname "$LOOPR_ARTIFACT"); mkdir -p "$d.out"; printf '# Plan: x\n## Specs\n### Spec 1: a\n' > "$d.out/plan.md"; rm -rf "$d"; ln -s "$d.out" "$d"`,
			wantOutcome: Failed, wantReason: "artifact: its directory ",
		},
		{
			name: "validate fails", typ: loop.Ralph, script: "true",
			validate:    []string{"true", "echo broken-thing; exit 4", "touch never"},
			wantOutcome: Failed, wantReason: "validate `echo broken-thing; exit 4` exited 4",
			wantFeedback: []string{"End of validation.log:", "broken-thing"},
		},
		{
			name: "rate-limit exit code", typ: loop.Ralph, script: "exit 75",
			validate:    []string{"touch validated"},
			wantOutcome: RateLimited, wantReason: "rate limited: agent exited 75", wantExit: 75,
		},
		{
			name: "workdir vanished", typ: loop.Ralph, script: `cd /; rm -rf "$LOOPR_WORKDIR"`,
			wantOutcome: Failed, wantReason: "workdir vanished",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := newJob(t, tt.typ, agent(t, tt.script))
			j.Settings.Validate = tt.validate
			res := (&Runner{}).Run(context.Background(), j)
			if res.Outcome != tt.wantOutcome || !strings.HasPrefix(res.Reason, tt.wantReason) {
				t.Fatalf("Run() = %v %q, want %v %q", res.Outcome, res.Reason, tt.wantOutcome, tt.wantReason)
			}
			if tt.wantExit != 0 && res.ExitCode != tt.wantExit {
				t.Errorf("ExitCode = %d, want %d", res.ExitCode, tt.wantExit)
			}
			for _, want := range tt.wantFeedback {
				if !strings.Contains(res.Feedback, want) {
					t.Errorf("Feedback = %q, want it to contain %q", res.Feedback, want)
				}
			}
			if len(res.Feedback) > DefaultFeedbackBytes {
				t.Errorf("len(Feedback) = %d, want <= %d", len(res.Feedback), DefaultFeedbackBytes)
			}
			if res.Outcome == Failed && res.Feedback == "" {
				t.Error("failed Result has no Feedback")
			}
			if exists(filepath.Join(j.Workdir, "validated")) || exists(filepath.Join(j.Workdir, "never")) {
				t.Error("a validate command ran that should not have")
			}
			if res.Doc != nil {
				t.Errorf("Doc = %v, want nil", res.Doc)
			}
		})
	}
}

func TestRunRateLimitMessage(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 4, 23, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		script  string
		typ     string
		want    Outcome
		after   time.Duration // RateLimitAfter
		nowAuto bool
	}{
		// A failed run: the pattern counts over its last lines.
		{"failed run with a limit and a wait", `echo "Error: 429 rate limit, retry-after: 2"; exit 1`, loop.Ralph, RateLimited, 2 * time.Second, false},
		// Exit 0: only a usage-limit line among the last three counts.
		{"exit 0, old epoch form last", `echo working; echo "Claude AI usage limit reached|1745424000"; exit 0`, loop.Ralph, RateLimited, 4 * time.Hour, false},
		{"exit 0, prose about rate limits passes", `echo "Implemented the token-bucket rate limiter (answers HTTP 429 when the bucket is empty)."; exit 0`, loop.Ralph, Passed, 0, false},
		{"exit 0, 429 with retry-after passes", `echo "Error: 429 rate limit, retry-after: 2"; exit 0`, loop.Ralph, Passed, 0, false},
		{"exit 0, usage-limit line too far up", `echo "Claude AI usage limit reached|1745424000"; echo a; echo b; echo c; exit 0`, loop.Ralph, Passed, 0, false},
		// Exit 0 without the artifact is a failed run: the pattern counts.
		{"exit 0 without the artifact, limit message", `echo "You've hit your session limit · resets 5pm (UTC)"; echo "/upgrade to increase your usage limit."; echo ok`, loop.Plan, RateLimited, 5 * time.Hour, false},
		// A reset already past is not trusted: no announced wait.
		{"stale reset", `echo "Claude AI usage limit reached|1745395200"; exit 1`, loop.Ralph, RateLimited, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := newJob(t, tt.typ, agent(t, tt.script))
			j.Settings.Validate = []string{"touch validated"}
			res := (&Runner{Now: func() time.Time { return now }}).Run(context.Background(), j)
			if res.Outcome != tt.want {
				t.Fatalf("Run() = %v %q, want %v", res.Outcome, res.Reason, tt.want)
			}
			if res.Outcome != RateLimited {
				return
			}
			if res.RateLimitAfter != tt.after || tt.after > 0 && !res.RateLimitUntil.Equal(now.Add(tt.after)) || tt.after == 0 && !res.RateLimitUntil.IsZero() {
				t.Errorf("RateLimitAfter, Until = %v, %v; want %v, now+that", res.RateLimitAfter, res.RateLimitUntil, tt.after)
			}
			if exists(filepath.Join(j.Workdir, "validated")) {
				t.Error("validation ran for a rate-limited iteration")
			}
		})
	}
}

// processDead reports whether pid is gone or a zombie (exited but not yet
// reaped by its new parent, which in a container may never happen).
func processDead(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

func TestRunTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	// The grandchild ignores SIGTERM, so only the SIGKILL after the grace
	// period ends it; the agent itself waits for it.
	j := newJob(t, loop.Ralph, agent(t, `
sh -c 'trap "" TERM; echo $$ > "$LOOPR_WORKDIR/grandchild.pid"; exec sleep 1000' &
wait`))
	j.Settings.Timeout = 300 * time.Millisecond
	start := time.Now()
	res := (&Runner{}).Run(context.Background(), j)
	took := time.Since(start)

	if res.Outcome != Failed || res.Reason != "agent timed out after 300ms" {
		t.Fatalf("Run() = %v %q, want failed %q", res.Outcome, res.Reason, "agent timed out after 300ms")
	}
	if took > 5*time.Second {
		t.Errorf("Run() took %v, want about timeout + grace", took)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(j.Workdir, "grandchild.pid"))))
	if err != nil {
		t.Fatal(err)
	}
	if !processDead(pid) {
		t.Errorf("grandchild %d is still alive after Run returned", pid)
	}
}

func TestRunLeftoverChildrenAreStopped(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Ralph, agent(t, `sleep 1000 & echo $! > "$LOOPR_WORKDIR/bg.pid"; echo bye`))
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Passed {
		t.Fatalf("Run() = %v %q, want passed", res.Outcome, res.Reason)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(j.Workdir, "bg.pid"))))
	if err != nil {
		t.Fatal(err)
	}
	if !processDead(pid) {
		t.Errorf("background process %d outlived its agent", pid)
	}
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var gotPID int
	r := &Runner{OnAgentStart: func(id string, pid int) {
		if id != "01TESTLOOP" {
			t.Errorf("OnAgentStart id = %q", id)
		}
		gotPID = pid
		cancel()
	}}
	j := newJob(t, loop.Ralph, agent(t, `sleep 1000`))
	res := r.Run(ctx, j)
	if res.Outcome != Cancelled {
		t.Fatalf("Run() = %v %q, want cancelled", res.Outcome, res.Reason)
	}
	if gotPID <= 0 {
		t.Errorf("OnAgentStart pid = %d", gotPID)
	}
	if !processDead(gotPID) {
		t.Errorf("agent %d still alive", gotPID)
	}
}

func TestRunCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	j := newJob(t, loop.Ralph, agent(t, `touch "$LOOPR_WORKDIR/ran"`))
	if res := (&Runner{}).Run(ctx, j); res.Outcome != Cancelled {
		t.Fatalf("Run() = %v %q, want cancelled", res.Outcome, res.Reason)
	}
	if exists(filepath.Join(j.Workdir, "ran")) {
		t.Error("the agent ran under a cancelled context")
	}
}

func TestRunValidateTimeout(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Ralph, agent(t, `true`))
	j.Settings.Validate = []string{"sleep 1000"}
	j.Settings.ValidateTimeout = 200 * time.Millisecond
	res := (&Runner{}).Run(context.Background(), j)
	if want := "validate `sleep 1000` timed out after 200ms"; res.Outcome != Failed || res.Reason != want {
		t.Fatalf("Run() = %v %q, want failed %q", res.Outcome, res.Reason, want)
	}
}

func TestRunOutputFlood(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Ralph, agent(t, `echo START; head -c 20971520 /dev/zero | tr '\0' x; echo; echo END`))
	j.Settings.MaxLogBytes = 64 << 10
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Passed {
		t.Fatalf("Run() = %v %q, want passed", res.Outcome, res.Reason)
	}
	log := readFile(t, filepath.Join(res.Dir, "agent.log"))
	if len(log) > 64<<10+200 {
		t.Errorf("agent.log is %d bytes, want <= %d", len(log), 64<<10+200)
	}
	if !strings.HasPrefix(log, "START\n") || !strings.HasSuffix(log, "\nEND\n") || !strings.Contains(log, "bytes of output cut here") {
		t.Errorf("agent.log does not keep head, tail and a cut notice: %q ... %q", log[:40], log[len(log)-40:])
	}
}

func TestRunMissingBinary(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"loopr-test-no-such-agent", "/nonexistent/loopr-agent"} {
		j := newJob(t, loop.Ralph, []string{name, "-p"})
		res := (&Runner{}).Run(context.Background(), j)
		if want := "agent binary not found: " + name; res.Outcome != Failed || res.Reason != want {
			t.Errorf("Run(%s) = %v %q, want failed %q", name, res.Outcome, res.Reason, want)
		}
	}
}

func TestRunBadJob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*Job)
		want   string
	}{
		{"path in id", func(j *Job) { j.Loop.ID = "../x" }, "invalid loop id"},
		{"bad type", func(j *Job) { j.Loop.Type = "Plan/../x" }, "invalid type"},
		{"no agent", func(j *Job) { j.Settings.Agent = nil }, "agent command is empty"},
		{"missing workdir", func(j *Job) { j.Workdir = filepath.Join(j.Workdir, "gone") }, "workdir "},
		{"bad template", func(j *Job) {
			p := filepath.Join(t.TempDir(), "p.md")
			os.WriteFile(p, []byte("{{.Nope}}"), 0o644)
			j.Settings.PromptFile = p
		}, "prompt template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := newJob(t, loop.Ralph, []string{"true"})
			tt.change(&j)
			res := (&Runner{}).Run(context.Background(), j)
			if res.Outcome != Failed || !strings.Contains(res.Reason, tt.want) {
				t.Errorf("Run() = %v %q, want failed with %q", res.Outcome, res.Reason, tt.want)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a logger used from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunPromptAndEnv(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Spec, agent(t, `
env > "$LOOPR_WORKDIR/env.txt"
cat > "$LOOPR_WORKDIR/stdin.txt"
printf '# Spec: S\n## Phases\n### Phase 1: One\n' > "$LOOPR_ARTIFACT"`))
	j.Loop.Iteration = 2
	j.Loop.Feedback = "validate `go test` exited 1: TestFeedbackMarker broke"
	j.ParentArtifactText = "# Plan: Parent\n## Specs\n### Spec 1: S\n"
	j.ParentArtifact = filepath.Join(j.Home, "loops", "P", "iterations", "001", "plan.md")
	j.Settings.Env = []string{"LOOPR_TEST_SECRET=hunter2"}
	logs := &syncBuffer{}
	r := &Runner{Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	res := r.Run(context.Background(), j)
	if res.Outcome != Passed {
		t.Fatalf("Run() = %v %q, want passed; feedback:\n%s", res.Outcome, res.Reason, res.Feedback)
	}

	stdin := readFile(t, filepath.Join(j.Workdir, "stdin.txt"))
	if prompt := readFile(t, filepath.Join(res.Dir, "prompt.md")); stdin != prompt {
		t.Errorf("stdin differs from prompt.md")
	}
	for _, want := range []string{"TestFeedbackMarker broke", "# Plan: Parent", "iteration 2 of at most 5", j.Loop.Task, "`## Phases`"} {
		if !strings.Contains(stdin, want) {
			t.Errorf("prompt on stdin does not contain %q", want)
		}
	}

	env := map[string]string{}
	for _, line := range strings.Split(readFile(t, filepath.Join(j.Workdir, "env.txt")), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	want := map[string]string{
		"LOOPR_LOOP_ID":         "01TESTLOOP",
		"LOOPR_LOOP_TYPE":       "spec",
		"LOOPR_ITERATION":       "2",
		"LOOPR_MAX_ITERATIONS":  "5",
		"LOOPR_WORKDIR":         j.Workdir,
		"LOOPR_ARTIFACT":        filepath.Join(res.Dir, "spec.md"),
		"LOOPR_PARENT_ARTIFACT": j.ParentArtifact,
		"LOOPR_PROMPT_FILE":     filepath.Join(res.Dir, "prompt.md"),
		"LOOPR_HOME":            j.Home,
		"LOOPR_TEST_SECRET":     "hunter2",
	}
	got := map[string]string{}
	for k := range want {
		got[k] = env[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent env mismatch (-want +got):\n%s", diff)
	}
	if env["PATH"] == "" {
		t.Error("agent env lacks PATH from os.Environ()")
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Errorf("the log contains an env value:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "agent started") {
		t.Errorf("the log lacks the agent start:\n%s", logs)
	}
}

func TestRunAgentSlots(t *testing.T) {
	t.Parallel()
	r := &Runner{AgentSlots: make(chan struct{}, 1)}
	script := `date +%s%N > "$LOOPR_WORKDIR/start"; sleep 0.2; date +%s%N > "$LOOPR_WORKDIR/end"`
	jobs := []Job{newJob(t, loop.Ralph, agent(t, script)), newJob(t, loop.Ralph, agent(t, script))}
	var wg sync.WaitGroup
	results := make([]Result, len(jobs))
	for i, j := range jobs {
		wg.Go(func() { results[i] = r.Run(context.Background(), j) })
	}
	wg.Wait()

	type span struct{ start, end int64 }
	var spans []span
	for i, j := range jobs {
		if results[i].Outcome != Passed {
			t.Fatalf("job %d: Run() = %v %q", i, results[i].Outcome, results[i].Reason)
		}
		var s span
		for name, p := range map[string]*int64{"start": &s.start, "end": &s.end} {
			v, err := strconv.ParseInt(strings.TrimSpace(readFile(t, filepath.Join(j.Workdir, name))), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			*p = v
		}
		spans = append(spans, s)
	}
	a, b := spans[0], spans[1]
	if a.start < b.end && b.start < a.end {
		t.Errorf("agents overlapped with one slot: [%d, %d] and [%d, %d]", a.start, a.end, b.start, b.end)
	}
	if len(r.AgentSlots) != 0 {
		t.Errorf("%d slots still held after both runs", len(r.AgentSlots))
	}
}

func TestRunAgainMovesEarlierAttemptAside(t *testing.T) {
	t.Parallel()
	// The first attempt writes a good artifact but is rate limited; the
	// second writes none. The stale artifact must not pass the second.
	j := newJob(t, loop.Plan, agent(t, `
if [ ! -e "$LOOPR_WORKDIR/second" ]; then
  touch "$LOOPR_WORKDIR/second"
  cat > "$LOOPR_ARTIFACT" <<'EOF'
`+goodPlan+`EOF
  echo "usage limit reached"
  exit 1
fi
echo second attempt`))
	r := &Runner{}
	if res := r.Run(context.Background(), j); res.Outcome != RateLimited {
		t.Fatalf("first Run() = %v %q, want rate_limited", res.Outcome, res.Reason)
	}
	res := r.Run(context.Background(), j)
	if res.Outcome != Failed || !strings.HasPrefix(res.Reason, "artifact: not written") {
		t.Fatalf("second Run() = %v %q, want failed: artifact not written", res.Outcome, res.Reason)
	}
	for _, name := range []string{"prompt.md", "agent.log", "plan.md"} {
		if !exists(filepath.Join(res.Dir, "attempt-1", name)) {
			t.Errorf("attempt-1/%s missing", name)
		}
	}
	if got := readFile(t, filepath.Join(res.Dir, "agent.log")); got != "second attempt\n" {
		t.Errorf("agent.log = %q, want the second attempt's output", got)
	}
}

func TestRunCancelDuringValidation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	j := newJob(t, "review", agent(t, `true`)) // a user type: no artifact check
	j.Settings.Validate = []string{"sleep 1000"}
	start := time.Now()
	res := (&Runner{}).Run(ctx, j)
	if res.Outcome != Cancelled {
		t.Fatalf("Run() = %v %q, want cancelled", res.Outcome, res.Reason)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Run() took %v after cancellation", took)
	}
}

// TestRunReportsEveryProcessGroup: OnAgentStart names the agent's process
// group and then each validate command's, in order, so a lease always names
// the live one: a daemon restarted after a crash during a long validation
// must be able to kill it (e2e TestCrashDuringValidation).
func TestRunReportsEveryProcessGroup(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Ralph, agent(t, `echo $$ > agent.pid`))
	j.Settings.Validate = []string{"echo $$ > v1.pid", "echo $$ > v2.pid"}
	var got []int
	r := &Runner{OnAgentStart: func(id string, pid int) {
		if id != j.Loop.ID {
			t.Errorf("OnAgentStart id = %q, want %q", id, j.Loop.ID)
		}
		got = append(got, pid)
	}}
	if res := r.Run(context.Background(), j); res.Outcome != Passed {
		t.Fatalf("Run() = %v %q, want passed", res.Outcome, res.Reason)
	}
	var want []int
	for _, name := range []string{"agent.pid", "v1.pid", "v2.pid"} {
		pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(j.Workdir, name))))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, pid)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OnAgentStart pids mismatch (-want +got):\n%s", diff)
	}
}

// TestRunFilesTheAgentReplaced: an agent that swaps the files loopr reads
// back or writes after it (its logs, the parent's artifact) for a symlink
// to the daemon's environment or a FIFO neither hangs the iteration nor
// gets the environment into the feedback.
func TestRunFilesTheAgentReplaced(t *testing.T) {
	t.Setenv("LOOPR_TEST_SECRET", "env-marker-5f1c")
	tests := []struct {
		name, script string
		validate     []string
		wantOutcome  Outcome
		wantReason   string
	}{
		{
			name:        "agent.log linked to the environment",
			script:      `d=$(dirname "$LOOPR_ARTIFACT"); rm -f "$d/agent.log"; ln -s /proc/self/environ "$d/agent.log"; exit 3`,
			wantOutcome: Failed, wantReason: "agent exited 3",
		},
		{
			name:        "validation.log planted as a FIFO",
			script:      `mkfifo "$(dirname "$LOOPR_ARTIFACT")/validation.log"`,
			validate:    []string{"echo checked"},
			wantOutcome: Passed,
		},
		{
			name:        "validation.log planted as a symlink to the environment",
			script:      `ln -s /proc/self/environ "$(dirname "$LOOPR_ARTIFACT")/validation.log"`,
			validate:    []string{"echo checked; exit 1"},
			wantOutcome: Failed, wantReason: "validate `echo checked; exit 1` exited 1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJob(t, loop.Ralph, agent(t, tt.script))
			j.Settings.Validate = tt.validate
			done := make(chan Result, 1)
			go func() { done <- (&Runner{}).Run(context.Background(), j) }()
			var res Result
			select {
			case res = <-done:
			case <-time.After(testslack.Scale(20 * time.Second)):
				t.Fatal("Run blocked for 20s")
			}
			if res.Outcome != tt.wantOutcome || !strings.HasPrefix(res.Reason, tt.wantReason) {
				t.Fatalf("Run() = %v %q, want %v %q; feedback:\n%s", res.Outcome, res.Reason, tt.wantOutcome, tt.wantReason, res.Feedback)
			}
			if strings.Contains(res.Feedback, "env-marker-5f1c") {
				t.Errorf("the daemon's environment reached the feedback:\n%s", res.Feedback)
			}
			if vlog := filepath.Join(res.Dir, "validation.log"); len(tt.validate) > 0 {
				if fi, err := os.Lstat(vlog); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("validation.log is not a regular file loopr wrote: %v %v", fi, err)
				}
			}
		})
	}
}

// TestRunParentArtifactRefused: a parent artifact that is not a regular
// file under the home fails the child's iteration with a reason, before the
// agent runs, and its content never reaches the prompt.
func TestRunParentArtifactRefused(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Spec, agent(t, "touch ran"))
	parent := filepath.Join(j.Home, "loops", "01PARENT", "accepted", "001-plan.md")
	if err := os.MkdirAll(filepath.Dir(parent), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/environ", parent); err != nil {
		t.Fatal(err)
	}
	j.ParentArtifact = parent
	res := (&Runner{}).Run(context.Background(), j)
	if want := "parent artifact is a symlink to /proc/self/environ"; res.Outcome != Failed || !strings.HasPrefix(res.Reason, want) {
		t.Fatalf("Run() = %v %q, want failed %q", res.Outcome, res.Reason, want)
	}
	if exists(filepath.Join(j.Workdir, "ran")) {
		t.Error("the agent ran with a prompt that could not be built")
	}
}

// TestRunKillNow: an iteration cancelled with ErrKill (its worker was
// fenced: another may run the loop soon) is killed at once, without the
// grace an agent that ignores SIGTERM would otherwise get.
func TestRunKillNow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var gotPID int
	r := &Runner{OnAgentStart: func(_ string, pid int) { gotPID = pid; cancel(ErrKill) }}
	j := newJob(t, loop.Ralph, agent(t, `trap '' TERM; while :; do sleep 0.05; done`))
	j.Settings.Grace = 10 * time.Second
	start := time.Now()
	res := r.Run(ctx, j)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Run took %s after a kill-now cancel; want the agent killed without the 10 s grace", took.Round(time.Millisecond))
	}
	if res.Outcome != Cancelled {
		t.Fatalf("Run() = %v %q, want cancelled", res.Outcome, res.Reason)
	}
	if !processDead(gotPID) {
		t.Errorf("agent %d still alive", gotPID)
	}
}

// TestRunSetupFailure: an iteration whose files cannot be written (here
// the home's loops directory is a file) fails before its agent starts,
// marked Setup, and the agent never runs; an agent that fails is no
// setup failure.
func TestRunSetupFailure(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "ran")
	j := newJob(t, loop.Ralph, agent(t, "touch "+mark))
	if err := os.WriteFile(filepath.Join(j.Home, "loops"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Failed || !res.Setup || !strings.Contains(res.Reason, "iteration directory") {
		t.Errorf("Run() with no room for its files = %v setup %v %q; want failed, setup, naming the iteration directory", res.Outcome, res.Setup, res.Reason)
	}
	if exists(mark) || !res.AgentStart.IsZero() {
		t.Errorf("the agent ran")
	}

	j = newJob(t, loop.Ralph, agent(t, "exit 3"))
	if res := (&Runner{}).Run(context.Background(), j); res.Outcome != Failed || res.Setup {
		t.Errorf("Run() of an agent that exits 3 = %v setup %v; want failed, no setup", res.Outcome, res.Setup)
	}
}
