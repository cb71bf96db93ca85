package control

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/readyset"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
)

// indexState is the service's in-memory scheduling index (readyset), kept
// in step with the store by a store follower once EnableIndex ran.
type indexState struct {
	once sync.Once
	ix   atomic.Pointer[readyset.Index]
	err  error
}

// EnableIndex builds the in-memory scheduling index from the store — every
// record's head, no long texts — and keeps it in step with every commit
// from then on. The daemon enables it at start; from then on Snapshot,
// Plan, Scheduler, Why and Decide read the index instead of decoding every
// waiting loop. It is idempotent. The direct CLI never enables it: one
// command, one read of the store.
func (s *Service) EnableIndex() error {
	s.idx.once.Do(func() {
		ix := readyset.New(Policy(s.cfg()).Weights)
		s.idx.err = s.Store.Follow(func(tx *store.Tx) error {
			counts, err := tx.Counts()
			if err != nil {
				return err
			}
			total := 0
			for _, n := range counts {
				total += n
			}
			// Finished loops matter only as parents (their status and
			// parent) and as roots (created_at); the unfinished ones as
			// work left in their tree too (type, profile, started_at).
			full := func(st loop.Status) bool { return !st.Terminal() }
			// Decoding and indexing overlap: one goroutine reads the
			// records in batches while this one indexes the last batch.
			return ix.Load(total, counts[loop.Pending]+counts[loop.Paused]+counts[loop.NeedsHuman], func(put func(*loop.Loop)) error {
				const size = 512
				batches := make(chan []loop.Loop, 4)
				var readErr error
				go func() { // the only user of tx until it returns
					defer close(batches)
					b := make([]loop.Loop, 0, size)
					readErr = tx.ForEachHead(full, func(l *loop.Loop) bool {
						if b = append(b, *l); len(b) == size {
							batches <- b
							b = make([]loop.Loop, 0, size)
						}
						return true
					})
					if len(b) > 0 {
						batches <- b
					}
				}()
				for b := range batches {
					for i := range b {
						put(&b[i])
					}
				}
				return readErr
			})
		}, func(c store.Commit) {
			changes := make([]readyset.Change, len(c.Changes))
			for i := range c.Changes {
				ch := &c.Changes[i]
				changes[i].ID = ch.ID
				if !ch.Deleted {
					changes[i].Loop = &ch.Loop
				}
			}
			ix.Apply(changes)
			s.followed(c)
		})
		if s.idx.err == nil {
			s.idx.ix.Store(ix)
		} else {
			s.idx.err = fmt.Errorf("scheduling index: %w", s.idx.err)
		}
	})
	return s.idx.err
}

// Index returns the scheduling index, nil until EnableIndex succeeded.
func (s *Service) Index() *readyset.Index { return s.idx.ix.Load() }

// env gathers what a decision under p at now needs besides the loops: the
// rate-limit, fairness and learned-duration state (small meta values), the
// disk gate and the artifact check.
func (s *Service) env(p scheduler.Policy, now time.Time) (readyset.Env, float64, error) {
	var env readyset.Env
	var err error
	fair, tree := p.Fairness.Enabled, p.Weights.TreeOn()
	var d scheduler.Durations
	if s.cachesMeta() {
		env, d, err = s.cachedEnv(fair, tree) // etcd: from memory (metacache.go)
	} else {
		err = s.Store.View(s.envFrom(&env, &d, fair, tree))
	}
	if err != nil {
		return readyset.Env{}, 0, err
	}
	if tree {
		env.Tree = &readyset.TreeEnv{Durations: d, Fairness: p.Fairness, Now: now}
	}
	free, low, text := s.diskGate()
	env.DiskLow, env.DiskLowText = low, text
	env.Preflight, env.NoGit, env.NoGitText = s.gateInputs()
	env.Untrusted = s.Untrusted()
	env.ArtifactExists = s.artifactExists
	env.ArtifactsExist = s.artifactsExist
	return env, free, nil
}

// envFrom returns a read of env's store part: rate limits, spent trees,
// (when fair) the fairness state and (when tree) the learned durations.
func (s *Service) envFrom(env *readyset.Env, d *scheduler.Durations, fair, tree bool) func(tx *store.Tx) error {
	return func(tx *store.Tx) error {
		var err error
		if env.Limits, err = LoadLimits(tx); err != nil {
			return err
		}
		if env.Spent, err = s.spentTrees(tx); err != nil {
			return err
		}
		if tree {
			if *d, err = loadDurations(tx); err != nil {
				return err
			}
		}
		if fair {
			var err error
			env.Fairness, err = loadFairness(tx)
			return err
		}
		return nil
	}
}

// indexSnapshot is Snapshot read from the index instead of the store.
func (s *Service) indexSnapshot(ix *readyset.Index, now time.Time) (Snapshot, error) {
	env, free, err := s.env(Policy(s.cfg()), now)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Snapshot: ix.Snapshot(env), DiskFreeGB: free}
	for _, n := range snap.Running {
		snap.RunningTotal += n
	}
	return snap, nil
}

// Tick is one scheduling decision of the manager.
type Tick struct {
	Start   []string           // the loops to start, in order (scheduler.Plan's Start)
	Charges []scheduler.Charge // fairness: what each started loop costs its key
	// RateLimit is the daemon-wide 429 state the decision saw (none since
	// limits are per profile); Limits the state of each agent profile.
	RateLimit ratelimit.State
	Limits    map[string]ratelimit.State
	// Waiting, Eligible, Running, Slots: as in scheduler.Decision (Eligible
	// counts loops ready by their own gates when the index decided).
	Waiting, Eligible, Running, Slots int
	// Next is when a decision may change by itself: the earliest backoff
	// or rate limit ending after now; zero when none.
	Next time.Time
	// Fast: the index's incremental walk decided (no snapshot, no sort).
	Fast bool
}

// Decide decides which loops start at now: with the index, incrementally
// (readyset.Index.Decide, exactly what Plan would start); without it, Plan
// over a snapshot read from the store.
func (s *Service) Decide(now time.Time) (Tick, error) {
	p := Policy(s.cfg())
	ix := s.Index()
	if ix == nil {
		snap, d, err := s.Plan(now)
		if err != nil {
			return Tick{}, err
		}
		t := Tick{Start: d.Start, Charges: d.Charges, RateLimit: snap.RateLimit, Limits: snap.Limits,
			Waiting: d.Waiting, Eligible: d.Eligible, Running: d.Running, Slots: d.Slots}
		for _, c := range snap.Waiting {
			t.Next = sooner(t.Next, c.Loop.RunnableAt, now)
		}
		t.Next = sooner(t.Next, snap.RateLimit.BackoffUntil, now)
		t.Next = limitsNext(t.Next, snap.Limits, now)
		return t, nil
	}
	env, _, err := s.env(p, now)
	if err != nil {
		return Tick{}, err
	}
	d := ix.Decide(now, p, env)
	t := Tick{Start: d.Start, Charges: d.Charges, RateLimit: env.RateLimit, Limits: env.Limits,
		Waiting: d.Waiting, Eligible: d.Ready, Running: d.Running, Slots: d.Slots, Fast: d.Fast}
	t.Next = sooner(ix.Next(now), env.RateLimit.BackoffUntil, now)
	t.Next = limitsNext(t.Next, env.Limits, now)
	return t, nil
}

// limitsNext returns the sooner of next and the end of every profile's
// backoff and recovery after now.
func limitsNext(next time.Time, limits map[string]ratelimit.State, now time.Time) time.Time {
	for _, st := range limits {
		next = sooner(next, st.BackoffUntil, now)
		next = sooner(next, st.RecoveryUntil, now)
	}
	return next
}

// sooner returns the earlier of a and b among those after now (zero: none).
func sooner(a, b, now time.Time) time.Time {
	if !a.After(now) {
		a = time.Time{}
	}
	if !b.After(now) {
		return a
	}
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// SweepCandidates returns, from the index, the waiting loops whose
// deadline passed at now and those whose parent does not exist: the only
// loops the manager's sweep may change. ok is false without the index (the
// sweep then reads every waiting loop).
func (s *Service) SweepCandidates(now time.Time) (ids []string, ok bool) {
	ix := s.Index()
	if ix == nil {
		return nil, false
	}
	expired, orphaned := ix.Due(now)
	ids = append(expired, orphaned...)
	slices.Sort(ids)
	return slices.Compact(ids), true
}
