package control

import (
	"slices"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// Stats summarises the retained loops at now (`loopr stats`): counts by
// type and status, completions in the last hour and day, the success rate
// of finished loops and the mean iterations a complete loop of each type
// needed. The daemon adds what it measures (counters, latencies).
func (s *Service) Stats(now time.Time) (api.Stats, error) {
	st := api.Stats{Now: now}
	byType := map[string]*api.TypeStats{}
	iters := map[string]int{}
	row := func(t string) *api.TypeStats {
		r := byType[t]
		if r == nil {
			r = &api.TypeStats{Type: t, Counts: map[loop.Status]int{}}
			byType[t] = r
		}
		return r
	}
	for _, t := range s.cfg().Types() {
		row(t)
	}
	err := s.Store.View(func(tx *store.Tx) error {
		limits, err := LoadLimits(tx)
		if err != nil {
			return err
		}
		for _, rl := range limits { // the profile that resumes last
			if rl.BackoffUntil.After(st.RateLimit.State.BackoffUntil) || st.RateLimit.State.Hits == 0 && rl.Hits > 0 {
				st.RateLimit.State = rl
			}
		}
		if st.Today, err = UsageToday(tx, now); err != nil {
			return err
		}
		for _, status := range loop.Statuses {
			err := tx.ByStatus(status, func(l loop.Loop) bool {
				r := row(l.Type)
				r.Counts[status]++
				r.Usage = r.Usage.Add(l.Usage)
				st.Usage = st.Usage.Add(l.Usage)
				st.Total++
				if status == loop.Complete {
					iters[l.Type] += l.Iteration
					if end := finished(l); !end.After(now) {
						if now.Sub(end) <= time.Hour {
							st.CompletedHour++
						}
						if now.Sub(end) <= 24*time.Hour {
							st.CompletedDay++
						}
					}
				}
				return true
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return api.Stats{}, err
	}
	st.RateLimit.Blocked = st.RateLimit.State.Blocked(now)
	for _, r := range byType {
		st.FinishedOK += r.Counts[loop.Complete]
		st.FinishedFailed += r.Counts[loop.Failed]
		if n := r.Counts[loop.Complete]; n > 0 {
			r.MeanIterations = float64(iters[r.Type]) / float64(n)
		}
	}
	if n := st.FinishedOK + st.FinishedFailed; n > 0 {
		st.SuccessRate = float64(st.FinishedOK) / float64(n)
	}
	order := s.cfg().Types()
	var extra []string // types no longer configured
	for _, r := range byType {
		if !slices.Contains(order, r.Type) {
			extra = append(extra, r.Type)
		}
	}
	slices.Sort(extra)
	order = append(order, extra...)
	for _, t := range order {
		st.Types = append(st.Types, *byType[t])
	}
	return st, nil
}
