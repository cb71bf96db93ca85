package e2e

import (
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

const seedNow = "2026-01-25T12:00:00Z"

// TestSeed004EndToEnd: import the seed's loops, then `debug scheduler --now`
// prints the seed's numbers in the seed's order (SPEC §4, seed 004).
func TestSeed004EndToEnd(t *testing.T) {
	t.Parallel()
	// A Go module in git with an agent on PATH: no preflight problem and no
	// no_git, so only the seed's own gates show.
	// The tree term off (weight 0): seed 004's numbers and order.
	dir := newRepo(t, "agent: {command: [\"sh\"]}\nscheduler: {priority: {tree_boost_max: 0, tree_age_boost_max: 0}}\n").dir
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/seed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, dir, "import", abs(t, "testdata/seed004.jsonl")); !strings.Contains(out, "imported 9 loops") {
		t.Fatalf("import: %q", out)
	}
	got := ok(t, dir, "debug", "scheduler", "--now", seedNow)
	want, err := os.ReadFile("testdata/seed004.golden")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("debug scheduler mismatch (-want +got):\n%s", diff)
	}

	var rows []api.SchedRow
	if err := json.Unmarshal([]byte(ok(t, dir, "debug", "scheduler", "--now", seedNow, "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	type brief struct {
		ID                                  string
		Priority, Base, Age, Depth, Penalty int
		Runnable                            bool
		Reasons                             []string
	}
	var gotRows []brief
	for _, r := range rows {
		gotRows = append(gotRows, brief{r.ID, r.Priority, r.Base, r.AgeBoost, r.DepthBoost, r.RetryPenalty, r.Runnable, r.Reasons})
	}
	wantRows := []brief{
		{"1737802800", 135, 100, 5, 30, 0, true, []string{}},
		{"1737802500", 130, 80, 30, 20, 0, true, []string{}},
		{"1737802700", 111, 100, 1, 30, 20, true, []string{}},
		{"phase9", 110, 80, 10, 20, 0, false, []string{"parent_incomplete"}},
		{"1737802000", 90, 40, 50, 0, 0, false, []string{"paused"}},
	}
	if diff := cmp.Diff(wantRows, gotRows); diff != "" {
		t.Errorf("debug scheduler --json mismatch (-want +got):\n%s", diff)
	}

	why := ok(t, dir, "why", "1737802700", "--now", seedNow)
	for _, want := range []string{
		"priority 111 = base 100 + age 1 (1 min × 1, max 50) + depth 30 (3 × 10) − retry 20 ((5−1) × 5, max 30)",
		"✓ parent complete", "✓ type cap ralph 0/50", "✓ global cap 1/50",
	} {
		if !strings.Contains(why, want) {
			t.Errorf("why output lacks %q:\n%s", want, why)
		}
	}
}

// TestLifecycleCommands covers add/list/show/pause/resume/cancel (cascade)
// over the store directly.
func TestLifecycleCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var plan loop.Loop
	mustJSON(t, ok(t, dir, "plan", "Add OAuth login", "--json"), &plan)
	if plan.Type != loop.Plan || plan.Status != loop.Pending || plan.Title != "Add OAuth login" || plan.MaxIterations != 10 {
		t.Fatalf("plan = %+v", plan)
	}
	var spec, ralph loop.Loop
	mustJSON(t, ok(t, dir, "add", "--type", "spec", "--parent", plan.ID, "--title", "Tokens", "--json"), &spec)
	mustJSON(t, ok(t, dir, "add", "--type", "ralph", "--parent", spec.ID, "--task", "Write the code\nin detail", "--json"), &ralph)
	if spec.Depth != 1 || ralph.Depth != 2 || ralph.Title != "Write the code" {
		t.Fatalf("spec %+v ralph %+v", spec, ralph)
	}
	list := ok(t, dir, "list")
	for _, id := range []string{plan.ID, spec.ID, ralph.ID} {
		if !strings.Contains(list, loop.ShortID(id)) {
			t.Errorf("list lacks %s:\n%s", loop.ShortID(id), list)
		}
	}
	ok(t, dir, "pause", ralph.ID)
	if out := ok(t, dir, "list", "--status", "paused"); !strings.Contains(out, loop.ShortID(ralph.ID)) || strings.Contains(out, loop.ShortID(plan.ID)) {
		t.Errorf("list --status paused:\n%s", out)
	}
	ok(t, dir, "resume", ralph.ID)
	out := ok(t, dir, "cancel", spec.ID)
	if !strings.Contains(out, `cancelled spec `+loop.ShortID(spec.ID)+` "Tokens" and 1 loop below it:`) || !strings.Contains(out, loop.ShortID(ralph.ID)) || !strings.Contains(out, "Write the code") {
		t.Errorf("cancel output %q", out)
	}
	var got []loop.Loop
	mustJSON(t, ok(t, dir, "list", "--status", "cancelled", "--json"), &got)
	if len(got) != 2 {
		t.Fatalf("cancelled loops = %d, want spec and its ralph", len(got))
	}
	show := ok(t, dir, "show", ralph.ID)
	if !strings.Contains(show, "cancelled") || !strings.Contains(show, "ancestor "+spec.ID) {
		t.Errorf("show:\n%s", show)
	}
}

// TestBadInput: each mistake is one clear line on stderr, exit code 2, and
// the store is unchanged.
func TestBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok(t, dir, "import", abs(t, "testdata/seed004.jsonl"))
	before := ok(t, dir, "export")

	badYAML := map[string]string{
		"unknown key":  "scheduler:\n  poll_interval_secs: 1\n  prioritty: {}\n",
		"wrong type":   "concurrency:\n  max_loops: lots\n",
		"negative cap": "concurrency:\n  per_type:\n    ralph: -1\n",
	}
	wantYAML := map[string]string{
		"unknown key":  "loopr.yml:3: scheduler.prioritty: unknown key",
		"wrong type":   "loopr.yml:2: concurrency.max_loops:",
		"negative cap": "loopr.yml:3: concurrency.per_type.ralph:",
	}
	for name, body := range badYAML {
		t.Run("config "+name, func(t *testing.T) {
			cfgDir := t.TempDir()
			if err := os.WriteFile(filepath.Join(cfgDir, "loopr.yml"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"config", "check"}, {"list"}} {
				r := run(t, cfgDir, "", args...)
				assertUsage(t, r, wantYAML[name])
			}
		})
	}

	malformed := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(malformed, []byte(`{"id":"n1","type":"ralph","status":"pending","iteration":1,"max_iterations":3,"created_at":"2026-01-25T12:00:00Z","updated_at":"2026-01-25T12:00:00Z","title":"x"}`+"\n{not json\n"), 0o644)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown type", []string{"add", "--type", "bogus", "--task", "x"}, `--type: unknown type "bogus"`},
		{"unknown id", []string{"show", "nope"}, "nope: not found"},
		{"cancel unknown id", []string{"cancel", "nope"}, "nope: not found"},
		{"malformed import", []string{"import", malformed}, "line 2"},
		{"bad --now", []string{"debug", "scheduler", "--now", "yesterday"}, "--now"},
		{"unknown flag", []string{"list", "--colour"}, "unknown flag"},
		{"illegal transition", []string{"resume", "1737802800"}, "1737802800: this ralph is not paused: it is pending"},
		{"unknown status", []string{"list", "--status", "weird"}, `unknown status "weird"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertUsage(t, run(t, dir, "", tc.args...), tc.want)
		})
	}
	if after := ok(t, dir, "export"); after != before {
		t.Errorf("store changed by bad input:\nbefore %s\nafter %s", before, after)
	}
}

func assertUsage(t *testing.T, r result, want string) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("exit code %d, want 2 (stderr %q)", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("stderr = %q, want one line containing %q", r.stderr, want)
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestUnknownCommandAndVersion: a mistyped command exits 2 with one line
// naming the close commands; `loopr version` names the version.
func TestUnknownCommandAndVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct{ arg, want string }{
		{"stauts", `unknown command "stauts"; did you mean stats or status?`},
		{"versoin", "did you mean version?"},
		{"xyzzy", "`loopr --help` lists the commands"},
	} {
		r := run(t, dir, "", tc.arg)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("loopr %s: exit %d, stderr %q; want exit 2 and one line with %q", tc.arg, r.code, r.stderr, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".loopr")); err == nil {
		t.Error("a mistyped command created .loopr/")
	}
	out := ok(t, dir, "version")
	if !strings.HasPrefix(out, "loopr ") || !strings.Contains(out, "go1.") {
		t.Errorf("loopr version = %q, want `loopr VERSION (… goX …)`", out)
	}
}

// TestReadOnlyCommandsNeedAWorkspace: where there is no workspace (no
// loopr.yml, no store, no daemon) the commands that only read say so and
// exit 2, and create nothing; with a loopr.yml they work as before.
func TestReadOnlyCommandsNeedAWorkspace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{{"list"}, {"show", "abcd"}, {"status"}, {"debug", "scheduler"}, {"why", "abcd"}, {"stats"}, {"export"}} {
		r := run(t, dir, "", args...)
		if r.code != 2 || strings.TrimSpace(r.stderr) != "loopr: no loopr workspace here (run `loopr init`)" {
			t.Errorf("loopr %s in an empty directory: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("read-only commands left %d entries in an empty directory", len(entries))
	}
	ok(t, dir, "init")
	if out := ok(t, dir, "list"); !strings.Contains(out, "no loops") {
		t.Errorf("loopr list after init = %q, want no loops", out)
	}
}
