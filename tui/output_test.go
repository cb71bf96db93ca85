package tui

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/transcript"
)

// claudeCapture is what the real claude CLI printed for a run of tools
// (preset/testdata).
func claudeCapture(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("../preset/testdata/claude-2.1.332/tools.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOutputPaneRendered: o shows the agent's stream-json rendered (tool
// calls, results cut short, errors, the result with its cost), R the log
// as it was, R again rendered. The frame is testdata/TestOutputPaneRendered.golden.
func TestOutputPaneRendered(t *testing.T) {
	t.Parallel()
	fc := newFake()
	fc.output[idLimits] = claudeCapture(t)
	m := loaded(t, fc, goldenW, 48) // room for the whole transcript under the tree
	m = selectID(t, m, idLimits)
	m = press(t, m, "o")
	v := m.View()
	for _, want := range []string{"rendered · R raw", "▸ Bash  seq 1 12 && echo tests pass", "  │ … (10 more lines)",
		"  ✗ Exit code 1", "▸ Write  limiter.txt", "✓ done  $0.02 · 9.5k tokens · 0.5s · 6 turns"} {
		if !strings.Contains(v, want) {
			t.Errorf("rendered output pane lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, `{"type"`) {
		t.Errorf("rendered output pane shows JSON:\n%s", v)
	}
	golden.RequireEqual(t, []byte(v))

	m = press(t, m, "R")
	if v := m.View(); !strings.Contains(v, `{"type":"result"`) && !strings.Contains(v, `"total_cost_usd"`) || !strings.Contains(v, "raw · R rendered") {
		t.Errorf("R: the pane does not show the log as it was:\n%s", v)
	}
	m = press(t, m, "R")
	if v := m.View(); !strings.Contains(v, "✓ done") {
		t.Errorf("R twice: not rendered again:\n%s", v)
	}
}

// TestOutputIncremental: each read of the log's tail renders only what it
// adds to the previous one, also when the tail window slid; a tail that
// does not continue it (a new iteration) starts over.
func TestOutputIncremental(t *testing.T) {
	t.Parallel()
	ev := func(i int) string {
		return fmt.Sprintf(`{"type":"assistant","session_id":"s","message":{"content":[{"type":"text","text":"step %d"}]}}`, i) + "\n"
	}
	st := newStyles(testModel(newFake()).st.r, true)
	v := &outputView{}
	v.feed(ev(1)+ev(2), "claude", "", &st)
	v.feed(ev(1)+ev(2)+ev(3), "claude", "", &st)
	v.feed(ev(2)+ev(3)+ev(4), "claude", "", &st) // the window slid
	want := []transcript.Line{{Kind: transcript.Text, Text: "step 1"}, {Kind: transcript.Text, Text: "step 2"},
		{Kind: transcript.Text, Text: "step 3"}, {Kind: transcript.Text, Text: "step 4"}}
	if diff := cmp.Diff(want, v.lines); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
	if got := v.last(&st, 40, 2); !cmp.Equal(got, []string{" step 3", " step 4"}) {
		t.Errorf("last 2 = %q", got)
	}
	v.feed(ev(3)+ev(4)+ev(5), "claude", "", &st) // styled as it arrives
	if got := v.last(&st, 40, 1); !cmp.Equal(got, []string{" step 5"}) || len(v.shown) != 5 {
		t.Errorf("after one more event: last = %q, %d shown", got, len(v.shown))
	}
	v.feed(ev(3)+ev(4)+ev(5)+"waiting for", "claude", "", &st) // a line without its end yet
	if got := v.last(&st, 40, 2); !cmp.Equal(got, []string{" step 5", " waiting for"}) {
		t.Errorf("with a partial last line: last = %q", got)
	}
	v.feed(ev(9), "claude", "", &st) // another iteration
	if want := []transcript.Line{{Kind: transcript.Text, Text: "step 9"}}; !cmp.Equal(v.lines, want) {
		t.Errorf("a new log: lines = %v, want %v", v.lines, want)
	}
}

// benchEvents are n events of a claude stream: tool calls, their results,
// the assistant's words.
func benchEvents(n int) []string {
	events := make([]string, n)
	for i := range events {
		switch i % 3 {
		case 0:
			events[i] = fmt.Sprintf(`{"type":"assistant","session_id":"s","message":{"content":[{"type":"tool_use","id":"t%d","name":"Bash","input":{"command":"go test ./pkg%d/..."}}]}}`, i, i) + "\n"
		case 1:
			events[i] = fmt.Sprintf(`{"type":"user","session_id":"s","message":{"content":[{"type":"tool_result","tool_use_id":"t%d","content":"ok  \tpkg%d\t0.1s\nok  \tpkg%d/sub\t0.2s\nPASS\nok"}]}}`, i, i, i) + "\n"
		default:
			events[i] = fmt.Sprintf(`{"type":"assistant","session_id":"s","message":{"content":[{"type":"text","text":"The tests of package %d pass; next I look at the handler that answers 429 when the bucket is empty, and at its tests."}]}}`, i) + "\n"
		}
	}
	return events
}

// tails are the reads of the log's tail (outputBytes) after each event.
func tails(events []string) []string {
	var log strings.Builder
	out := make([]string, len(events))
	for i, e := range events {
		log.WriteString(e)
		s := log.String()
		out[i] = s[max(0, len(s)-outputBytes):]
	}
	return out
}

// BenchmarkOutputAppend: the output pane while an agent writes 10,000
// events, each read of the log's tail followed by a whole frame (the tree
// too) at 200×50.
func BenchmarkOutputAppend(b *testing.B) {
	fc := newFake()
	m := loaded(b, fc, 200, 50)
	m = selectID(b, m, idLimits)
	m = press(b, m, "o")
	reads := tails(benchEvents(10000))
	b.ReportAllocs()
	for b.Loop() {
		m.out.view = nil
		for _, tail := range reads {
			m = update(b, m, outputMsg{gen: m.out.gen, text: tail})
			_ = m.View()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(reads)), "ns/event")
	if v := m.View(); !strings.Contains(v, "The tests of package 9998 pass") {
		b.Fatalf("the last event is not shown:\n%s", v)
	}
}

// BenchmarkOutputPane is the pane's own part of BenchmarkOutputAppend:
// render what a read adds, style it, take the last screenful. With 1,000
// and 10,000 events: the cost of an event does not grow with the
// transcript.
func BenchmarkOutputPane(b *testing.B) {
	st := newStyles(testModel(newFake()).st.r, true)
	for _, n := range []int{1000, 10000} {
		reads := tails(benchEvents(n))
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			var v *outputView
			for b.Loop() {
				v = &outputView{}
				for _, tail := range reads {
					v.feed(tail, "claude", "", &st)
					_ = v.last(&st, 200, 40)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
			if got := v.last(&st, 200, 1); len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("go test ./pkg%d/...", n-1)) {
				b.Fatalf("last line %q", got)
			}
		})
	}
}
