package control

import (
	"errors"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// journalBatch is how many events Journal reads per transaction.
const journalBatch = 512

// Journal calls fn with each journal event after sequence number after, up
// to until (0: the end), in order, with its loop's type and title; only
// the events of loop loopID when it is not "". Events are read in batches,
// and fn runs outside the read transactions, so a slow fn (a client
// reading a stream) never holds one open.
func (s *Service) Journal(loopID string, after, until uint64, fn func(api.JournalEntry) error) error {
	if loopID != "" {
		var entries []api.JournalEntry
		err := s.Store.View(func(tx *store.Tx) error {
			l, err := tx.Get(loopID)
			if err != nil {
				return err
			}
			evs, err := tx.Events(loopID)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				if ev.Seq > after && (until == 0 || ev.Seq <= until) {
					entries = append(entries, api.JournalEntry{Event: ev, Type: l.Type, Title: l.Title})
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
	titles := map[loop.ID][2]string{}
	for {
		var entries []api.JournalEntry
		err := s.Store.View(func(tx *store.Tx) error {
			evs, err := tx.EventsSince(after, journalBatch)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				if until != 0 && ev.Seq > until {
					break
				}
				e := api.JournalEntry{Event: ev}
				if ev.Loop != "" {
					tt, ok := titles[ev.Loop]
					if !ok {
						l, err := tx.Get(ev.Loop)
						if err != nil && !errors.Is(err, store.ErrNotFound) { // a removed loop keeps its events
							return err
						}
						tt = [2]string{l.Type, l.Title}
						titles[ev.Loop] = tt
					}
					e.Type, e.Title = tt[0], tt[1]
				}
				entries = append(entries, e)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := fn(e); err != nil {
				return err
			}
			after = e.Seq
		}
		if len(entries) < journalBatch {
			return nil
		}
		if len(titles) > 4096 {
			clear(titles)
		}
	}
}
