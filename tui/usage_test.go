package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
)

// TestProfileLimitHeaderAndReasons: with a state per agent profile, the
// header names each limited profile and its countdown, and only the loops
// on that profile wait, with a reason naming it.
func TestProfileLimitHeaderAndReasons(t *testing.T) {
	t.Parallel()
	st := fixtureStatus()
	p := scheduler.DefaultPolicy()
	p.Agents = scheduler.Agents{Default: "default", ByType: map[string]string{loop.Spec: "codex"},
		Fallback: map[string][]string{"default": nil, "codex": nil}}
	st.Policy = &p
	st.Limits = map[string]ratelimit.State{"default": {Hits: 1, BackoffUntil: testNow.Add(90 * time.Second), RecoveryUntil: testNow.Add(2 * time.Minute)}}
	st.Profiles = []api.ProfileLimit{{Agent: "default", Hits: 1, Limited: true, ResumeAt: testNow.Add(90 * time.Second)}}
	st.SpentToday = loop.Usage{CostUSD: 3.5}
	fc := newFake()
	fc.snap.Status = &st
	m := loaded(t, fc, 200, 30)
	head := strings.SplitN(m.View(), "\n", 2)[0]
	for _, want := range []string{"429 default 1m30s", "$3.50 today"} {
		if !strings.Contains(head, want) {
			t.Errorf("header = %q, want %q", head, want)
		}
	}
	if strings.Contains(head, "429 backoff") {
		t.Errorf("header = %q: the shared backoff shown besides the profiles", head)
	}
	if got := m.reasonText(m.reasonOf(idUsers)); got != "default rate limited 1m30s" {
		t.Errorf("ralph on the limited profile: reason %q", got)
	}
	if got := m.reasonText(m.reasonOf(idCookies)); got != "next to start" {
		t.Errorf("spec on codex: reason %q, want next to start", got)
	}
}

// TestCostColumnRollsUp: the COST column shows once a loop spent money,
// each parent with its descendants' spend, and follows events.
func TestCostColumnRollsUp(t *testing.T) {
	t.Parallel()
	fc := newFake()
	m := loaded(t, fc, 160, 30)
	if strings.Contains(m.View(), "COST") {
		t.Fatal("COST column shown before anything was spent")
	}
	for _, id := range []string{idUsers, idIndex} {
		l := *m.loops[id]
		l.Usage.CostUSD = 1.25
		l.UpdatedAt = testNow
		m = update(t, m, streamMsg{gen: m.gen, msgs: []api.StreamMsg{{Type: api.StreamEvent, Loop: &l}}, now: testNow})
	}
	v := m.View()
	if !strings.Contains(v, "COST") {
		t.Fatalf("no COST column after spend:\n%s", v)
	}
	for title, want := range map[string]string{"Add OAuth login": "$2.50", "Migrations": "$2.50", "Add index": "$1.25", "Billing with Stripe": ""} {
		line := lineOf(v, title)
		if want != "" && !strings.Contains(line, want) || want == "" && strings.Contains(line, "$") {
			t.Errorf("%s: line %q, want cost %q", title, line, want)
		}
	}
	// A later record of the same loop replaces its spend, it does not add it again.
	l := *m.loops[idIndex]
	l.Usage.CostUSD = 2
	l.UpdatedAt = testNow.Add(time.Second)
	m = update(t, m, streamMsg{gen: m.gen, msgs: []api.StreamMsg{{Type: api.StreamEvent, Loop: &l}}, now: testNow})
	if line := lineOf(m.View(), "Add OAuth login"); !strings.Contains(line, "$3.25") {
		t.Errorf("plan line %q, want $3.25", line)
	}
}

// TestBudgetReason: a loop of a tree whose budget is spent waits with the
// budget reason.
func TestBudgetReason(t *testing.T) {
	t.Parallel()
	st := fixtureStatus()
	st.Spent = map[string]string{idPlan: "tree budget spent: $5.00 of $5.00 (root p1)"}
	fc := newFake()
	fc.snap.Status = &st
	m := loaded(t, fc, 160, 30)
	if got := m.reasonText(m.reasonOf(idUsers)); got != "tree budget spent: $5.00 of $5.00 (root p1)" {
		t.Errorf("reason %q", got)
	}
	if got := m.reasonText(m.reasonOf(idPausedRal)); got != "paused" {
		t.Errorf("another tree: reason %q, want paused", got)
	}
}

func TestUsageAndBudgetLines(t *testing.T) {
	t.Parallel()
	tests := []struct{ got, want string }{
		{usageLine(loop.Usage{}, 0), ""},
		{usageLine(loop.Usage{CostUSD: 0.42, InputTokens: 12_000, OutputTokens: 300, AgentSeconds: 61}, 0.42), "$0.42, 12.3k tokens, agent 1m1s"},
		{usageLine(loop.Usage{}, 1.9), "$0.00, 0 tokens, agent 0s; with the loops below it $1.90"},
		{budgetLine(loop.Budget{}), ""},
		{budgetLine(loop.Budget{USD: 5, Tokens: 1_200_000}), "$5.00, 1.2M tokens"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("case %d: %q, want %q", i, tt.got, tt.want)
		}
	}
}
