package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// bigTree is a realistic workspace of 10,050 loops: 10 plans × 4 specs × 10
// phases × 24 ralphs, the older plans finished, the newer ones busy.
func bigTree() []loop.Loop {
	var out []loop.Loop
	mk := func(id, parent, typ string, depth int, st loop.Status, age time.Duration) loop.Loop {
		l := loop.Loop{ID: id, Parent: parent, Type: typ, Depth: depth, Status: st, Title: "work item " + id,
			Iteration: 1, MaxIterations: 100, CreatedAt: testNow.Add(-age), UpdatedAt: testNow.Add(-age)}
		if st == loop.Running {
			l.StartedAt = testNow.Add(-age / 2)
		}
		return l
	}
	for p := range 10 {
		pid := fmt.Sprintf("p%02d", p)
		out = append(out, mk(pid, "", loop.Plan, 0, loop.Complete, time.Duration(10-p)*time.Hour))
		for s := range 4 {
			sid := fmt.Sprintf("%s-%03d", pid, s)
			out = append(out, mk(sid, pid, loop.Spec, 1, loop.Complete, time.Duration(10-p)*time.Hour-time.Minute))
			for ph := range 10 {
				phid := fmt.Sprintf("%s-%03d", sid, ph)
				out = append(out, mk(phid, sid, loop.Phase, 2, loop.Complete, time.Duration(ph+1)*time.Minute*30))
				for r := range 24 {
					st := []loop.Status{loop.Pending, loop.Pending, loop.Pending, loop.Complete, loop.Running, loop.Failed, loop.Paused, loop.Pending}[(p+s+ph+r)%8]
					l := mk(fmt.Sprintf("%s-%03d", phid, r), phid, loop.Ralph, 3, st, time.Duration(r+1)*time.Minute)
					l.Iteration = 1 + r%7
					if r%5 == 0 {
						l.RunnableAt = testNow.Add(time.Duration(r) * time.Second)
					}
					out = append(out, l)
				}
			}
		}
	}
	return out
}

func bigModel(tb testing.TB) Model {
	fc := newFake()
	st := fixtureStatus()
	fc.snap = api.StreamMsg{Type: api.StreamSnapshot, Loops: bigTree(), Status: &st}
	m := loaded(tb, fc, 200, 50)
	m.cursor = len(m.rows) / 2
	m.syncSelection()
	return m
}

// BenchmarkView renders one frame of a 10,050-loop tree at 200×50.
func BenchmarkView(b *testing.B) {
	m := bigModel(b)
	if len(m.rows) < 10000 {
		b.Fatalf("%d rows, want the whole tree open", len(m.rows))
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = m.View()
	}
}

// BenchmarkViewFlat renders the flat (scheduling order) view of the same tree.
func BenchmarkViewFlat(b *testing.B) {
	m := bigModel(b)
	m = update(b, m, keyMsg("t"))
	b.ReportAllocs()
	for b.Loop() {
		_ = m.View()
	}
}

// BenchmarkEvent applies one status change to the 10,050-loop model: the
// work between the daemon's event and the next frame.
func BenchmarkEvent(b *testing.B) {
	m := bigModel(b)
	l := *m.loops[m.sel]
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l.Status = []loop.Status{loop.Running, loop.Pending}[i%2]
		l.UpdatedAt = testNow.Add(time.Duration(i) * time.Millisecond)
		ll := l
		nm, _ := m.Update(streamMsg{gen: m.gen, now: testNow, msgs: []api.StreamMsg{{Type: api.StreamEvent, Loop: &ll}}})
		m = nm.(Model)
	}
}

// BenchmarkTick is the once-a-second clock tick on the same model when time
// changes nothing the plan decides on: no plan is made.
func BenchmarkTick(b *testing.B) {
	m := bigModel(b)
	b.ReportAllocs()
	for b.Loop() {
		nm, _ := m.Update(tickMsg{now: testNow})
		m = nm.(Model)
	}
}

// BenchmarkTickReplan is a tick on which time changed the plan (a waiting
// loop's age reached a whole minute, a backoff ended): scheduler.Plan runs
// over the 10,050 loops.
func BenchmarkTickReplan(b *testing.B) {
	m := bigModel(b)
	b.ReportAllocs()
	for b.Loop() {
		m.sched.stale = true
		nm, _ := m.Update(tickMsg{now: testNow})
		m = nm.(Model)
	}
}

var _ tea.Model = Model{}

// BenchmarkViewTreeStats is a frame after an event with the first plan's
// row on screen: its tree's progress (done/total, cost, state) is counted
// again over its 1,005 loops, once per event, not once per frame.
func BenchmarkViewTreeStats(b *testing.B) {
	m := bigModel(b)
	m = update(b, m, keyMsg("g"))
	if !strings.Contains(m.View(), "tree ") {
		b.Fatal("the first plan's row does not show its tree")
	}
	b.ReportAllocs()
	for b.Loop() {
		m.version2++ // what every stream event does
		_ = m.View()
	}
}
