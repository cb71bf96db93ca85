package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// TestStatusText: `loopr status` with a loop in each state reads at 80
// columns: the loops that need you one line each (title last, clipped),
// what they wait for and the command under it; the counts on two lines
// (in play, finished); each problem with what to do under it.
func TestStatusText(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	id := func(c string) string { return "01JD3K9Q5ZB7X0000000000" + strings.Repeat(c, 3) }
	st := api.Status{
		Daemon: true, PID: 4242, Version: "0.1.0", UptimeSecs: 3725, Home: "/w/.loopr", Store: "bbolt /w/.loopr/loopr.db",
		Counts: map[loop.Status]int{loop.Pending: 12, loop.Paused: 1, loop.Running: 4, loop.AwaitingApproval: 1, loop.NeedsHuman: 6,
			loop.Complete: 120, loop.Failed: 2, loop.Cancelled: 3, loop.Expired: 1, loop.Invalidated: 7},
		Running: 4, MaxLoops: 50,
		Types: []api.TypeUsage{{Type: "plan", Running: 0, Cap: 2}, {Type: "ralph", Running: 4, Cap: 50}},
		NeedsYou: []api.NeedsYou{
			{ID: id("A"), Reason: loop.NeedsNoProgress, Title: "Migrate the storage layer to the new schema", Since: now.Add(-99*24*time.Hour - 23*time.Hour),
				Detail: `3 iterations in a row failed the same way: validate "go test ./..." exited 1 in store/`, Action: `loopr answer ` + id("A") + ` "…"`},
			{ID: id("B"), Reason: loop.NeedsBudget, Title: "日本語のタイトル", Since: now.Add(-14 * time.Minute),
				Detail: "tree budget spent: $2.10 of $2.00 (root " + id("R") + ")", Action: "loopr budget " + id("R") + " --usd N"},
			{ID: id("C"), Reason: loop.NeedsQuestion, Title: "Pick\na port", Since: now.Add(-30 * time.Second),
				Action: `loopr answer ` + id("C") + ` "…"`},
		},
		AwaitingApproval: []api.Approval{{ID: id("P"), Type: "plan", Title: "Add a URL shortener service with an HTTP API, storage and metrics",
			Since: now.Add(-2 * time.Hour), Actions: api.ApprovalActions(id("P"))}},
		ReadyToLand: []api.LandReady{
			{ID: id("L"), Title: "Add a URL shortener service with an HTTP API, storage and metrics", Since: now.Add(-3 * time.Hour),
				Branch: "loopr/add-a-url-shortener-service-with-an-http-00000lll", Into: "main"},
			{ID: id("M"), Title: "Fix the flaky test", Since: now.Add(-5 * time.Minute), Branch: "loopr/fix-the-flaky-test-00000mmm"},
		},
		Profiles:   []api.ProfileLimit{{Agent: "codex", Recovering: true}},
		Spent:      map[string]string{id("R"): "tree budget spent"},
		SpentToday: loop.Usage{CostUSD: 1.5, InputTokens: 1200, OutputTokens: 3400},
		DiskFreeGB: 73.9, Containment: "cgroup",
		Problems: []api.Problem{{TypesText: "ralph", What: `validate "go test ./..." needs a go.mod, and the workspace has none`,
			Fix: "change loops.ralph.validate in loopr.yml"}},
	}
	want := `NEEDS YOU (7)
  00000aaa  no_progress  99d23h ago  Migrate the storage layer to the new schema
    3 iterations in a row failed the same way: validate "go test ./..." exited…
    → loopr answer 00000aaa "…"
  00000ppp  approval     2h ago      Add a URL shortener service with an HTTP A…
    the plan passed: read it with loopr show 00000ppp --artifact, then one of
    → loopr approve 00000ppp
    → loopr iterate 00000ppp --feedback "…"
    → loopr reject 00000ppp
  00000bbb  budget       14m ago     日本語のタイトル
    tree budget spent: $2.10 of $2.00 (root 00000rrr)
    → loopr budget 00000rrr --usd N
  00000ccc  question     30s ago     Pick a port
    → loopr answer 00000ccc "…"
  … and 3 more: loopr list --status needs_human

READY TO LAND (2)
  00000lll  3h ago  Add a URL shortener service with an HTTP API, storage and m…
    loopr/add-a-url-shortener-service-with-an-http-00000lll → main
    → loopr land 00000lll   (--dry-run says what it would do)
  00000mmm  5m ago  Fix the flaky test
    loopr/fix-the-flaky-test-00000mmm (started on a detached HEAD)
    → loopr land 00000mmm --into BRANCH   (--dry-run says what it would do)

daemon       running, pid 4242, version 0.1.0, up 1h2m
home         /w/.loopr
store        bbolt /w/.loopr/loopr.db
loops        pending 12, paused 1, running 4, awaiting_approval 1, needs_human 6
             complete 120, failed 2, cancelled 3, expired 1, invalidated 7
running      total 4/50, plan 0/2, ralph 4/50
rate limit   agent codex: recovering, one start per poll
budget       1 tree(s) spent their budget: ` + "`loopr budget ROOT --usd N`" + ` raises it
spent today  $1.50, 4.6k tokens (in 1.2k, out 3.4k, cache read 0, cache write 0), agent 0s
disk         73.9 GB free
containment  cgroup

problems: loops of these types do not start (reason preflight) until fixed
  ralph  validate "go test ./..." needs a go.mod, and the workspace has none
         → change loops.ralph.validate in loopr.yml
`
	var out bytes.Buffer
	if err := printStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("printStatus() mismatch (-want +got)\n%s", diff)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if n := utf8.RuneCountInString(line); n > 80 && !strings.HasPrefix(line, "spent today") && !strings.HasPrefix(line, "budget") {
			t.Errorf("%d columns: %q", n, line)
		}
	}
}

// TestStatusCountsWrap: with loops merging and awaiting review too, the
// counts in play (eight statuses) wrap under the label instead of running
// past 80 columns, and every status is still said.
func TestStatusCountsWrap(t *testing.T) {
	t.Parallel()
	st := api.Status{Home: "/w/.loopr", Counts: map[loop.Status]int{loop.Pending: 12, loop.Paused: 1, loop.Running: 4,
		loop.AwaitingApproval: 1, loop.AwaitingReview: 23, loop.NeedsHuman: 6, loop.Merging: 3, loop.Complete: 120}}
	var out bytes.Buffer
	if err := printStatus(&out, st, time.Now()); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, line := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(line); n > 80 && !strings.HasPrefix(line, "spent today") {
			t.Errorf("%d columns: %q", n, line)
		}
	}
	for _, s := range loop.Statuses {
		if want := fmt.Sprintf("%s %d", s, st.Counts[s]); !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(text, "\n             merging 3,") && !strings.Contains(text, "\n             awaiting_review 23,") {
		t.Errorf("the counts are not wrapped under the label:\n%s", text)
	}
}

// TestStatusTrust: loopr.yml waiting for `loopr trust` is first under
// NEEDS YOU (counted), with its commands (at most maxTrustLines) and the
// command to run, at 80 columns; a held reload says "changed:".
func TestStatusTrust(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	var cmds []string
	for i := range 12 {
		cmds = append(cmds, fmt.Sprintf("loops.ralph.validate: make check-%d", i))
	}
	for _, held := range []bool{false, true} {
		st := api.Status{Home: "/w/.loopr", Counts: map[loop.Status]int{loop.Pending: 1},
			Trust: &api.Trust{File: "/w/loopr.yml", Held: held, Commands: cmds, Since: now.Add(-time.Minute), Action: "loopr trust"}}
		var out bytes.Buffer
		if err := printStatus(&out, st, now); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		want := []string{"NEEDS YOU (1)\n  loopr.yml  untrusted  1m ago  not trusted here: none of its commands runs\n    it runs:\n",
			"      loops.ralph.validate: make check-6\n      … and 5 more: loopr trust lists them all\n    → loopr trust\n"}
		if held {
			want[0] = "NEEDS YOU (1)\n  loopr.yml  trust  1m ago  reload held: the last trusted configuration runs\n    changed:\n"
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("held %v: status lacks %q:\n%s", held, w, text)
			}
		}
		for _, line := range strings.Split(text, "\n") {
			if n := utf8.RuneCountInString(line); n > 80 {
				t.Errorf("%d columns: %q", n, line)
			}
		}
	}
}

// TestLandedText: show's landed row names the landing, and the command
// whenever the tree is ready to land: never landed, done again after a
// comment re-opened it since, or started on a detached HEAD (--into).
func TestLandedText(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	done := loop.Loop{ID: "01JD3K9Q5ZB7X0000000000PPP", Type: loop.Plan, Status: loop.Complete, SubtreeDoneAt: at, Base: loop.Base{Branch: "main"}}
	landed := loop.Landed{Into: "main", Commit: strings.Repeat("a", 40), Mode: loop.LandFastForward, At: at.Add(time.Hour)}
	for _, tt := range []struct {
		name string
		mod  func(*loop.Loop)
		want string
	}{
		{"ready", func(*loop.Loop) {}, "not yet: loopr land 00000ppp"},
		{"detached", func(l *loop.Loop) { l.Base.Branch = "" }, "not yet: loopr land 00000ppp --into BRANCH"},
		{"landed", func(l *loop.Loop) { l.Landed = landed }, "on main at aaaaaaaaaaaa (fast-forward), 2026-01-25T13:00:00Z"},
		{"done again", func(l *loop.Loop) { l.Landed, l.SubtreeDoneAt = landed, at.Add(2*time.Hour) },
			"on main at aaaaaaaaaaaa (fast-forward), 2026-01-25T13:00:00Z; its tree did more since: loopr land 00000ppp"},
		{"not done", func(l *loop.Loop) { l.SubtreeDoneAt = time.Time{} }, ""},
	} {
		l := done
		tt.mod(&l)
		if got := landedText(l); got != tt.want {
			t.Errorf("%s: landedText() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestStatusSandbox: one sandbox line with only the default profile, one
// line a profile otherwise.
func TestStatusSandbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		sb   []api.ProfileSandbox
		want []string
	}{
		{"default only", []api.ProfileSandbox{{Profile: "default", Runner: "none", Text: "none"}}, []string{"sandbox      none"}},
		{"two profiles", []api.ProfileSandbox{
			{Profile: "default", Runner: "bwrap", Network: "allow", Text: "bwrap, network allow (api.anthropic.com:443)"},
			{Profile: "local", Runner: "bwrap", Network: "none", Text: "bwrap, network none"},
		}, []string{"sandbox      agent default: bwrap, network allow (api.anthropic.com:443)", "             agent local: bwrap, network none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printStatus(&b, api.Status{Sandbox: tc.sb}, time.Now()); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w+"\n") {
					t.Errorf("status lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
