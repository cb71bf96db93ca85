package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// randomView is a debug plan of n rows with the strings the daemon may
// have to escape (agents write titles).
func randomView(r *rand.Rand, n int) api.SchedulerView {
	texts := []string{"", "a", "<b> & \"c\"", "日本\n\t", "\u2028", "😀", "x/y", "\\", "quota alice 2/2"}
	v := api.SchedulerView{Now: time.Unix(r.Int64N(1<<31), r.Int64N(1e9)).In(time.FixedZone("", 3600*(r.IntN(5)-2))),
		Waiting: []int{n, 0, -3, 2*n + 5}[r.IntN(4)], Eligible: r.IntN(n + 1), Running: r.IntN(50), Slots: r.IntN(50), Rows: []api.SchedRow{}}
	for i := range n {
		row := api.SchedRow{ID: fmt.Sprintf("01KAZ%021d", i), Type: loop.Ralph, Status: loop.Statuses[r.IntN(len(loop.Statuses))],
			Title: texts[r.IntN(len(texts))], Priority: r.IntN(400) - 100, Base: r.IntN(100), Runnable: r.IntN(2) == 0,
			Reasons: []string{}, ReasonText: []string{}, AgeSeconds: r.Int64N(1 << 40), Tier: r.IntN(3),
			FairnessKey: texts[r.IntN(len(texts))], KeyUsed: []float64{0, 0.25, 1e22, 3e-9}[r.IntN(4)], Cost: float64(r.IntN(3))}
		for range r.IntN(3) {
			row.Reasons = append(row.Reasons, "quota")
			row.ReasonText = append(row.ReasonText, texts[r.IntN(len(texts))])
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

// planServer serves a loopr daemon's status and doc as its debug plan, a
// few hundred bytes per write.
func planServer(t *testing.T, doc []byte) string {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/scheduler" {
			json.NewEncoder(w).Encode(api.Status{Daemon: true, Protocol: api.ProtocolVersion, Version: "t"})
			return
		}
		for b := doc; len(b) > 0; {
			n := min(len(b), 1+len(b)%397)
			w.Write(b[:n])
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	}))
}

// TestSchedulerDecodes: the debug plan as encoding/json writes it arrives
// in pieces and decodes to what json.Unmarshal makes of it; a plan cut
// off is an error of one line naming the answer, never a shorter plan.
func TestSchedulerDecodes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{-1, 0, 1, 7, 2000} {
		v := randomView(r, max(n, 0))
		if n < 0 {
			v.Rows = nil // "rows": null
		}
		doc, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want api.SchedulerView
		if err := json.Unmarshal(doc, &want); err != nil {
			t.Fatal(err)
		}
		c, err := dial(planServer(t, append(doc, '\n')))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Scheduler(context.Background(), time.Time{})
		if err != nil {
			t.Fatalf("%d rows: Scheduler() = %v", n, err)
		}
		if diff := cmp.Diff(want, got); diff != "" || len(got.Rows) != max(n, 0) {
			t.Errorf("%d rows: Scheduler() mismatch (-json.Unmarshal +got):\n%s", n, diff)
		}

		i := 0
		stop := errors.New("enough")
		_, err = c.SchedulerRows(context.Background(), time.Time{}, func(v *api.SchedulerView, r *api.SchedRow) error {
			if v.Waiting != want.Waiting || i >= len(want.Rows) || !cmp.Equal(*r, want.Rows[i]) {
				return fmt.Errorf("row %d: %+v (waiting %d); want %+v (waiting %d)", i, *r, v.Waiting, want.Rows[min(i, len(want.Rows)-1)], want.Waiting)
			}
			if i++; i == 3 {
				return stop
			}
			return nil
		})
		wantErr, wantRows := error(nil), max(n, 0)
		if n >= 3 {
			wantErr, wantRows = stop, 3
		}
		if err != wantErr || i != wantRows {
			t.Errorf("%d rows: SchedulerRows(stop at row 3) = %v after %d rows; want %v after %d (the rows in order, the callback's error as it is)", n, err, i, wantErr, wantRows)
		}

		c, err = dial(planServer(t, doc[:len(doc)*2/3]))
		if err != nil {
			t.Fatal(err)
		}
		got, err = c.Scheduler(context.Background(), time.Time{})
		if err == nil || !strings.Contains(err.Error(), "/v1/scheduler") || strings.Contains(err.Error(), "\n") || len(got.Rows) != 0 {
			t.Errorf("%d rows cut off: Scheduler() = %d rows, %v; want an error of one line naming /v1/scheduler", n, len(got.Rows), err)
		}
	}
}

// BenchmarkDecodeView: decoding a 10,000-row plan with
// github.com/go-json-experiment/json (what Scheduler does) against
// encoding/json.
func BenchmarkDecodeView(b *testing.B) {
	doc, _ := json.Marshal(randomView(rand.New(rand.NewPCG(1, 1)), 10000))
	b.Run("json-v2", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			var got api.SchedulerView
			if err := jsonv2.Unmarshal(doc, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			var got api.SchedulerView
			if err := json.Unmarshal(doc, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
