package e2e

// Issue 13, the preflight and git part: what would fail every iteration is
// found before any runs (config check, daemon, status, why, debug
// scheduler); loopr init writes the workspace's test command; without git,
// leaf loops run one at a time; branch and commit names carry titles;
// finished trees lose their worktrees; gc deletes dead loops' branches.

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// schedRows runs `loopr debug scheduler --json` and returns its rows by id.
func schedRows(t *testing.T, r repo) map[string]api.SchedRow {
	t.Helper()
	var rows []api.SchedRow
	mustJSON(t, ok(t, r.dir, "debug", "scheduler", "--json"), &rows)
	out := map[string]api.SchedRow{}
	for _, row := range rows {
		out[row.ID] = row
	}
	return out
}

// plainDir is a workspace that is not a git repository.
func plainDir(t *testing.T, cfg string) repo {
	t.Helper()
	r := repo{dir: t.TempDir(), logs: t.TempDir()}
	r.home = filepath.Join(r.dir, ".loopr")
	if err := os.WriteFile(filepath.Join(r.dir, "loopr.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// withAgent replaces agent.command in a treeConfig.
func withAgent(t *testing.T, cfg string, argv ...string) string {
	t.Helper()
	cmd, _ := json.Marshal(argv)
	out := regexp.MustCompile(`(?m)^  command: .*$`).ReplaceAllLiteralString(cfg, "  command: "+string(cmd))
	if out == cfg {
		t.Fatal("withAgent: no agent.command line")
	}
	return out
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPreflightPythonRepo: in a Python repository whose loopr.yml validates
// ralph loops with `go test ./...`, config check names the problem and
// what would suit (exit 1); the daemon runs the plan, spec and phase loops
// of a tree but starts none of its ralph loops (reason preflight in debug
// scheduler, why and status) and spends no iteration on them; fixing
// loopr.yml (a hot reload) lets them run and the tree completes. `loopr
// init` in a Python project writes pytest as the validate command.
func TestPreflightPythonRepo(t *testing.T) {
	t.Parallel()
	// Phases run side by side: with the default sequential phases, the
	// second phase would wait for the held tasks of the first.
	parallel := func(cfg string) string {
		return strings.Replace(cfg, "  spec: {max_iterations: 3}", "  spec: {max_iterations: 3, children: parallel}", 1)
	}
	r := newRepo(t, parallel(treeConfig(t, 3, "go test ./...")))
	writeFile(t, filepath.Join(r.dir, "pyproject.toml"), "[project]\nname = \"demo\"\n")

	res := run(t, r.dir, "", "config", "check")
	line := regexp.MustCompile(`(?m)^ralph +validate "go test \./\.\.\." needs a go\.mod, and the workspace has none +change loops\.ralph\.validate in loopr\.yml \(this workspace has pyproject\.toml: "pytest" would suit it\)$`)
	if res.code != 1 || !line.MatchString(res.stdout) || !strings.Contains(res.stderr, "1 problem would fail every iteration") {
		t.Fatalf("config check: exit %d, want 1 and the go.mod line\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}

	d := startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Plan, "--title", "Python tree", "--task", "build it", "--json"), &plan)
	waitEvery(t, 60*time.Second, slowPoll, "plan, specs and phases to complete and 8 ralph loops to wait", func() bool {
		st := status(t, r)
		return st.Counts[loop.Complete] == 7 && st.Counts[loop.Pending] == 8
	})
	rows := schedRows(t, r)
	var ralphs []string
	for _, l := range list(t, r) {
		if l.Type != loop.Ralph {
			continue
		}
		ralphs = append(ralphs, l.ID)
		if l.Iteration != 1 || l.Status != loop.Pending || !l.StartedAt.IsZero() {
			t.Errorf("ralph %s: %s at iteration %d, started %v; want pending, never started: no iteration spent", l.ID, l.Status, l.Iteration, l.StartedAt)
		}
		row := rows[l.ID]
		if row.Runnable || !slices.Equal(row.Reasons, []string{"preflight"}) ||
			row.ReasonText[0] != `validate "go test ./..." needs a go.mod, and the workspace has none` {
			t.Errorf("ralph %s in debug scheduler: runnable %v, reasons %v %q; want only preflight", l.ID, row.Runnable, row.Reasons, row.ReasonText)
		}
	}
	if len(ralphs) != 8 {
		t.Fatalf("%d ralph loops, want 8", len(ralphs))
	}
	why := ok(t, r.dir, "why", ralphs[0])
	if !strings.Contains(why, `✗ validate "go test ./..." needs a go.mod, and the workspace has none`) &&
		!strings.Contains(why, `validate "go test ./..." needs a go.mod`) {
		t.Errorf("loopr why does not say why:\n%s", why)
	}
	st := ok(t, r.dir, "status")
	if !strings.Contains(st, "problems: loops of these types do not start (reason preflight) until fixed") ||
		!regexp.MustCompile(`(?m)^  ralph +validate "go test \./\.\.\." needs a go\.mod`).MatchString(st) {
		t.Errorf("loopr status has no problems section:\n%s", st)
	}
	if strings.Contains(d.output(), "agent started\" loop="+ralphs[0]) {
		t.Errorf("an agent ran for a held ralph loop")
	}

	// Fixed in loopr.yml: the reload checks again and the ralph loops run.
	writeFile(t, filepath.Join(r.dir, "loopr.yml"), parallel(treeConfig(t, 3, validateCmd(t))))
	waitEvery(t, 60*time.Second, slowPoll, "the tree to complete after the fix", func() bool {
		st := status(t, r)
		if st.Counts[loop.Failed] > 0 {
			t.Fatalf("loops failed: %v", st.Counts)
		}
		return st.Counts[loop.Complete] == 15
	})
	var after api.Status
	mustJSON(t, ok(t, r.dir, "status", "--json"), &after)
	if len(after.Problems) != 0 {
		t.Errorf("status after the fix still lists problems: %+v", after.Problems)
	}

	// loopr init in a Python project writes pytest.
	py := t.TempDir()
	writeFile(t, filepath.Join(py, "setup.cfg"), "[metadata]\nname = demo\n")
	out := ok(t, py, "init")
	if !strings.Contains(out, `detected setup.cfg: ralph loops are validated by "pytest" (loops.ralph.validate)`) {
		t.Errorf("loopr init did not say what it detected:\n%s", out)
	}
	got, err := os.ReadFile(filepath.Join(py, "loopr.yml"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(config.ShortTemplate()), `    validate: ["go test ./..."]     #`, `    validate: ["pytest"]            #`, 1)
	if want == string(config.ShortTemplate()) || string(got) != want {
		t.Errorf("loopr init in a Python project: the file is not the template with validate [\"pytest\"] for ralph")
	}
	c, err := config.Load(filepath.Join(py, "loopr.yml"))
	if err != nil || !slices.Equal(c.Loop(loop.Ralph).Validate, []string{"pytest"}) {
		t.Errorf("loopr.yml written by init: %v, ralph validate %v", err, c.Loop(loop.Ralph).Validate)
	}
}

// TestPreflightMissingAgent: an agent binary that is not on PATH is one
// problem for every type; the daemon starts no loop and spends nothing.
func TestPreflightMissingAgent(t *testing.T) {
	t.Parallel()
	cfg := withAgent(t, treeConfig(t, 3, "true"), "loopr-e2e-no-such-agent", "--flag")
	r := newRepo(t, cfg)
	res := run(t, r.dir, "", "config", "check")
	if res.code != 1 || !regexp.MustCompile(`(?m)^all types +agent "loopr-e2e-no-such-agent" is not on PATH +install it or put it on PATH, or set agent\.command in loopr\.yml$`).MatchString(res.stdout) {
		t.Fatalf("config check: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	startDaemon(t, r)
	var p loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Plan, "--title", "Nothing runs", "--task", "x", "--json"), &p)
	var st api.Status
	mustJSON(t, ok(t, r.dir, "status", "--json"), &st)
	if len(st.Problems) != 1 || st.Problems[0].TypesText != "all types" || st.Problems[0].Key != "agent.command" ||
		!slices.Equal(st.Problems[0].Types, []string{"plan", "spec", "phase", "ralph"}) {
		t.Errorf("status problems = %+v, want the agent for all types", st.Problems)
	}
	row := schedRows(t, r)[p.ID]
	if !slices.Equal(row.Reasons, []string{"preflight"}) || row.ReasonText[0] != `agent "loopr-e2e-no-such-agent" is not on PATH` {
		t.Errorf("plan row: reasons %v %q, want preflight", row.Reasons, row.ReasonText)
	}
	// Two scheduling ticks later, still nothing spent.
	time.Sleep(2500 * time.Millisecond)
	if l := show(t, r, p.ID); l.Status != loop.Pending || l.Iteration != 1 || !l.StartedAt.IsZero() {
		t.Errorf("plan %s at iteration %d, started %v; want pending, never started", l.Status, l.Iteration, l.StartedAt)
	}
	why := ok(t, r.dir, "why", p.ID)
	if !strings.Contains(why, `agent "loopr-e2e-no-such-agent" is not on PATH`) {
		t.Errorf("loopr why:\n%s", why)
	}
}

// span is one agent run in agent.sh's crash log.
type span struct {
	id         string
	start, end int64
}

func readSpans(t *testing.T, log string) []span {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]int64{}
	var out []span
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		ns, _ := strconv.ParseInt(f[3], 10, 64)
		key := f[1] + "/" + f[2]
		switch f[0] {
		case "start":
			open[key] = ns
		case "end":
			out = append(out, span{f[1], open[key], ns})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// TestNoGitOneAtATime: in a workspace that is not a git repository, ralph
// loops share its directory, so they run one at a time: their agent runs
// never overlap, waiting ones say no_git, and status says so once.
func TestNoGitOneAtATime(t *testing.T) {
	t.Parallel()
	agentLog := filepath.Join(t.TempDir(), "runs.log")
	cfg := withAgent(t, treeConfig(t, 2, "true"), "sh", abs(t, "testdata/agent.sh"), "crash", agentLog, "0.6")
	r := plainDir(t, cfg)
	res := run(t, r.dir, "", "config", "check")
	if res.code != 0 || !strings.HasSuffix(strings.SplitN(res.stdout, "\n", 2)[0], "/loopr.yml: ok") ||
		!strings.Contains(res.stdout, "note: the workspace is not a git repository: loops of leaf types (ralph) share the workspace directory, so they run one at a time") {
		t.Fatalf("config check: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	startDaemon(t, r)
	var ids []string
	for i := range 3 {
		var l loop.Loop
		mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", fmt.Sprintf("Task %d", i), "--task", "x", "--json"), &l)
		ids = append(ids, l.ID)
	}
	sawNoGit := false
	waitFor(t, 60*time.Second, "the three ralph loops to complete", func() bool {
		for _, row := range schedRows(t, r) {
			if slices.Contains(row.Reasons, "no_git") {
				sawNoGit = true
				if want := "the workspace is not a git repository: loops of leaf types (ralph) share the workspace directory, so they run one at a time"; row.ReasonText[0] != want {
					t.Errorf("no_git text %q, want %q", row.ReasonText[0], want)
				}
			}
		}
		return status(t, r).Counts[loop.Complete] == 3
	})
	if !sawNoGit {
		t.Error("no waiting ralph loop said no_git while another ran")
	}
	spans := readSpans(t, agentLog)
	if len(spans) != 3 {
		t.Fatalf("%d agent runs, want 3: %+v", len(spans), spans)
	}
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			t.Errorf("agent runs overlap: %s ran until %d, %s started at %d", spans[i-1].id, spans[i-1].end, spans[i].id, spans[i].start)
		}
	}
	st := ok(t, r.dir, "status")
	if n := strings.Count(st, "share the workspace directory"); n != 1 || !regexp.MustCompile(`(?m)^no git +the workspace is not a git repository`).MatchString(st) {
		t.Errorf("status says no git %d times, want once on its own line:\n%s", n, st)
	}
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(r.dir, "out", id+".txt")); err != nil {
			t.Errorf("ralph %s did not work in the workspace: %v", id, err)
		}
	}
}

// TestBranchCommitNamesAndTidyTree runs a whole tree in a git repository:
// the plan's branch is loopr/<slug>-<short-id> and carries a commit per
// ralph iteration named `loopr: ralph "<title>" iteration <n>`; no branch
// is named by a bare id; the finished tree leaves no worktree behind (plan,
// merge and loop worktrees all gone) and no ralph branch (merged).
func TestBranchCommitNamesAndTidyTree(t *testing.T) {
	t.Parallel()
	r := newRepo(t, treeConfig(t, 3, validateCmd(t)))
	startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Plan, "--title", "Add the JSON API: v2!", "--task", "build it", "--json"), &plan)
	waitEvery(t, 90*time.Second, slowPoll, "the tree to complete", func() bool {
		st := status(t, r)
		if st.Counts[loop.Failed] > 0 {
			t.Fatalf("loops failed: %v", st.Counts)
		}
		return st.Counts[loop.Complete] == 15
	})
	want := "loopr/add-the-json-api-v2-" + strings.ToLower(plan.ID[len(plan.ID)-8:])
	if got := gitflow.BranchName(plan.ID, plan.Title); got != want {
		t.Fatalf("BranchName = %q, want %q", got, want)
	}
	// A task's branch is deleted just after its merge is recorded
	// complete (the tidy-up follows the transaction): poll for it.
	var branches []string
	testslack.Wait(30*time.Second, 100*time.Millisecond, func() bool {
		branches = strings.Fields(r.git(t, "for-each-ref", "--format=%(refname:short)", "refs/heads/loopr/"))
		return slices.Equal(branches, []string{want})
	})
	if !slices.Equal(branches, []string{want}) {
		t.Errorf("branches %v, want only the plan's %s (ralph branches merged and deleted)", branches, want)
	}
	subjects := strings.Split(r.git(t, "log", "--format=%s", "--no-merges", want), "\n")
	var got []string
	for _, s := range subjects {
		if strings.HasPrefix(s, "loopr: ") {
			got = append(got, s)
		}
	}
	sort.Strings(got)
	wantSubjects := []string{
		`loopr: ralph "Fragile task" iteration 1`, `loopr: ralph "Fragile task" iteration 2`,
	}
	for range 3 {
		wantSubjects = append(wantSubjects, `loopr: ralph "First task" iteration 1`)
	}
	for range 4 {
		wantSubjects = append(wantSubjects, `loopr: ralph "Second task" iteration 1`)
	}
	sort.Strings(wantSubjects)
	if !slices.Equal(got, wantSubjects) {
		t.Errorf("commit subjects on %s:\n%s\nwant:\n%s", want, strings.Join(got, "\n"), strings.Join(wantSubjects, "\n"))
	}
	waitFor(t, 10*time.Second, "the finished tree's worktrees to go", func() bool {
		entries, _ := os.ReadDir(filepath.Join(r.home, "worktrees"))
		return len(entries) == 0
	})
	if list := r.git(t, "worktree", "list"); strings.Count(list, "\n") != 0 {
		t.Errorf("git still lists worktrees:\n%s", list)
	}
}

// TestGCBranches: `loopr gc` deletes the branch of a cancelled loop (and
// says so), keeps the branch of a failed loop (its work) and of a complete
// standalone loop (its result); --dry-run only lists.
func TestGCBranches(t *testing.T) {
	t.Parallel()
	cfg := treeConfig(t, 2, validateCmd(t), "bad")
	cfg = strings.Replace(cfg, "backoff_base_secs: 1", "backoff_base_secs: 600", 1)
	cfg = strings.Replace(cfg, "backoff_max_secs: 1", "backoff_max_secs: 600", 1)
	r := newRepo(t, cfg)
	startDaemon(t, r)
	add := func(title string, more ...string) loop.Loop {
		var l loop.Loop
		args := append([]string{"add", "--type", loop.Ralph, "--title", title, "--task", "x", "--json"}, more...)
		mustJSON(t, ok(t, r.dir, args...), &l)
		return l
	}
	failed := add("Fragile task", "--max-iterations", "1")
	cancelled := add("Fragile task")
	healthy := add("Healthy task")
	waitFor(t, 30*time.Second, "one failed, one in backoff, one complete", func() bool {
		return show(t, r, failed.ID).Status == loop.Failed && show(t, r, healthy.ID).Status == loop.Complete &&
			show(t, r, cancelled.ID).Feedback != "" && show(t, r, cancelled.ID).Status == loop.Pending
	})
	ok(t, r.dir, "cancel", cancelled.ID)
	names := map[string]string{}
	for _, l := range []loop.Loop{failed, cancelled, healthy} {
		names[l.ID] = gitflow.BranchName(l.ID, l.Title)
		if r.git(t, "branch", "--list", names[l.ID]) == "" {
			t.Fatalf("branch %s of %s is missing before gc", names[l.ID], l.Title)
		}
	}

	dry := ok(t, r.dir, "gc", "--dry-run")
	if !strings.Contains(dry, "would delete 1 git branch of cancelled and invalidated loops:") || !strings.Contains(dry, names[cancelled.ID]) {
		t.Errorf("gc --dry-run:\n%s", dry)
	}
	if r.git(t, "branch", "--list", names[cancelled.ID]) == "" {
		t.Fatalf("gc --dry-run deleted %s", names[cancelled.ID])
	}
	out := ok(t, r.dir, "gc")
	if !regexp.MustCompile(`(?m)^deleted 1 git branch of cancelled and invalidated loops:\n  ` + regexp.QuoteMeta(names[cancelled.ID]) + ` +cancelled +` + cancelled.ID + ` +Fragile task$`).MatchString(out) {
		t.Errorf("gc output:\n%s", out)
	}
	if r.git(t, "branch", "--list", names[cancelled.ID]) != "" {
		t.Errorf("the cancelled loop's branch %s is still there", names[cancelled.ID])
	}
	for _, l := range []loop.Loop{failed, healthy} {
		if r.git(t, "branch", "--list", names[l.ID]) == "" {
			t.Errorf("gc deleted %s's branch %s", l.Status, names[l.ID])
		}
	}
	if _, err := os.Stat(filepath.Join(r.home, "worktrees", cancelled.ID)); err == nil {
		t.Errorf("the cancelled loop's worktree is still there")
	}
	var again api.GCResult
	mustJSON(t, ok(t, r.dir, "gc", "--json"), &again)
	if len(again.Branches) != 0 {
		t.Errorf("a second gc deleted %+v", again.Branches)
	}
}

// TestLegacyBranchKeepsWorking: a loop made by an older loopr, whose branch
// is loopr/<id>, keeps working on it: its iteration is committed there and
// no loopr/<slug>-<short-id> branch appears.
func TestLegacyBranchKeepsWorking(t *testing.T) {
	t.Parallel()
	r := newRepo(t, treeConfig(t, 2, validateCmd(t), "bad"))
	const id = "01JD3K9QZ8X7W6V5T4S3R2Q1PN"
	now := time.Now().UTC().Format(time.RFC3339)
	rec := fmt.Sprintf(`{"id":%q,"type":"ralph","status":"pending","iteration":1,"max_iterations":2,"created_at":%q,"updated_at":%q,"title":"Old task","task":"x"}`, id, now, now)
	seed := filepath.Join(t.TempDir(), "old.jsonl")
	writeFile(t, seed, rec+"\n")
	ok(t, r.dir, "import", seed)
	r.git(t, "branch", "loopr/"+id)
	startDaemon(t, r)
	waitFor(t, 30*time.Second, "the old loop to complete", func() bool { return show(t, r, id).Status == loop.Complete })
	if got := r.git(t, "log", "-1", "--format=%s", "loopr/"+id); got != `loopr: ralph "Old task" iteration 1` {
		t.Errorf("last commit on loopr/%s = %q, want the iteration's", id, got)
	}
	if b := r.git(t, "branch", "--list", gitflow.BranchName(id, "Old task")); b != "" {
		t.Errorf("a new-style branch appeared for an old loop: %s", b)
	}
}

// TestGCBranchesWithoutDaemon: with no daemon, `loopr gc` opens the
// repository itself: the branches of an invalidated plan and of a
// cancelled loop (an older loopr's loopr/<id> too) go, a failed loop's
// stays, and branches of no loop are never touched.
func TestGCBranchesWithoutDaemon(t *testing.T) {
	t.Parallel()
	r := newRepo(t, treeConfig(t, 2, "true"))
	now := time.Now().UTC().Format(time.RFC3339)
	recs := []struct{ id, typ, status, title, branch string }{
		{"01JD3K9QZ8X7W6V5T4S3R2Q1PA", "plan", "invalidated", "Old plan", ""},
		{"01JD3K9QZ8X7W6V5T4S3R2Q1PB", "ralph", "cancelled", "Dropped task", ""},
		{"01JD3K9QZ8X7W6V5T4S3R2Q1PC", "ralph", "cancelled", "Legacy task", "loopr/01JD3K9QZ8X7W6V5T4S3R2Q1PC"},
		{"01JD3K9QZ8X7W6V5T4S3R2Q1PD", "ralph", "failed", "Broken task", ""},
	}
	var lines []string
	for i, rc := range recs {
		lines = append(lines, fmt.Sprintf(`{"id":%q,"type":%q,"status":%q,"iteration":1,"max_iterations":2,"created_at":%q,"updated_at":%q,"finished_at":%q,"title":%q}`,
			rc.id, rc.typ, rc.status, now, now, now, rc.title))
		if rc.branch == "" {
			recs[i].branch = gitflow.BranchName(rc.id, rc.title)
		}
		r.git(t, "branch", recs[i].branch)
	}
	r.git(t, "branch", "loopr/someone-elses")
	seed := filepath.Join(t.TempDir(), "seed.jsonl")
	writeFile(t, seed, strings.Join(lines, "\n")+"\n")
	ok(t, r.dir, "import", seed)

	var res api.GCResult
	mustJSON(t, ok(t, r.dir, "gc", "--json"), &res)
	var gone []string
	for _, b := range res.Branches {
		gone = append(gone, b.Branch)
	}
	sort.Strings(gone)
	want := []string{recs[2].branch, recs[1].branch, recs[0].branch}
	sort.Strings(want)
	if !slices.Equal(gone, want) {
		t.Errorf("gc deleted %v, want %v", gone, want)
	}
	left := strings.Fields(r.git(t, "for-each-ref", "--format=%(refname:short)", "refs/heads/loopr/"))
	wantLeft := []string{recs[3].branch, "loopr/someone-elses"}
	sort.Strings(left)
	sort.Strings(wantLeft)
	if !slices.Equal(left, wantLeft) {
		t.Errorf("branches left %v, want %v", left, wantLeft)
	}
}
