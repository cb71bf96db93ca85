package daemon

import (
	"context"
	"net/http"

	"github.com/loopr-dev/loopr/api"
)

// land serves POST /v1/loops/{id}/land (`loopr land`): the landing runs
// here, under the merge queue's locks on the plan branch (package
// landing), for as long as merge.validate takes.
func (d *daemon) land(w http.ResponseWriter, r *http.Request) error {
	id, req, done, err := loopWrite[api.LandRequest](d, w, r, true)
	if err != nil {
		return err
	}
	defer done()
	// A shutdown cancels it (merge.validate is stopped, nothing moves)
	// instead of waiting for it.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := d.stoppingCh()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	res, err := d.lander.Land(ctx, id, req)
	d.hub.poke()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}
