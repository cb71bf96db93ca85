package daemon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/cluster"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// Request body limits.
const (
	MaxBodyBytes   = 1 << 20   // JSON requests
	MaxImportBytes = 256 << 20 // POST /v1/import
)

// apiHandler serves one route; a returned error becomes an api.Error body
// (unless the handler already wrote a response).
type apiHandler func(w http.ResponseWriter, r *http.Request) error

// routes builds the API (SPEC §9). Every response, errors and unknown
// routes included, is JSON except the agent output (text) and the JSON
// Lines of export and events.
func (d *daemon) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h apiHandler) { mux.Handle(pattern, d.wrap(h)) }
	handle("GET /v1/status", d.getStatus)
	handle("GET /v1/loops", d.listLoops)
	handle("POST /v1/loops", d.needDisk(d.createLoop))
	handle("POST /v1/loops/batch", d.needDisk(d.createBatch))
	handle("GET /v1/loops/{id}", d.getLoop)
	handle("POST /v1/loops/{id}/{action}", d.act)
	handle("GET /v1/loops/{id}/why", d.why)
	handle("GET /v1/loops/{id}/usage", d.treeUsage)
	handle("GET /v1/loops/{id}/conflicts", d.conflicts)
	handle("GET /v1/loops/{id}/diff", d.diff) // diff.go
	handle("POST /v1/loops/{id}/budget", d.setBudget)
	handle("POST /v1/loops/{id}/comments", d.needDisk(d.addComment)) // comments.go
	handle("GET /v1/loops/{id}/comments", d.listComments)
	handle("POST /v1/loops/{id}/manual", d.recordManual) // comments.go
	handle("POST /v1/loops/{id}/land", d.land)           // landing.go
	handle("GET /v1/loops/{id}/output", d.output)
	handle("GET /v1/loops/{id}/log", d.agentLogRoute) // logs.go
	handle("GET /v1/scheduler", d.scheduler)
	handle("GET /v1/export", d.export)
	handle("POST /v1/import", d.needDisk(d.importLoops))
	handle("GET /v1/events", d.events)
	handle("GET /v1/journal", d.journalRoute) // journal.go
	handle("GET /v1/stats", d.getStats)
	handle("POST /v1/gc", d.postGC)
	handle("GET /v1/limits", d.getLimits)                 // limits.go
	handle("POST /v1/limits/{agent}/clear", d.clearLimit) // limits.go
	handle("POST /v1/web/login", d.webLogin)              // web.go
	handle("GET /metrics", d.getMetrics)
	handle("POST /v1/mcp", d.mcpCall) // mcp.go: also alone on <home>/mcp.sock
	return jsonFallback(mux)
}

// nowParam reads ?now=RFC3339, defaulting to the service clock.
func (d *daemon) nowParam(q url.Values) (time.Time, error) {
	s := q.Get("now")
	if s == "" {
		return d.svc.Now(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, control.Invalid("now", "bad time %q: want RFC 3339, e.g. 2025-01-02T15:04:05Z", s)
	}
	return t.UTC(), nil
}

// status is the store's status plus the daemon's own.
func (d *daemon) status() (api.Status, error) {
	now := d.svc.Now()
	st, err := d.svc.Status(now)
	if err != nil {
		return api.Status{}, err
	}
	st.Daemon = true
	st.PID = d.pid
	st.Version = d.o.Version
	st.Protocol = api.ProtocolVersion
	st.StartedAt = d.started
	st.UptimeSecs = max(0, int64(now.Sub(d.started)/time.Second))
	st.Accepting = d.isAccepting()
	st.Containment = d.jail.Mode()
	pol := control.Policy(d.svc.Config())
	st.Policy = &pol
	if d.warning != "" {
		st.Warning = d.warning
	}
	if w := d.diskWarning(); w != "" {
		st.Warning = strings.TrimPrefix(st.Warning+"; "+w, "; ")
	}
	if d.worker != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := cluster.Status(ctx, d.store, d.worker.Name(), d.worker.TTL())
		if err != nil {
			st.Warning = strings.TrimPrefix(st.Warning+"; workers: "+err.Error(), "; ")
		}
		st.Cluster = c
	}
	return st, nil
}

func (d *daemon) getStatus(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	st, err := d.status()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

func (d *daemon) listLoops(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "status", "type", "parent", "prefix", "suffix"); err != nil {
		return err
	}
	var req api.ListRequest
	for _, v := range q["status"] {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				req.Status = append(req.Status, loop.Status(part))
			}
		}
	}
	req.Type = q.Get("type")
	req.Parent = q.Get("parent")
	req.Prefix, req.Suffix = q.Get("prefix"), q.Get("suffix")
	if req.Prefix != "" || req.Suffix != "" {
		// Resolving an id prefix or short id: a few loops at most (control.MaxCandidates+1).
		loops, err := d.svc.List(req)
		if err != nil {
			return err
		}
		if loops == nil {
			loops = []loop.Loop{}
		}
		return writeJSON(w, http.StatusOK, loops)
	}
	// Streamed from the stored records (100k loops: no 100 MB buffer).
	w.Header().Set("Content-Type", "application/json")
	cw := &countingWriter{w: w}
	n, err := d.svc.WriteList(cw, req)
	if err != nil {
		if cw.n > 0 {
			d.log.Error("list", "err", err)
			panic(http.ErrAbortHandler) // a cut-off array must not look complete
		}
		return err
	}
	d.afterBigAnswer(n) // encoding 100k records leaves ~15 MB of garbage (memory.go)
	return nil          // the array ends with its newline
}

func (d *daemon) createLoop(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	var req api.CreateRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	done, err := d.beginWrite()
	if err != nil {
		return err
	}
	defer done()
	l, err := d.svc.Create(req)
	d.hub.poke()
	if err != nil {
		return err
	}
	d.mgr.Wake()
	w.Header().Set("Location", "/v1/loops/"+url.PathEscape(l.ID))
	return writeJSON(w, http.StatusCreated, l)
}

// MaxBatchBytes bounds the body of POST /v1/loops/batch (at most
// control.MaxBatch loops).
const MaxBatchBytes = 16 << 20

// createBatch creates the loops of a batch, each admitted or refused on its
// own, and answers 200 with a result per item (partial success). Only a
// malformed request (bad JSON, no items, too many) or a store failure is an
// error of the whole batch, and then nothing is created.
func (d *daemon) createBatch(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	var req api.BatchRequest
	if err := decodeBodyLimit(w, r, &req, false, MaxBatchBytes); err != nil {
		return err
	}
	done, err := d.beginWrite()
	if err != nil {
		return err
	}
	defer done()
	res, err := d.svc.CreateBatch(req.Loops)
	d.hub.poke()
	if err != nil {
		return err
	}
	if res.Created > 0 {
		d.mgr.Wake()
	}
	return writeJSON(w, http.StatusOK, res)
}

// loopID returns the {id} path value, refusing what cannot be a loop id.
func loopID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !loop.ValidID(id) {
		return "", control.Invalid("id", "%q is not a loop id (1-64 characters of A-Z a-z 0-9 _ -)", id)
	}
	return id, nil
}

// loopWrite reads a write to one loop: its id from the path, its body
// into a T (allowEmpty: no body is a zero T), then begins the write
// (refused while the daemon stops); done ends it.
func loopWrite[T any](d *daemon, w http.ResponseWriter, r *http.Request, allowEmpty bool) (id string, req T, done func(), err error) {
	if id, err = plainLoopID(r); err != nil {
		return "", req, nil, err
	}
	if err = decodeBody(w, r, &req, allowEmpty); err != nil {
		return "", req, nil, err
	}
	if done, err = d.beginWrite(); err != nil {
		return "", req, nil, err
	}
	return id, req, done, nil
}

// plainLoopID is loopID for a route that takes no query parameters.
func plainLoopID(r *http.Request) (string, error) {
	if err := checkQuery(r.URL.Query()); err != nil {
		return "", err
	}
	return loopID(r)
}

func (d *daemon) getLoop(w http.ResponseWriter, r *http.Request) error {
	id, err := plainLoopID(r)
	if err != nil {
		return err
	}
	l, err := d.svc.Get(id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, l)
}

func (d *daemon) act(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	action := r.PathValue("action")
	if !slices.Contains(api.Actions, action) {
		return control.Invalid("action", "unknown action %q (known: %s)", action, strings.Join(api.Actions, ", "))
	}
	id, err := loopID(r)
	if err != nil {
		return err
	}
	var req api.ActionRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		return err
	}
	done, err := d.beginWrite()
	if err != nil {
		return err
	}
	defer done()
	if action == api.ActionPause {
		if res, ok := d.pauseRunning(id); ok {
			return writeJSON(w, http.StatusOK, res)
		}
	}
	res, err := d.svc.Act(id, action, req)
	d.hub.poke()
	if err != nil {
		return err
	}
	if res.Affected == nil {
		res.Affected = []string{}
	}
	ids := res.Affected
	if !slices.Contains(ids, id) {
		ids = append(slices.Clip(ids), id)
	}
	d.stopLoops(ids)
	if res.Loop.Status == loop.Merging && d.mgr != nil {
		d.mgr.WakeMerges() // an approved review
	}
	if res.Loop.Status.Terminal() && d.mgr != nil {
		d.mgr.TidyTree(r.Context(), id) // a cancelled or rejected tree's worktrees go
	}
	return writeJSON(w, http.StatusOK, res)
}

// pauseRunning stops the agent of id when it runs on this daemon: the
// manager then pauses the loop at the same iteration (Manager.Pause). The
// loop is answered still running; ok is false when it does not run here.
func (d *daemon) pauseRunning(id string) (api.ActionResult, bool) {
	if d.mgr == nil {
		return api.ActionResult{}, false
	}
	l, err := d.svc.Get(id)
	if err != nil || l.Status != loop.Running || !d.mgr.Pause(l.ID) {
		return api.ActionResult{}, false
	}
	return api.ActionResult{Loop: l, Affected: []string{}}, true
}

// treeUsage answers what a loop and its descendants consumed.
func (d *daemon) treeUsage(w http.ResponseWriter, r *http.Request) error {
	id, err := plainLoopID(r)
	if err != nil {
		return err
	}
	u, err := d.svc.TreeUsageOf(id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, u)
}

// conflicts serves GET /v1/loops/{id}/conflicts: the conflict radar over
// the tree that holds the loop.
func (d *daemon) conflicts(w http.ResponseWriter, r *http.Request) error {
	id, err := plainLoopID(r)
	if err != nil {
		return err
	}
	c, err := d.svc.Conflicts(r.Context(), d.radar, id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, c)
}

// setBudget changes a loop's budget and resumes the loops it freed.
func (d *daemon) setBudget(w http.ResponseWriter, r *http.Request) error {
	id, req, done, err := loopWrite[api.BudgetRequest](d, w, r, false)
	if err != nil {
		return err
	}
	defer done()
	res, err := d.svc.SetBudget(id, req)
	d.hub.poke()
	if err != nil {
		return err
	}
	d.stopLoops(nil) // reschedule: resumed loops may start
	return writeJSON(w, http.StatusOK, res)
}

// stopLoops asks the manager to kill the agents of ids (cancelled or
// invalidated loops) and to reschedule.
func (d *daemon) stopLoops(ids []string) {
	select {
	case <-d.mgrStopped:
		return // nothing runs any more
	default:
	}
	d.mgr.Stop(ids)
}

func (d *daemon) why(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "now"); err != nil {
		return err
	}
	id, err := loopID(r)
	if err != nil {
		return err
	}
	now, err := d.nowParam(q)
	if err != nil {
		return err
	}
	why, err := d.svc.Why(id, now)
	if err != nil {
		return err
	}
	if why.Conflicts, err = d.svc.ConflictsOf(r.Context(), d.radar, id); err != nil {
		why.ConflictCheck = err.Error()
	}
	if ix := d.svc.Index(); ix != nil { // why plans every waiting loop
		_, waiting := ix.Len()
		d.afterBigAnswer(waiting)
	}
	return writeJSON(w, http.StatusOK, why)
}

func (d *daemon) scheduler(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "now"); err != nil {
		return err
	}
	now, err := d.nowParam(q)
	if err != nil {
		return err
	}
	// Streamed row by row (100k waiting loops: no 30 MB buffer).
	w.Header().Set("Content-Type", "application/json")
	cw := &countingWriter{w: w}
	rows, err := d.svc.WriteScheduler(cw, now)
	if err != nil {
		if cw.n > 0 {
			d.log.Error("scheduler", "err", err)
			panic(http.ErrAbortHandler) // a cut-off plan must not look complete
		}
		return err
	}
	d.afterBigAnswer(rows) // memory.go
	return nil             // the view ends with its newline
}

// countingWriter counts the bytes that reached w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (d *daemon) export(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	// Export holds a read transaction while it writes; buffer generously
	// so a slow reader delays writers as little as possible.
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	w.Header().Set("Content-Type", "application/jsonl")
	_, err := d.store.Export(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil && cw.n > 0 {
		d.log.Error("export", "err", err)
		panic(http.ErrAbortHandler) // a cut-off export must not look complete
	}
	return err
}

func (d *daemon) importLoops(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	loops, err := store.ReadJSONL(http.MaxBytesReader(w, r.Body, MaxImportBytes))
	if err != nil {
		if tl := tooLarge(err); tl != err {
			return tl
		}
		return control.Invalid("import", "%v", err)
	}
	done, err := d.beginWrite()
	if err != nil {
		return err
	}
	defer done()
	n, err := d.svc.Import(loops)
	d.hub.poke()
	if err != nil {
		return importError(err)
	}
	d.mgr.Wake()
	return writeJSON(w, http.StatusOK, api.ImportResult{Imported: n})
}

// importError classifies an import failure: the records came from the
// user, so anything but a system error (disk, I/O) is invalid input.
func importError(err error) error {
	var errno syscall.Errno
	var pe *os.PathError
	if errors.As(err, &errno) || errors.As(err, &pe) {
		return err
	}
	if s, _ := errorStatus(err); s != http.StatusInternalServerError {
		return err
	}
	return control.Invalid("", "%v", err)
}

// getMetrics serves GET /metrics from the daemon's Prometheus registry.
func (d *daemon) getMetrics(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	d.metrics.handler().ServeHTTP(w, r)
	return nil
}

// getStats serves GET /v1/stats: the store's summary and what the daemon
// measured since it started.
func (d *daemon) getStats(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	now := d.svc.Now()
	st, err := d.svc.Stats(now)
	if err != nil {
		return err
	}
	st.Daemon = true
	st.Since = d.started
	st.UptimeSecs = max(0, int64(now.Sub(d.started)/time.Second))
	d.metrics.stats(&st)
	return writeJSON(w, http.StatusOK, st)
}
