package cli

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/loop"
)

// TestIndentArrayMatchesEncoder: re-indenting the records' compact JSON
// (what the daemon sends), read a few bytes at a time, prints byte for
// byte what writeJSON prints for the records; a cut-off, non-array or
// followed array is an error.
func TestIndentArrayMatchesEncoder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(51, 52))
	texts := []string{"", "a", "<b> & \"c\"", "日本\n\t", "\u2028", "😀", "x/y", "\\", "\x00\x1f"}
	now := time.Date(2026, 1, 25, 12, 0, 0, 123, time.UTC)
	for c := range 200 {
		loops := []loop.Loop{}
		for i := range r.IntN(4) {
			l := loop.Loop{ID: fmt.Sprintf("L%d", i), Type: loop.Ralph, Status: loop.Pending, Task: texts[r.IntN(len(texts))],
				Title: texts[r.IntN(len(texts))], CreatedAt: now, UpdatedAt: now, CostHint: []float64{0, 1e22, 3e-9, 0.5}[r.IntN(4)]}
			if r.IntN(3) == 0 {
				l.Lease = &loop.Lease{Owner: texts[r.IntN(len(texts))], ExpiresAt: now, PID: r.IntN(3)}
			}
			loops = append(loops, l)
		}
		compact, err := json.Marshal(loops)
		if err != nil {
			t.Fatal(err)
		}
		var want, got bytes.Buffer
		if err := writeJSON(&want, loops); err != nil {
			t.Fatal(err)
		}
		if err := indentArray(&got, iotest.OneByteReader(bytes.NewReader(append(compact, '\n')))); err != nil {
			t.Fatalf("case %d: indentArray() = %v", c, err)
		}
		if got.String() != want.String() {
			t.Fatalf("case %d: mismatch\n got %s\nwant %s", c, got.String(), want.String())
		}
		if len(compact) > 2 {
			cut := compact[:len(compact)-1-r.IntN(len(compact)-2)]
			if err := indentArray(io.Discard, bytes.NewReader(cut)); err == nil {
				t.Fatalf("case %d: indentArray(%s) = nil; want an error", c, cut)
			}
		}
	}
	for _, doc := range []string{`{"id":"x"}`, `[]x`, `[] []`, `[1,]`, ``} {
		err := indentArray(io.Discard, strings.NewReader(doc))
		if err == nil || !strings.HasPrefix(err.Error(), "list: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("indentArray(%q) = %v; want an error of one line", doc, err)
		}
	}
}
