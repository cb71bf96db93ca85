package daemon

import (
	"net/http"
)

// diff serves GET /v1/loops/{id}/diff: what the loop's work changes,
// computed with the daemon's repository (with an etcd store, this
// worker's clone: its branches are fetched from git.remote first).
func (d *daemon) diff(w http.ResponseWriter, r *http.Request) error {
	id, err := plainLoopID(r)
	if err != nil {
		return err
	}
	out, err := d.svc.Diff(r.Context(), d.git, id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}
