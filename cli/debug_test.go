package cli

import (
	"bytes"
	"errors"
	"testing"

	"github.com/loopr-dev/loopr/api"
)

// TestSchedulerTable: printScheduler's columns are as wide as their widest
// cell plus two spaces (text/tabwriter), the last one as it is.
func TestSchedulerTable(t *testing.T) {
	t.Parallel()
	v := api.SchedulerView{Rows: []api.SchedRow{
		{ID: "01JD3K9Q5ZB7X0000000000000", Type: "ralph", Priority: 120, AgeSeconds: 3720, Depth: 3, Iteration: 1, Runnable: true},
		{ID: "phase9", Type: "review-long", Priority: -5, AgeSeconds: 59, Depth: 12, Iteration: 117,
			ReasonText: []string{"global cap 50/50", "artifact missing (/a/é/日本.md)"}},
		{ID: "ééé", Type: "plan", Priority: 7, AgeSeconds: 200000, Depth: 0, Iteration: 2},
	}}
	want := "" +
		"ID                          TYPE         PRIORITY  AGE   DEPTH  ITER  RUNNABLE\n" +
		"01JD3K9Q5ZB7X0000000000000  ralph        120       1h2m  3      1     yes\n" +
		"phase9                      review-long  -5        59s   12     117   no (global cap 50/50, artifact missing (/a/é/日本.md))\n" +
		"ééé                         plan         7         2d7h  0      2     no\n"
	var got bytes.Buffer
	if err := printScheduler(&env{stdout: &got}, rowsOf(v)); err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Errorf("table mismatch\ngot:\n%s\nwant:\n%s", got.String(), want)
	}
	got.Reset()
	if err := printScheduler(&env{stdout: &got}, rowsOf(api.SchedulerView{})); err != nil || got.String() != "no pending loops\n" {
		t.Errorf("empty plan = %q, %v; want %q", got.String(), err, "no pending loops\n")
	}
	got.Reset()
	cut := errors.New("plan cut off")
	err := printScheduler(&env{stdout: &got}, func(row func(*api.SchedRow) error) error {
		if err := rowsOf(v)(row); err != nil {
			return err
		}
		return cut
	})
	if !errors.Is(err, cut) || got.Len() != 0 {
		t.Errorf("a plan that fails after its rows = %q, %v; want nothing printed and %v", got.String(), err, cut)
	}
}

// TestRunnableTextSaysEachOnce: a loop held for its spent budget carries
// the budget text in its needs_human reason and again as the budget gate;
// the RUNNABLE cell says it once. Texts that only look alike stay.
func TestRunnableTextSaysEachOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		reasons []string
		want    string
	}{
		{"runnable", nil, "yes"},
		{"no reason", []string{}, "no"},
		{"own budget", []string{"needs you (budget): budget spent: $0.30 of $0.25", "backoff until 11:48:59 (1s)", "budget spent: $0.30 of $0.25"},
			"no (needs you (budget): budget spent: $0.30 of $0.25, backoff until 11:48:59 (1s))"},
		{"tree budget", []string{"needs you (budget): tree budget spent: $2.10 of $2.00 (root 01JR)", "tree budget spent: $2.10 of $2.00 (root 01JR)"},
			"no (needs you (budget): tree budget spent: $2.10 of $2.00 (root 01JR))"},
		{"the same text twice", []string{"global cap 50/50", "global cap 50/50"}, "no (global cap 50/50)"},
		{"a suffix that is not a clause", []string{"needs you (question): raise the budget spent: $1", "budget spent: $1 more"}, "no (needs you (question): raise the budget spent: $1, budget spent: $1 more)"},
		{"a suffix without its colon", []string{"tree budget spent: $1 of $1", "budget spent: $1 of $1"}, "no (tree budget spent: $1 of $1, budget spent: $1 of $1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := runnableText(tc.reasons == nil, tc.reasons); got != tc.want {
				t.Errorf("runnableText(%q)\n got %q\nwant %q", tc.reasons, got, tc.want)
			}
		})
	}
}
