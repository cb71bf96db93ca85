package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

func randomView(r *rand.Rand) api.SchedulerView {
	texts := []string{"", "a", "<b> & \"c\"", "日本\n\t", "\u2028", "😀", "x/y", "\\"}
	v := api.SchedulerView{Now: time.Unix(r.Int64N(1<<31), r.Int64N(1e9)).In(time.FixedZone("z", 3600*(r.IntN(5)-2))),
		Waiting: r.IntN(50), Eligible: r.IntN(100), Running: r.IntN(50), Slots: r.IntN(50)}
	for i := range r.IntN(5) {
		row := api.SchedRow{ID: fmt.Sprintf("L%d", i), Type: loop.Ralph, Status: loop.Statuses[r.IntN(len(loop.Statuses))],
			Title: texts[r.IntN(len(texts))], Priority: r.IntN(400) - 100, Base: r.IntN(100), Runnable: r.IntN(2) == 0,
			Reasons: []string{}, ReasonText: []string{}, AgeSeconds: r.Int64N(1 << 40), Tier: r.IntN(3),
			FairnessKey: texts[r.IntN(len(texts))], KeyUsed: []float64{0, 0.25, 1e22, 3e-9}[r.IntN(4)], Cost: float64(r.IntN(3))}
		for range r.IntN(3) {
			row.Reasons = append(row.Reasons, "quota")
			row.ReasonText = append(row.ReasonText, texts[r.IntN(len(texts))])
		}
		v.Rows = append(v.Rows, row)
	}
	if len(v.Rows) == 0 && r.IntN(2) == 0 {
		v.Rows = []api.SchedRow{}
	}
	return v
}

// mutate rewrites a JSON document the way other encoders (or other
// versions) might: spacing, escapes, unknown and miscased keys, nulls,
// bad numbers, truncation.
func mutate(r *rand.Rand, doc string) string {
	switch r.IntN(12) {
	case 0:
		return strings.ReplaceAll(doc, ",", " ,\n ")
	case 1:
		return strings.Replace(doc, `"id":`, `"future":{"a":[1,2.5e3,null,true,"x"]},"id":`, 1)
	case 2:
		return strings.Replace(doc, `"title":`, `"Title":`, 1) // encoding/json matches any case
	case 3:
		return strings.Replace(doc, `"reasons":[`, `"reasons":null,"x":[`, 1)
	case 4:
		return strings.Replace(doc, `"priority":`, `"priority":0`, 1) // 01: not JSON
	case 5:
		return strings.ReplaceAll(doc, `a`, `\u0061`)
	case 6:
		return strings.ReplaceAll(doc, `/`, `\/`)
	case 7:
		return doc[:r.IntN(len(doc))]
	case 8:
		return strings.Replace(doc, `"waiting":`, `"waiting":1.5,"w":`, 1)
	case 9:
		return strings.Replace(doc, `"title":"`, `"title":"\ud83d\ude00`, 1) // a surrogate pair
	case 10:
		return strings.Replace(doc, `"runnable":`, `"runnable":"yes","r":`, 1)
	}
	return doc
}

func TestDecodeViewMatchesUnmarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(31, 32))
	for c := range 5000 {
		v := randomView(r)
		var b []byte
		if r.IntN(3) == 0 {
			b, _ = json.MarshalIndent(v, "", "  ")
		} else {
			b, _ = json.Marshal(v)
		}
		doc := mutate(r, string(b))
		var want, got api.SchedulerView
		werr := json.Unmarshal([]byte(doc), &want)
		gerr := decodeView([]byte(doc), &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("case %d: decodeView error %v, json.Unmarshal error %v\n%s", c, gerr, werr, doc)
		}
		if werr != nil {
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("case %d: decodeView mismatch (-json +fast):\n%s\n%s", c, diff, doc)
		}
		// Streamed in small reads, through a window that starts tiny.
		p := parser{r: &smallReads{s: doc, r: r}, b: make([]byte, 0, 8)}
		var streamed api.SchedulerView
		if p.document(&streamed); p.err == nil {
			if diff := cmp.Diff(want, streamed); diff != "" {
				t.Fatalf("case %d: streamed decode mismatch (-json +fast):\n%s\n%s", c, diff, doc)
			}
		} else if !errors.Is(p.err, errSlow) {
			t.Fatalf("case %d: streamed decode error %v", c, p.err)
		}
	}
}

// smallReads hands out s a few bytes per Read.
type smallReads struct {
	s string
	r *rand.Rand
}

func (s *smallReads) Read(p []byte) (int, error) {
	if s.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1+s.r.IntN(7))], s.s)
	s.s = s.s[n:]
	return n, nil
}

func BenchmarkDecodeView(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	v := api.SchedulerView{Now: time.Now()}
	for len(v.Rows) < 10000 {
		v.Rows = append(v.Rows, randomView(r).Rows...)
	}
	doc, _ := json.Marshal(v)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var got api.SchedulerView
			decodeView(doc, &got)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var got api.SchedulerView
			json.Unmarshal(doc, &got)
		}
	})
}
