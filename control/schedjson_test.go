package control

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// TestSchedulerJSONMatchesMarshal: the streamed debug plan is byte for
// byte json.Marshal of the api.SchedulerView built from the same decision.
func TestSchedulerJSONMatchesMarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(21, 22))
	texts := []string{"", "a", "<b> & \"c\"", "日本\n\t", "\u2028", "\xff", "quota alice 2/2"}
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.FixedZone("x", []int{0, 3600, -5400}[r.IntN(3)]))
	for c := range 300 {
		var d scheduler.Decision
		d.Waiting, d.Eligible, d.Running, d.Slots = r.IntN(100), r.IntN(100), r.IntN(50), r.IntN(50)
		for i := range r.IntN(6) {
			l := &loop.Loop{ID: fmt.Sprintf("L%d", i), Type: loop.Ralph, Status: loop.Statuses[r.IntN(len(loop.Statuses))],
				Title: texts[r.IntN(len(texts))], CreatedAt: now.Add(time.Duration(r.IntN(7200)-600) * time.Second)}
			row := scheduler.Row{Loop: l, Runnable: r.IntN(2) == 0, Tier: r.IntN(3), Key: texts[r.IntN(len(texts))],
				Score: scheduler.Score{Priority: r.IntN(300) - 50, Base: r.IntN(100), AgeBoost: r.IntN(50), Depth: r.IntN(4),
					DepthBoost: r.IntN(40), Iteration: r.IntN(9), RetryPenalty: r.IntN(30)}}
			if r.IntN(2) == 0 {
				row.KeyUsed, row.Cost = []float64{0, 0.5, 1e22, 60}[r.IntN(4)], []float64{0, 3, 1e-7}[r.IntN(3)]
			}
			for range r.IntN(3) {
				row.Reasons = append(row.Reasons, scheduler.Reason{Code: scheduler.Codes[r.IntN(len(scheduler.Codes))], Text: texts[r.IntN(len(texts))]})
			}
			d.Rows = append(d.Rows, row)
		}
		v := api.SchedulerView{Now: now, Waiting: d.Waiting, Eligible: d.Eligible, Running: d.Running, Slots: d.Slots,
			Rows: make([]api.SchedRow, len(d.Rows))}
		for i, row := range d.Rows {
			v.Rows[i] = Row(row, now)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendViewHead(nil, d, now)
		if err != nil {
			t.Fatal(err)
		}
		for i := range d.Rows {
			if i > 0 {
				got = append(got, ',')
			}
			if got, err = appendSchedRow(got, &d.Rows[i], now); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, "]}"...)
		if string(got) != string(want) {
			t.Fatalf("case %d:\n got %s\nwant %s", c, got, want)
		}
	}
}
