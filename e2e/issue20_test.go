package e2e

// Issue 20, "the first hour, again", items 9, 10, 11, 13 and 14: the
// branch a loop works on is on its record; short ids (the end of the id,
// as branch names carry it) work and show everywhere; plans awaiting
// approval are visible from the CLI; loopr init writes a short file and
// guesses a src-layout Python project's validate; the CLI's habits (an
// unquoted request, daemon --detach twice, version, list, the demo,
// scheduled loops).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
)

// TestBranchAndBaseRecorded (item 9): every loop that has a branch carries
// it on its record, with the branch and commit it started from — a
// standalone ralph its own branch from the checked-out main, a plan its
// integration branch, a task of the plan its own branch from the plan's.
// show prints them, says when the worktree is gone and when a task's
// branch was merged and deleted, and the completion of a standalone ralph
// names the branch that holds its work.
func TestBranchAndBaseRecorded(t *testing.T) {
	t.Parallel()
	// agent.sh's crash mode: the tree without failures (0 s of work).
	r := newRepo(t, treeConfig(t, 3, "true", "crash", filepath.Join(t.TempDir(), "runs.log"), "0"))
	head := r.git(t, "rev-parse", "HEAD")
	startDaemon(t, r)
	var task, plan loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "Tidy the logs", "--task", "Tidy them", "--json"), &task)
	mustJSON(t, ok(t, r.dir, "plan", "Build the branch widget", "--json"), &plan)
	waitEvery(t, 90*time.Second, slowPoll, "the task and the plan's tree to complete", func() bool {
		st := status(t, r)
		if st.Counts[loop.Failed] > 0 {
			t.Fatalf("loops failed:\n%s", describe(list(t, r)))
		}
		return settled(st) && st.Counts[loop.Complete] == 16
	})

	// The standalone task: its own branch, from main at HEAD, kept.
	got := show(t, r, task.ID)
	branch := gitflow.BranchName(task.ID, task.Title)
	if got.Branch != branch || got.Base != (loop.Base{Branch: "main", Commit: head}) {
		t.Errorf("standalone ralph: branch %q base %+v; want %q from main at %s", got.Branch, got.Base, branch, head)
	}
	if files := r.git(t, "ls-tree", "-r", "--name-only", branch, "out/"); files != "out/"+task.ID+".txt" {
		t.Errorf("branch %s holds %q, want the task's file", branch, files)
	}
	text := ok(t, r.dir, "show", task.ID)
	for _, want := range []string{
		`(?m)^branch +` + regexp.QuoteMeta(branch) + `$`,
		`(?m)^base +main@` + head[:12] + `$`,
		`(?m)^workdir +` + regexp.QuoteMeta(filepath.Join(r.home, "worktrees", task.ID)) + ` \(removed\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("show %s lacks %s:\n%s", task.ID, want, text)
		}
	}
	if ev := ok(t, r.dir, "events", task.ID); !strings.Contains(ev, "its work is on branch "+branch+" (git merge "+branch+")") {
		t.Errorf("the task's completion does not name its branch:\n%s", ev)
	}

	// The plan: its integration branch, from main at HEAD.
	p := show(t, r, plan.ID)
	if pb := gitflow.BranchName(plan.ID, plan.Title); p.Branch != pb || p.Base != (loop.Base{Branch: "main", Commit: head}) {
		t.Errorf("plan: branch %q base %+v; want %q from main at %s", p.Branch, p.Base, pb, head)
	}
	// A task of the plan: its own branch from the plan's, merged, deleted.
	for _, l := range list(t, r) {
		switch {
		case l.Type == loop.Ralph && l.Parent != "":
			want := gitflow.BranchName(l.ID, l.Title)
			if l.Branch != want || l.Base.Branch != p.Branch || len(l.Base.Commit) != 40 {
				t.Errorf("task %s: branch %q base %+v; want %q from %s", l.ID, l.Branch, l.Base, want, p.Branch)
			}
			if text := ok(t, r.dir, "show", l.ID); !strings.Contains(text, want+" (merged into its plan's branch, then deleted)") {
				t.Errorf("show %s does not say its branch was merged and deleted:\n%s", l.ID, text)
			}
		case l.Type == loop.Spec || l.Type == loop.Phase:
			if l.Branch != "" || l.Base != (loop.Base{}) {
				t.Errorf("%s %s works on no branch of its own, yet records %q %+v", l.Type, l.ID, l.Branch, l.Base)
			}
		}
	}
}

// TestShortIDs (item 10): the short id — the last 8 characters of the id,
// lowercased, which branch names carry — names a loop wherever an id does,
// through the store and through the daemon; list, messages and NEEDS YOU
// show it; list -q prints the full ids only; a short id that two loops
// share is refused with both.
func TestShortIDs(t *testing.T) {
	t.Parallel()
	viaStoreAndDaemon(t, func(t *testing.T, viaDaemon bool) {
		r := newRepo(t, cliConfig(t))
		if viaDaemon {
			startDaemon(t, r)
		}
		var a, b loop.Loop
		mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "First task", "--at", "2099-01-01T00:00:00Z", "--json"), &a)
		out := ok(t, r.dir, "add", "--type", "ralph", "--title", "Second task", "--at", "2099-01-01T00:00:00Z")
		short := regexp.MustCompile(`^created ralph ([0-9a-z]{8}) "Second task"\n$`).FindStringSubmatch(out)
		if short == nil {
			t.Fatalf("add said %q; want the short id", out)
		}
		b = show(t, r, short[1]) // the short id names the loop
		if b.Title != "Second task" || loop.ShortID(b.ID) != short[1] || !strings.HasSuffix(gitflow.BranchName(b.ID, b.Title), "-"+short[1]) {
			t.Fatalf("show %s = %s %q; want the second task, whose branch name ends with its short id", short[1], b.ID, b.Title)
		}
		if l := show(t, r, strings.ToUpper(loop.ShortID(a.ID))); l.ID != a.ID {
			t.Errorf("show by upper-case short id = %s, want %s", l.ID, a.ID)
		}
		if out := ok(t, r.dir, "pause", loop.ShortID(a.ID)); out != `pause ralph `+loop.ShortID(a.ID)+` "First task": now paused`+"\n" {
			t.Errorf("pause by short id said %q", out)
		}

		lines := strings.Split(strings.TrimSpace(ok(t, r.dir, "list")), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[1], loop.ShortID(a.ID)+"  ") || !strings.HasPrefix(lines[2], loop.ShortID(b.ID)+"  ") ||
			strings.Contains(strings.Join(lines, "\n"), a.ID) {
			t.Errorf("list does not show the short ids (and only them):\n%s", strings.Join(lines, "\n"))
		}
		if q := ok(t, r.dir, "list", "-q"); q != a.ID+"\n"+b.ID+"\n" {
			t.Errorf("list -q = %q, want the two full ids", q)
		}
		if q := ok(t, r.dir, "list", "-q", "--status", "paused"); q != a.ID+"\n" {
			t.Errorf("list -q --status paused = %q, want the paused one", q)
		}
	})

	// Two ids that end alike: the short id is ambiguous, both are named.
	dir := t.TempDir()
	importIDs(t, dir, "AAAA00001111 ralph One", "BBBB00001111 ralph Two")
	res := run(t, dir, "", "show", "1111")
	if res.code != 2 || !strings.Contains(res.stderr, `short id "1111" is ambiguous: 2 loops match`) ||
		!strings.Contains(res.stderr, "AAAA00001111") || !strings.Contains(res.stderr, "BBBB00001111") {
		t.Errorf("show 1111: exit %d %q", res.code, res.stderr)
	}
	var l loop.Loop
	if mustJSON(t, ok(t, dir, "show", "aaaa0000", "--json"), &l); l.ID != "AAAA00001111" {
		t.Errorf("a prefix still works: %s", l.ID)
	}
}

// TestApprovalVisibleFromCLI (item 11): plan says that the plan will wait
// for loopr approve, with the command; once it waits, status lists it
// under NEEDS YOU with approve, iterate and reject, and --json carries
// them.
func TestApprovalVisibleFromCLI(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))
	out := ok(t, r.dir, "plan", "Add OAuth login")
	m := regexp.MustCompile(`^created plan ([0-9a-z]{8}) "Add OAuth login"\nonce written, the plan waits for your approval: loopr approve ([0-9a-z]{8})\n`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("plan said:\n%s", out)
	}
	ref := m[1]
	startDaemon(t, r)
	waitFor(t, 30*time.Second, "the plan to await approval", func() bool {
		return status(t, r).Counts[loop.AwaitingApproval] == 1
	})
	text := ok(t, r.dir, "status")
	want := regexp.MustCompile(`^NEEDS YOU \(1\)\n  ` + ref + `  approval  \S+ ago  Add OAuth login\n` +
		`    the plan passed: read it with loopr show ` + ref + ` --artifact, then one of\n` +
		`    → loopr approve ` + ref + `\n    → loopr iterate ` + ref + ` --feedback "…"\n    → loopr reject ` + ref + `\n\n`)
	if !want.MatchString(text) {
		t.Errorf("status does not list the plan under NEEDS YOU with its commands:\n%s", text)
	}
	st := status(t, r)
	if len(st.AwaitingApproval) != 1 || loop.ShortID(st.AwaitingApproval[0].ID) != ref ||
		strings.Join(st.AwaitingApproval[0].Actions, "|") != strings.Join(api.ApprovalActions(st.AwaitingApproval[0].ID), "|") {
		t.Errorf("status --json awaiting_approval = %+v", st.AwaitingApproval)
	}
	// The command works as printed.
	if out := ok(t, r.dir, "approve", ref); !strings.HasPrefix(out, "approved plan "+ref+` "Add OAuth login": now complete`) {
		t.Errorf("approve %s said %q", ref, out)
	}
}

// TestInitShortFileAndHints (item 13): loopr init writes the short file
// (the agent and ralph's validate near the top, one command: key), --full
// every key; a src-layout Python project that is not installed gets a
// validate that imports from src/; config check suggests the nearest key
// for an unknown one; the docs show loops.<type>.agent as a profile name.
func TestInitShortFileAndHints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := ok(t, dir, "init")
	data, err := os.ReadFile(filepath.Join(dir, "loopr.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(config.ShortTemplate()) || len(data) > 2500 || strings.Count(string(data), "command:") != 1 {
		t.Errorf("loopr init wrote %d bytes, not the short template:\n%s", len(data), data)
	}
	if !strings.Contains(out, `ralph loops keep the default validate "go test ./..."`) {
		t.Errorf("init said %q", out)
	}
	ok(t, dir, "init", "--full", "--force")
	if data, _ := os.ReadFile(filepath.Join(dir, "loopr.yml")); string(data) != string(config.Template()) {
		t.Errorf("init --full did not write every key")
	}

	// A src layout, not installed: plain pytest would not import the package.
	py := t.TempDir()
	writeFile(t, filepath.Join(py, "pyproject.toml"), "[project]\nname = \"shop\"\nversion = \"0.1\"\n")
	writeFile(t, filepath.Join(py, "src", "shop", "__init__.py"), "def price(): return 3\n")
	writeFile(t, filepath.Join(py, "tests", "test_shop.py"), "import shop\n\ndef test_price():\n    assert shop.price() == 3\n")
	out = ok(t, py, "init")
	if !strings.Contains(out, `detected pyproject.toml: ralph loops are validated by "PYTHONPATH=src python3 -m pytest"`) ||
		!strings.Contains(out, "the package is under src/ and not installed") {
		t.Errorf("init in a src-layout project said:\n%s", out)
	}
	c, err := config.Load(filepath.Join(py, "loopr.yml"))
	if err != nil || strings.Join(c.Loop(loop.Ralph).Validate, "|") != "PYTHONPATH=src python3 -m pytest" {
		t.Fatalf("loopr.yml written by init: %v, ralph validate %q", err, c.Loop(loop.Ralph).Validate)
	}
	if exec.Command("python3", "-c", "import pytest").Run() == nil {
		cmd := exec.Command("sh", "-c", c.Loop(loop.Ralph).Validate[0])
		cmd.Dir = py
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("the guessed validate fails on the project: %v\n%s", err, b)
		}
	}

	// An unknown key: the nearest one, or where the key belongs.
	for body, want := range map[string]string{
		"concurrency:\n  max_loop: 5\n": "loopr.yml:2: concurrency.max_loop: unknown key; did you mean max_loops?",
		"validate: [make test]\n":       "loopr.yml:1: validate: unknown key; did you mean loops.ralph.validate or merge.validate or types.<name>.validate?",
	} {
		bad := t.TempDir()
		writeFile(t, filepath.Join(bad, "loopr.yml"), body)
		if res := run(t, bad, "", "config", "check"); res.code != 2 || !strings.Contains(res.stderr, want) {
			t.Errorf("config check of %q: exit %d %q, want %q", body, res.code, res.stderr, want)
		}
	}
	if docs, err := os.ReadFile("../docs/configuration.md"); err != nil || strings.Contains(string(docs), "`agent: []`") {
		t.Errorf("docs/configuration.md still shows agent: [] under loops.<type> (the decoder refuses a list there): %v", err)
	}
}

// TestCLIHabits (item 14): an unquoted request is one request; daemon
// --detach with one running succeeds and says so; version names the commit
// or says why it cannot; list leaves out what finished more than a day
// ago (--all shows it) and fits titles to the terminal; a loop made to
// start later is scheduled, not in backoff.
func TestCLIHabits(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))
	var p loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Add", "a", "timeout", "option", "--json"), &p)
	if p.Task != "Add a timeout option" || p.Title != "Add a timeout option" {
		t.Errorf("unquoted plan: task %q title %q", p.Task, p.Title)
	}
	ok(t, r.dir, "cancel", p.ID)

	stopAtEnd(t, r.dir)
	ok(t, r.dir, "daemon", "--detach")
	pid := daemonPID(t, r.dir)
	res := run(t, r.dir, "", "daemon", "--detach")
	if want := fmt.Sprintf("a loopr daemon already runs here (pid %d); nothing to start\n", pid); res.code != 0 || res.stdout != want || res.stderr != "" {
		t.Errorf("a second daemon --detach: exit %d %q %q; want exit 0 and %q", res.code, res.stdout, res.stderr, want)
	}

	v := ok(t, r.dir, "version")
	m := regexp.MustCompile(`^loopr \S+ \(commit (?:([0-9a-f]{12})(?:, modified)?|unknown: [^;]+; make build records it); go\S+ \S+/\S+\)\n$`).FindStringSubmatch(v)
	if m == nil {
		t.Errorf("version = %q; want the commit, or why it is unknown", v)
	} else if m[1] != "" {
		if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && !strings.HasPrefix(string(head), m[1]) {
			t.Errorf("version names commit %s; the source is at %s", m[1], head)
		}
	}

	var later loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "Later", "--in", "10m", "--json"), &later)
	if why := ok(t, r.dir, "why", later.ID); !regexp.MustCompile(`✗ scheduled for \S+ \(\d+m\d*s?\)`).MatchString(why) || strings.Contains(why, "backoff until") {
		t.Errorf("why of a loop added --in 10m:\n%s", why)
	}
}

// TestListRecentAndWidth (item 14): list leaves out the loops that
// finished more than a day ago, saying so, unless --all or --status names
// them; a failed loop stays (it waits for a reset); in a terminal the
// titles end at its width.
func TestListRecentAndWidth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "loopr.yml"), "storage: {disk_quota_min_gb: 0}\n")
	old := time.Now().Add(-50 * time.Hour).UTC().Format(time.RFC3339)
	recent := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	long := strings.Repeat("a long title that goes on ", 8)
	var recs []string
	for _, l := range []struct{ id, st, at, title string }{
		{"old-done", "complete", old, "Old and done"},
		{"old-failed", "failed", old, "Old and failed"},
		{"new-done", "complete", recent, "New and done"},
		{"waiting", "pending", old, long},
	} {
		recs = append(recs, fmt.Sprintf(`{"id":%q,"type":"ralph","status":%q,"iteration":1,"max_iterations":3,"created_at":%q,"updated_at":%q,"finished_at":%q,"title":%q}`,
			l.id, l.st, l.at, l.at, l.at, l.title))
	}
	file := filepath.Join(t.TempDir(), "loops.jsonl")
	writeFile(t, file, strings.Join(recs, "\n")+"\n")
	ok(t, dir, "import", file)

	out := ok(t, dir, "list")
	if strings.Contains(out, "Old and done") || !strings.Contains(out, "Old and failed") || !strings.Contains(out, "New and done") ||
		!strings.HasSuffix(out, "(1 loop that finished more than a day ago not shown: loopr list --all)\n") {
		t.Errorf("list:\n%s", out)
	}
	for args, n := range map[string]int{"list --all -q": 4, "list --status complete -q": 2, "list -q": 3} {
		if got := strings.Count(ok(t, dir, strings.Fields(args)...), "\n"); got != n {
			t.Errorf("%s: %d ids, want %d", args, got, n)
		}
	}

	tm := newTmux(t)
	tm.run("new-session", "-d", "-s", "tui", "-x", "80", "-y", "20", "-e", "NO_COLOR=1", "-e", "LOOPR_HOME=",
		"sh", "-c", fmt.Sprintf("cd %q && %q list; echo LIST-DONE; sleep 30", dir, bin))
	screen := tm.waitScreen("the list", "LIST-DONE")
	row := ""
	for _, l := range strings.Split(screen, "\n") {
		if n := utf8.RuneCountInString(strings.TrimRight(l, " ")); n > 80 {
			t.Errorf("a line of %d columns in an 80-column terminal: %q", n, l)
		}
		if strings.HasPrefix(l, "waiting") {
			row = strings.TrimRight(l, " ")
		}
	}
	if n := utf8.RuneCountInString(row); n < 70 || !strings.HasSuffix(row, "…") {
		t.Errorf("the long title is not cut at the terminal's width (%d columns): %q", n, row)
	}
}

// TestDemoTidyAndApproval (item 14): the demo leaves no temporary
// workspace behind, and shows the approval step once.
func TestDemoTidyAndApproval(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	res := runEnv(t, t.TempDir(), "", []string{"TMPDIR=" + tmp}, "demo", "--plain", "--speed", "0")
	if res.code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "loopr-demo-*")); len(left) > 0 {
		t.Errorf("the demo left %v behind", left)
	}
	if n := strings.Count(res.stdout, "the plan waited for your approval, as plans do"); n != 1 || !strings.Contains(res.stdout, "the demo approves it for you") ||
		!strings.Contains(res.stdout, "(loopr demo --keep keeps it)") {
		t.Errorf("the demo shows the approval step %d times, want once:\n%s", n, res.stdout)
	}
}
