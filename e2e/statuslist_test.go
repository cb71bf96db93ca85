package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/loop"
)

// TestStatusAndListEveryState: a store with a loop in every status (and
// one in needs_human for every reason), read by the real binary without a
// daemon. `loopr status` lists the five that need you first, each in lines
// of at most 80 columns with the command that resumes it (loopr budget for
// the spent budget), by their short ids, and with them the plan awaiting
// approval; then the counts on two lines; `loopr list --all` keeps every
// column aligned, whatever the status or title.
func TestStatusAndListEveryState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "loopr.yml"), []byte("storage: {disk_quota_min_gb: 0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const at = `"created_at":"2026-01-25T09:00:00Z","updated_at":"2026-01-25T09:00:00Z"`
	root := "01JD3K9Q5ZB7X00000000000PL"
	var recs []string
	add := func(id, typ string, st loop.Status, title, extra string) {
		parent := ""
		if id != root {
			parent = `"parent":"` + root + `","depth":1,`
		}
		recs = append(recs, fmt.Sprintf(`{"id":%q,"type":%q,"status":%q,%s"iteration":2,"max_iterations":100,%s,"title":%q%s}`,
			id, typ, st, parent, at, title, extra))
	}
	add(root, "plan", loop.AwaitingApproval, "Add a URL shortener service with an HTTP API, storage and metrics", `,"usage":{"cost_usd":1.5}`)
	for i, st := range loop.Statuses {
		if st == loop.AwaitingApproval {
			continue
		}
		extra := `,"usage":{"cost_usd":0.25}`
		if st.Terminal() {
			extra += `,"finished_at":"2026-01-25T09:30:00Z"`
		}
		if st == loop.NeedsHuman {
			continue
		}
		add(fmt.Sprintf("01JD3K9Q5ZB7X000000000ST%02d", i), "ralph", st, "Task in "+string(st), extra)
	}
	needs := map[loop.NeedsReason]string{
		loop.NeedsQuestion:   "Which port should the HTTP server listen on? The spec says 8080 but the config uses 9090 already",
		loop.NeedsNoProgress: `3 iterations in a row failed the same way: validate "go test ./..." exited 1`,
		loop.NeedsStalled:    "2 iterations in a row stalled",
		loop.NeedsLimit:      "agent claude limited for 4h12m with no fallback",
		loop.NeedsBudget:     "tree budget spent: $2.10 of $2.00" + loop.TreeBudgetRoot + root + ")",
		loop.NeedsHook:       "hook before_run failed: `make db`: exit status 3 (last line: the db is down)",
	}
	for i, reason := range loop.NeedsReasons {
		add(fmt.Sprintf("01JD3K9Q5ZB7X000000000NH%02d", i), "ralph", loop.NeedsHuman, "日本語のタイトル: "+string(reason)+" with a title far longer than a line has room for",
			fmt.Sprintf(`,"needs":{"reason":%q,"detail":%q,"since":"2026-01-25T09:00:00Z"}`, reason, needs[reason]))
	}
	file := filepath.Join(t.TempDir(), "loops.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(recs, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, dir, "import", file)

	status := ok(t, dir, "status")
	block, _, found := strings.Cut(status, "\n\n")
	if !found || !strings.HasPrefix(block, "NEEDS YOU (8)\n") {
		t.Fatalf("status does not start with the 8 loops that need you (6, a plan to approve and a task to review):\n%s", status)
	}
	review := loop.ShortID(fmt.Sprintf("01JD3K9Q5ZB7X000000000ST%02d", slices.Index(loop.Statuses, loop.AwaitingReview)))
	if !regexp.MustCompile(`(?m)^  ` + review + ` +review +\S+ ago  Task in awaiting_review\n    .*loopr diff ` + review + `.*\n    → loopr approve ` + review + `$`).MatchString(block) {
		t.Errorf("NEEDS YOU lacks the task awaiting review with its diff and approve:\n%s", block)
	}
	if !regexp.MustCompile(`(?m)^  000000pl +approval +\S+ ago  Add a URL shortener`).MatchString(block) {
		t.Errorf("NEEDS YOU lacks the plan awaiting approval:\n%s", block)
	}
	for _, line := range strings.Split(block, "\n") {
		if n := utf8.RuneCountInString(line); n > 80 {
			t.Errorf("NEEDS YOU line of %d columns: %q", n, line)
		}
	}
	for i, reason := range loop.NeedsReasons {
		id := fmt.Sprintf("01JD3K9Q5ZB7X000000000NH%02d", i)
		action := `→ loopr answer ` + id + ` "…"`
		switch reason {
		case loop.NeedsBudget:
			action = "→ loopr budget " + root + " --usd N"
		case loop.NeedsLimit: // an answer is refused while the profile is limited
			action = "→ loopr limits clear claude"
		}
		head := regexp.MustCompile(`(?m)^  ` + loop.ShortID(id) + ` +` + string(reason) + ` +\S+ ago  日本語のタイトル: ` + string(reason) + `.*…\n    \S.*\n    ` + regexp.QuoteMeta(loop.ShortIDs(action)) + `$`)
		if !head.MatchString(block) {
			t.Errorf("NEEDS YOU lacks %s (%s): its line, what it waits for and %q:\n%s", id, reason, action, block)
		}
	}
	// The counts in play, wrapped at 80 columns, then the finished ones.
	counts := regexp.MustCompile(`(?m)^loops +pending 1, paused 1, running 1, merging 1, awaiting_approval 1,\n +awaiting_review 1, needs_human 6\n +complete 1, failed 1, cancelled 1, expired 1, invalidated 1$`)
	if !counts.MatchString(status) {
		t.Errorf("status counts are not on three lines of at most 80 columns (in play, wrapped; finished):\n%s", status)
	}

	list := strings.Split(strings.TrimSuffix(ok(t, dir, "list", "--all"), "\n"), "\n")
	if len(list) != 1+len(recs) {
		t.Fatalf("list has %d lines, want a header and %d loops:\n%s", len(list), len(recs), strings.Join(list, "\n"))
	}
	header := list[0]
	for _, col := range []string{"TYPE", "STATUS", "ITER", "AGE", "COST", "PARENT", "TITLE"} {
		at := utf8.RuneCountInString(header[:strings.Index(header, col)])
		for _, row := range list[1:] {
			r := []rune(row)
			if len(r) <= at || r[at-1] != ' ' || r[at] == ' ' {
				t.Errorf("list: column %s (at %d) is not aligned in %q", col, at, row)
			}
		}
	}
	for _, st := range loop.Statuses {
		if !regexp.MustCompile(`(?m)^\S+ +\S+ +` + string(st) + ` `).MatchString(strings.Join(list, "\n")) {
			t.Errorf("list has no %s loop:\n%s", st, strings.Join(list, "\n"))
		}
	}
}
