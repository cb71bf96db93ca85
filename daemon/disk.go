package daemon

import (
	"errors"
	"net/http"
	"strings"
	"syscall"

	"github.com/loopr-dev/loopr/control"
)

// A full disk (RELIABILITY.md): below control.DiskFloorBytes free on the
// home's file system, status reports disk_full (and disk_low), no loop
// starts, and the routes that add work answer 503 with a message that says
// so, before they write anything. A write that still meets ENOSPC (the
// disk filled between the check and the commit, or an action) is rolled
// back by bbolt and answered the same way. Nothing is lost; work resumes
// when space returns.

// needDisk refuses h's request with a *control.DiskFullError (503) while
// the home's disk is full.
func (d *daemon) needDisk(h apiHandler) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := d.svc.DiskFull(); err != nil {
			return err
		}
		return h(w, r)
	}
}

// diskMessage explains a write that failed with ENOSPC.
func diskMessage(err error, msg string) string {
	var full *control.DiskFullError
	if !errors.Is(err, syscall.ENOSPC) || errors.As(err, &full) || strings.HasPrefix(msg, "disk full") {
		return msg
	}
	return "disk full: " + msg + "; nothing was changed: free some space on the home's file system and retry"
}

// diskWarning is the status warning while the disk is full, "" otherwise.
func (d *daemon) diskWarning() string {
	if err := d.svc.DiskFull(); err != nil {
		return err.Error()
	}
	return ""
}
