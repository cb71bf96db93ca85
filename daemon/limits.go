package daemon

import (
	"net/http"

	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
)

// getLimits serves GET /v1/limits: the rate-limit state of every agent
// profile (`loopr limits`).
func (d *daemon) getLimits(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	limits, err := d.svc.Limits(d.svc.Now())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, limits)
}

// clearLimit serves POST /v1/limits/{agent}/clear (`loopr limits clear`):
// the profile's loops may start at once, and those held in needs_human
// for its limit go back to pending.
func (d *daemon) clearLimit(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	name := r.PathValue("agent")
	if !loop.ValidTypeName(name) {
		return control.Invalid("agent", "%q is not an agent profile name (up to 32 lowercase letters, digits, '-' and '_', starting with a letter)", name)
	}
	done, err := d.beginWrite()
	if err != nil {
		return err
	}
	defer done()
	res, err := d.svc.ClearLimit(name)
	d.hub.poke()
	if err != nil {
		return err
	}
	d.log.Info("rate limit cleared by user", "agent", name, "was_limited", res.Was.Limited, "released", len(res.Released))
	d.stopLoops(nil) // reschedule: the profile's loops may start
	return writeJSON(w, http.StatusOK, res)
}
