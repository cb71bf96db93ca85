package control

import (
	"bytes"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
		var buf bytes.Buffer
		n, err := writeView(&buf, d, now)
		if err != nil || n != len(d.Rows) {
			t.Fatalf("case %d: writeView = %d, %v; want %d rows", c, n, err, len(d.Rows))
		}
		got := buf.String()
		if bytes.Contains(want, []byte(`\ufffd`)) {
			// encoding/json writes invalid UTF-8 as the escape \ufffd,
			// the v2 implementation as the character U+FFFD (as
			// encoding/json does when built on v2): the same strings.
			var a, b api.SchedulerView
			if err := json.Unmarshal([]byte(got), &a); err != nil {
				t.Fatalf("case %d: %v\n%s", c, err, got)
			}
			json.Unmarshal(want, &b)
			if diff := cmp.Diff(b, a); diff != "" {
				t.Fatalf("case %d: mismatch (-json.Marshal +writeView):\n%s", c, diff)
			}
			continue
		}
		want = append(want, '\n')
		if string(got) != string(want) {
			t.Fatalf("case %d:\n got %s\nwant %s", c, got, want)
		}
	}
}
