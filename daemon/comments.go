package daemon

import (
	"net/http"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/review"
)

// addComment serves POST /v1/loops/{id}/comments: a line comment, carried
// to the loop that wrote the line (package review), which it re-opens.
func (d *daemon) addComment(w http.ResponseWriter, r *http.Request) error {
	id, req, done, err := loopWrite[api.CommentRequest](d, w, r, false)
	if err != nil {
		return err
	}
	defer done()
	var g review.Git
	if d.git != nil {
		g = d.git
	}
	c, err := review.Add(r.Context(), d.svc, g, id, req)
	d.hub.poke()
	if err != nil {
		return err
	}
	if d.mgr != nil {
		d.mgr.Wake() // a re-opened loop is pending
	}
	return writeJSON(w, http.StatusOK, c)
}

// listComments serves GET /v1/loops/{id}/comments: the comments of the
// loop and of every loop below it, with their states.
func (d *daemon) listComments(w http.ResponseWriter, r *http.Request) error {
	id, err := plainLoopID(r)
	if err != nil {
		return err
	}
	cs, err := review.List(d.svc, id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, cs)
}

// recordManual serves POST /v1/loops/{id}/manual: the journal of what a
// person did by hand on a paused loop (loopr attach).
func (d *daemon) recordManual(w http.ResponseWriter, r *http.Request) error {
	id, req, done, err := loopWrite[api.ManualRequest](d, w, r, false)
	if err != nil {
		return err
	}
	defer done()
	err = d.svc.RecordManual(id, req)
	d.hub.poke()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, struct{}{})
}
