package sim

import (
	"math"
	"slices"
)

// Metrics is how well a run did for what users wait for: whole trees.
// Times are virtual seconds.
type Metrics struct {
	// Makespan is the second the last loop ended (completed or failed).
	Makespan int `json:"makespan"`
	// LowerBound is max(CriticalPath, Work ÷ Slots): no policy ends sooner.
	LowerBound float64 `json:"lower_bound"`
	// CriticalPath is the latest tree submission plus that tree's
	// critical path, over all trees.
	CriticalPath int `json:"critical_path"`
	// Work is the slot-seconds of every iteration the workload runs.
	Work int `json:"work"`
	// Slots is concurrency.max_loops.
	Slots int `json:"slots"`
	// Utilisation is the slot-seconds run ÷ (Slots × Makespan).
	Utilisation float64 `json:"utilisation"`
	// MeanFlow and P95Flow are the mean and 95th percentile (nearest
	// rank) of the completed trees' flow times: tree completion.
	MeanFlow float64 `json:"mean_flow"`
	P95Flow  float64 `json:"p95_flow"`
	// Trees are the trees (loops without a parent), in workload order.
	Trees []TreeMetrics `json:"trees"`
	loops int           // in the workload
}

// TreeMetrics is one tree's times. -1: it did not happen.
type TreeMetrics struct {
	Root          string `json:"root"`
	Submit        int    `json:"submit"`          // the root arrived
	FirstTaskDone int    `json:"first_task_done"` // the first loop without children completed
	Complete      int    `json:"complete"`        // every loop of the tree completed
	Flow          int    `json:"flow"`            // Complete − Submit
	// CriticalPath is the tree's own longest chain of iterations,
	// backoffs and approvals, parents before children and dependencies
	// before the loops that depend on them: its flow with unlimited slots.
	CriticalPath int `json:"critical_path"`
	// Slowdown is Flow ÷ CriticalPath (≥ 1).
	Slowdown float64 `json:"slowdown"`
}

// metrics measures the finished run.
func (s *run) metrics() Metrics {
	m := Metrics{Slots: s.pol.MaxLoops, loops: len(s.ls)}
	byTree := map[string]int{}
	for _, l := range s.ls {
		if l.parent == nil {
			byTree[l.ID] = len(m.Trees)
			m.Trees = append(m.Trees, TreeMetrics{Root: l.ID, Submit: l.arrived, FirstTaskDone: -1, Complete: -1, Flow: -1, CriticalPath: l.rank})
			if l.st == notArrived {
				m.Trees[len(m.Trees)-1].Submit = -1
			} else {
				m.CriticalPath = max(m.CriticalPath, l.arrived+l.rank)
			}
		}
		m.Work += l.work()
	}
	for _, e := range s.res.Events {
		if e.Event == Done || e.Event == Fail {
			m.Makespan = max(m.Makespan, e.T)
		}
	}
	for _, l := range s.ls {
		tm := &m.Trees[byTree[l.tree()]]
		if l.st == done && len(l.kids) == 0 && (tm.FirstTaskDone < 0 || l.doneAt < tm.FirstTaskDone) {
			tm.FirstTaskDone = l.doneAt
		}
		if l.parent == nil && !l.rec.SubtreeDoneAt.IsZero() {
			tm.Complete = int(l.rec.SubtreeDoneAt.Sub(Epoch).Seconds())
			tm.Flow = tm.Complete - tm.Submit
			tm.Slowdown = float64(tm.Flow) / float64(max(tm.CriticalPath, 1))
		}
	}
	if m.Slots > 0 {
		m.LowerBound = max(float64(m.CriticalPath), float64(m.Work)/float64(m.Slots))
		if m.Makespan > 0 {
			m.Utilisation = float64(s.busy) / float64(m.Slots*m.Makespan)
		}
	}
	var flows []float64
	for _, tm := range m.Trees {
		if tm.Flow >= 0 {
			flows = append(flows, float64(tm.Flow))
		}
	}
	if len(flows) > 0 {
		sum := 0.0
		for _, f := range flows {
			sum += f
		}
		m.MeanFlow = sum / float64(len(flows))
		slices.Sort(flows)
		m.P95Flow = flows[max(int(math.Ceil(0.95*float64(len(flows))))-1, 0)]
	}
	return m
}

// summary fills the result's statistics per fairness key.
func (s *run) summary() {
	stats := map[string]*KeyStats{}
	for _, l := range s.ls {
		ks := stats[l.key]
		if ks == nil {
			ks = &KeyStats{Key: l.key}
			stats[l.key] = ks
		}
		ks.Loops++
		if l.st == expired {
			ks.Expired++
		}
	}
	next := map[string]int{}
	for _, e := range s.res.Events {
		l := s.byID[e.ID]
		ks := stats[l.key]
		switch e.Event {
		case Admit:
			if next[e.ID] == 0 {
				ks.Admitted++ // loops admitted; a retry is admitted again
			}
			ks.Waits = append(ks.Waits, s.waits[e.ID][next[e.ID]])
			next[e.ID]++
		case Done:
			ks.DoneAt = append(ks.DoneAt, e.T)
		}
	}
	for _, k := range slicesSortedKeys(stats) {
		s.res.Keys = append(s.res.Keys, *stats[k])
	}
}
