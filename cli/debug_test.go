package cli

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
)

// tabwriterTable is printScheduler's table as tabwriter prints it.
func tabwriterTable(v api.SchedulerView) string {
	var b bytes.Buffer
	w := table(&b)
	fmt.Fprintln(w, "ID\tTYPE\tPRIORITY\tAGE\tDEPTH\tITER\tRUNNABLE")
	for _, r := range v.Rows {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%d\t%s\n", r.ID, r.Type, r.Priority,
			age(time.Duration(r.AgeSeconds)*time.Second), r.Depth, r.Iteration, runnableText(r.Runnable, r.ReasonText))
	}
	w.Flush()
	return b.String()
}

// TestSchedulerTableMatchesTabwriter: the table printScheduler aligns
// itself is byte for byte the one tabwriter prints, and rows with
// characters tabwriter breaks cells on go through tabwriter.
func TestSchedulerTableMatchesTabwriter(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(41, 42))
	texts := []string{"global cap 50/50", "parent incomplete (running)", "artifact missing (/a/é/日本.md)", "", "x\ty", "a\nb", "backoff until 12:04:31 (12s)"}
	ids := []string{"01JD3K9Q5ZB7X0000000000000", "phase9", "L1", "ééé", "a-very-long-identifier_000"}
	for c := range 500 {
		var v api.SchedulerView
		for range 1 + r.IntN(8) {
			row := api.SchedRow{ID: ids[r.IntN(len(ids))], Type: []string{"ralph", "phase", "plan", "review-long"}[r.IntN(4)],
				Priority: r.IntN(400) - 100, AgeSeconds: r.Int64N(1 << 20), Depth: r.IntN(12), Iteration: 1 + r.IntN(120),
				Runnable: r.IntN(3) == 0}
			for range r.IntN(3) {
				row.ReasonText = append(row.ReasonText, texts[r.IntN(len(texts))])
			}
			v.Rows = append(v.Rows, row)
		}
		var got bytes.Buffer
		if err := printScheduler(&env{stdout: &got}, v); err != nil {
			t.Fatal(err)
		}
		if want := tabwriterTable(v); got.String() != want {
			t.Fatalf("case %d: table mismatch\ngot:\n%s\nwant:\n%s", c, got.String(), want)
		}
	}
}
