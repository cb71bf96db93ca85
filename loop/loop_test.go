package loop

import (
	"errors"
	"github.com/go-json-experiment/json/v1"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)

func TestTransitionLegalAndIllegal(t *testing.T) {
	t.Parallel()
	legal := map[[2]Status]bool{}
	for from, tos := range transitions {
		for _, to := range tos {
			legal[[2]Status{from, to}] = true
		}
	}
	for _, from := range Statuses {
		for _, to := range Statuses {
			l := Loop{ID: "a", Status: from}
			got, err := Transition(l, to, t0)
			if legal[[2]Status{from, to}] {
				if err != nil {
					t.Errorf("Transition(%s→%s) = %v, want ok", from, to, err)
				} else if got.Status != to || !got.UpdatedAt.Equal(t0) {
					t.Errorf("Transition(%s→%s) = %+v", from, to, got)
				}
				continue
			}
			var te *TransitionError
			if !errors.As(err, &te) || te.From != from || te.To != to {
				t.Errorf("Transition(%s→%s) error = %v, want *TransitionError", from, to, err)
			}
			if got.Status != from {
				t.Errorf("Transition(%s→%s) changed the loop on error", from, to)
			}
		}
	}
}

func TestTransitionSpecEdges(t *testing.T) {
	t.Parallel()
	// The edges SPEC §3 names must all be legal.
	edges := [][2]Status{
		{Pending, Running}, {Running, Complete}, {Running, Pending}, {Running, Failed},
		{Pending, Cancelled}, {Pending, Expired}, {Pending, Invalidated},
		{Running, Cancelled}, {Running, Invalidated}, {Running, AwaitingApproval},
		{AwaitingApproval, Complete}, {AwaitingApproval, Failed}, {AwaitingApproval, Pending},
		{Pending, Paused}, {Paused, Pending}, {Failed, Pending},
		// The merge queue (issue 21): a pass is recorded before it merges.
		{Running, Merging}, {Merging, Complete}, {Merging, Pending}, {Merging, Failed},
		{Merging, Cancelled}, {Merging, Invalidated},
	}
	for _, e := range edges {
		if !CanTransition(e[0], e[1]) {
			t.Errorf("CanTransition(%s, %s) = false, want true", e[0], e[1])
		}
	}
	for _, term := range []Status{Cancelled, Expired, Invalidated} {
		for _, to := range Statuses {
			if CanTransition(term, to) {
				t.Errorf("%s is terminal but may go to %s", term, to)
			}
		}
	}
}

func TestTransitionBookkeeping(t *testing.T) {
	t.Parallel()
	l := Loop{ID: "a", Status: Pending, Lease: nil}
	run, err := Transition(l, Running, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !run.StartedAt.Equal(t0) || !run.FinishedAt.IsZero() {
		t.Errorf("running: started %v finished %v", run.StartedAt, run.FinishedAt)
	}
	run.Lease = &Lease{Owner: "d", ExpiresAt: t0.Add(time.Hour)}
	done, err := Transition(run, Complete, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if done.Lease != nil || !done.FinishedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("complete: lease %v finished %v", done.Lease, done.FinishedAt)
	}
	back, _ := Transition(Loop{ID: "a", Status: Failed, FinishedAt: t0}, Pending, t0.Add(2*time.Minute))
	if !back.FinishedAt.IsZero() {
		t.Errorf("reset kept finished_at %v", back.FinishedAt)
	}
}

func TestJSONRoundTripAndNames(t *testing.T) {
	t.Parallel()
	l := Loop{ID: "01JD3K0000000000000000000A", Type: Ralph, Status: Running, Parent: "P", Depth: 3, TriggeredBy: "/a/plan.md",
		Task: "do", Title: "Do", Iteration: 2, MaxIterations: 9, CreatedAt: t0, UpdatedAt: t0.Add(time.Second),
		StartedAt: t0, RunnableAt: t0, Deadline: t0.Add(time.Hour), Artifact: "x", Workdir: "w", Feedback: "f",
		Lease: &Lease{Owner: "o", ExpiresAt: t0, PID: 7, PIDStart: 9}, FairnessKey: "k", ConflictKey: "c", CostHint: 1.5,
		Owner: "me", Reason: "r"}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back Loop
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, back); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"id", "type", "status", "parent", "triggered_by", "task", "title", "iteration",
		"max_iterations", "created_at", "updated_at", "started_at", "runnable_at", "deadline", "artifact",
		"workdir", "feedback", "lease", "fairness_key", "conflict_key", "cost_hint", "owner", "reason"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks SPEC §2 field %q", k)
		}
	}
	// Zero optional fields are omitted, not written as zero times.
	b, _ = json.Marshal(Loop{ID: "a", CreatedAt: t0, UpdatedAt: t0})
	if s := string(b); slices.ContainsFunc([]string{"0001-01-01", "finished_at", "lease"}, func(x string) bool { return strings.Contains(s, x) }) {
		t.Errorf("zero fields leaked into JSON: %s", s)
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"01JD3K": true, "a-b_c": true, "": false, "-x": false, "../x": false, "a/b": false, "a b": false,
		"ü": false, string(make([]byte, 65)): false,
	} {
		if got := ValidID(s); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestChildType(t *testing.T) {
	t.Parallel()
	for in, want := range map[Type]Type{Plan: Spec, Spec: Phase, Phase: Ralph, Ralph: "", "review": ""} {
		got, ok := ChildType(in)
		if got != want || ok != (want != "") {
			t.Errorf("ChildType(%s) = %q, %v", in, got, ok)
		}
	}
}

func TestNeedsAction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		needs *Needs
		want  string
	}{
		{&Needs{Reason: NeedsQuestion, Detail: "Which port?"}, `loopr answer L1 "…"`},
		{&Needs{Reason: NeedsBudget, Detail: "budget spent: $1.00 of $1.00"}, "loopr budget L1 --usd N"},
		{&Needs{Reason: NeedsBudget, Detail: "tree budget spent: $0.30 of $0.25" + TreeBudgetRoot + "ROOT9)"}, "loopr budget ROOT9 --usd N"},
		{&Needs{Reason: NeedsBudget, Detail: "tree budget spent" + TreeBudgetRoot + "no such id!)"}, "loopr budget L1 --usd N"},
	} {
		l := Loop{ID: "L1", Needs: tc.needs}
		if got := l.NeedsAction(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.needs, got, tc.want)
		}
	}
}

func TestShortIDs(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"loopr budget 01KFQ8MZJ6XXXXXXXXBCZNWR4A --usd N", "loopr budget bcznwr4a --usd N"},
		{`loopr answer 01KFQ8MZJ6XXXXXXXXBCZNWR4A "…"`, `loopr answer bcznwr4a "…"`},
		{"(root 01KFQ8MZJ6XXXXXXXXBCZNWR4A)", "(root bcznwr4a)"},
		{"x01KFQ8MZJ6XXXXXXXXBCZNWR4A", "x01KFQ8MZJ6XXXXXXXXBCZNWR4A"}, // not a word of its own
		{"loopr answer q1", "loopr answer q1"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := ShortIDs(tc.in); got != tc.want {
			t.Errorf("ShortIDs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := ShortID("01KFQ8MZJ6XXXXXXXXBCZNWR4A"); got != "bcznwr4a" {
		t.Errorf("ShortID(a ULID) = %q, want its last 8 characters lowercased", got)
	}
	if got := ShortID("phase9"); got != "phase9" {
		t.Errorf("ShortID(phase9) = %q, want the whole id", got)
	}
}

// TestMergingIsNeitherWaitingNorTerminal: a merging loop is not the
// scheduler's (no agent runs for it again) and not finished either.
func TestMergingIsNeitherWaitingNorTerminal(t *testing.T) {
	t.Parallel()
	if Merging.Waiting() || Merging.Terminal() || !Merging.Valid() {
		t.Errorf("merging: waiting %v terminal %v valid %v; want false, false, true", Merging.Waiting(), Merging.Terminal(), Merging.Valid())
	}
	if CanTransition(Merging, Running) || CanTransition(Merging, Paused) {
		t.Error("a merging loop may not run its agent again or be paused")
	}
}

func TestAddEvidenceBounds(t *testing.T) {
	t.Parallel()
	var l Loop
	long := strings.Repeat("é", MaxEvidenceCommand) // 2 bytes a rune: cut inside one
	for i := range MaxEvidence + 3 {
		l.AddEvidence(Evidence{Command: long, ExitCode: i, Where: WhereWorktree})
	}
	if len(l.Evidence) != MaxEvidence {
		t.Fatalf("len(evidence) = %d, want %d", len(l.Evidence), MaxEvidence)
	}
	if first := l.Evidence[0].ExitCode; first != 3 {
		t.Errorf("first kept entry = %d, want 3 (the oldest dropped)", first)
	}
	if c := l.Evidence[0].Command; len(c) > MaxEvidenceCommand || !utf8.ValidString(c) {
		t.Errorf("command kept %d bytes, valid UTF-8 %v; want at most %d, valid", len(c), utf8.ValidString(c), MaxEvidenceCommand)
	}
	l.ID, l.Type, l.Status, l.Iteration, l.MaxIterations, l.CreatedAt = "a", Ralph, Complete, 1, 1, t0
	if err := l.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	l.Evidence = append(l.Evidence, Evidence{})
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "evidence") {
		t.Errorf("Validate() of %d entries = %v, want an error naming evidence", len(l.Evidence), err)
	}
}
