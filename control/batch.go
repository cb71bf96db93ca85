package control

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// MaxBatch is the most loops one batch may create.
const MaxBatch = 1000

// CreateBatch creates the loops of reqs in one transaction, each admitted
// or refused on its own: a refused item (bad input, unknown parent) is
// reported in its result and the others are still created. Only a failure
// of the store itself fails the whole batch, and then nothing is created.
func (s *Service) CreateBatch(reqs []api.CreateRequest) (api.BatchResult, error) {
	switch n := len(reqs); {
	case n == 0:
		return api.BatchResult{}, Invalid("loops", "empty: want at least one loop")
	case n > MaxBatch:
		return api.BatchResult{}, Invalid("loops", "%d loops: at most %d per batch", n, MaxBatch)
	}
	now := s.Now()
	var res api.BatchResult
	err := s.Store.Update(func(tx *store.Tx) error {
		res = api.BatchResult{Results: make([]api.BatchItem, len(reqs))}
		for i, req := range reqs {
			item := api.BatchItem{Index: i}
			l, err := s.CreateIn(tx, req, now)
			switch {
			case err == nil:
				item.ID, item.Loop = l.ID, &l
				res.Created++
			case IsUsage(err):
				item.Error = ItemError(err)
				res.Failed++
			default:
				return fmt.Errorf("loops[%d]: %w", i, err)
			}
			res.Results[i] = item
		}
		return nil
	})
	if err != nil {
		return api.BatchResult{}, err
	}
	return res, nil
}

// ItemError is the api.ErrorBody of a refused batch item: the code the
// daemon would answer for the same error on POST /v1/loops, and a message
// that names the JSON field (type, max_iterations) rather than the flag.
func ItemError(err error) *api.ErrorBody {
	code := api.CodeInvalid
	var te *loop.TransitionError
	var le *LimitError
	switch {
	case errors.As(err, &le):
		code = le.Code
	case errors.Is(err, store.ErrNotFound):
		code = api.CodeNotFound
	case errors.As(err, &te), errors.Is(err, store.ErrExists):
		code = api.CodeConflict
	case !IsUsage(err):
		code = api.CodeInternal
	}
	return &api.ErrorBody{Code: code, Message: JSONMessage(err)}
}

// flagPrefix matches a message that starts with a flag name.
var flagPrefix = regexp.MustCompile(`^--([a-z][a-z-]*):`)

// JSONMessage is err's message with a leading flag name (--max-iterations)
// replaced by the JSON field name (max_iterations) an API caller sent.
func JSONMessage(err error) string {
	msg := err.Error()
	if m := flagPrefix.FindStringSubmatch(msg); m != nil {
		msg = strings.ReplaceAll(m[1], "-", "_") + msg[len(m[0])-1:]
	}
	return msg
}
