package control

import (
	"io"
	"strings"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/store"
)

// WriteList writes the loops req selects to w as one JSON array in id
// order and a newline — the bytes of json.Marshal(List(req)) — streamed
// from the stored records one at a time (store.WriteJSON). Bad input is
// refused before anything is written.
func (s *Service) WriteList(w io.Writer, req api.ListRequest) (int, error) {
	for _, st := range req.Status {
		if !st.Valid() {
			return 0, Invalid("--status", "unknown status %q (known: %s)", st, statusNames())
		}
	}
	if req.Type != "" && !s.cfg().KnownType(req.Type) {
		return 0, Invalid("--type", "unknown type %q (known: %s)", req.Type, strings.Join(s.cfg().Types(), ", "))
	}
	return s.Store.WriteJSON(w, store.Filter{Statuses: req.Status, Type: req.Type, Parent: req.Parent})
}
