package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/daemon"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

func TestStatusReportsTheDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, newPaths(t), testConfig())
	st, err := d.c.Status(context.Background())
	if err != nil {
		t.Fatalf("Status() = %v", err)
	}
	if !st.Daemon || st.PID != os.Getpid() || st.Version != "test" || st.Protocol != api.ProtocolVersion || !st.Accepting {
		t.Errorf("Status() = daemon %v pid %d version %q protocol %d accepting %v; want true %d test %d true",
			st.Daemon, st.PID, st.Version, st.Protocol, st.Accepting, os.Getpid(), api.ProtocolVersion)
	}
	if st.StartedAt.IsZero() || st.Home != d.paths.Home {
		t.Errorf("Status() started_at %v home %q; want set, %q", st.StartedAt, st.Home, d.paths.Home)
	}
	if got := d.c.DaemonPID(); got != os.Getpid() {
		t.Errorf("DaemonPID() = %d, want %d", got, os.Getpid())
	}

	hc := socketHTTP(d.paths.Socket())
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://loopr/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`loopr_loops{status="pending",type="ralph"} 0`, "# TYPE loopr_running gauge", `loopr_running{type="ralph"} 0`, "loopr_rate_limited 0"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestLoopOperations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startDaemon(t, newPaths(t), testConfig())
	c := d.c

	a := create(t, c, "alpha", false)
	b := create(t, c, "beta", false)
	if a.Status != loop.Pending || a.Iteration != 1 || a.Title != "alpha" {
		t.Errorf("Create() = status %s iteration %d title %q; want pending 1 alpha", a.Status, a.Iteration, a.Title)
	}

	got, err := c.Get(ctx, a.ID)
	if err != nil {
		t.Fatalf("Get() = %v", err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("Get() mismatch (-want +got):\n%s", diff)
	}

	list, err := c.List(ctx, api.ListRequest{Status: []loop.Status{loop.Pending}, Type: loop.Ralph})
	if err != nil {
		t.Fatalf("List() = %v", err)
	}
	var ids []string
	for _, l := range list {
		ids = append(ids, l.ID)
	}
	if diff := cmp.Diff([]string{a.ID, b.ID}, ids); diff != "" {
		t.Errorf("List() ids mismatch (-want +got):\n%s", diff)
	}

	why, err := c.Why(ctx, a.ID, time.Time{})
	if err != nil {
		t.Fatalf("Why() = %v", err)
	}
	if !why.Scheduled || why.Row.Runnable || !slices.Contains(why.Row.Reasons, "backoff") {
		t.Errorf("Why() = scheduled %v runnable %v reasons %v; want true false [backoff]", why.Scheduled, why.Row.Runnable, why.Row.Reasons)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if why, err = c.Why(ctx, a.ID, at); err != nil || !why.Now.Equal(at) {
		t.Errorf("Why(now=%v) = now %v, %v; want the instant asked for", at, why.Now, err)
	}

	view, err := c.Scheduler(ctx, time.Time{})
	if err != nil {
		t.Fatalf("Scheduler() = %v", err)
	}
	if view.Waiting != 2 || len(view.Rows) != 2 {
		t.Errorf("Scheduler() = waiting %d rows %d; want 2 2", view.Waiting, len(view.Rows))
	}

	res, err := c.Act(ctx, a.ID, api.ActionPause, api.ActionRequest{})
	if err != nil || res.Loop.Status != loop.Paused {
		t.Fatalf("Act(pause) = %s, %v; want paused", res.Loop.Status, err)
	}
	if res, err = c.Act(ctx, a.ID, api.ActionResume, api.ActionRequest{}); err != nil || res.Loop.Status != loop.Pending {
		t.Fatalf("Act(resume) = %s, %v; want pending", res.Loop.Status, err)
	}
	if res, err = c.Act(ctx, a.ID, api.ActionCancel, api.ActionRequest{Reason: "not needed"}); err != nil ||
		res.Loop.Status != loop.Cancelled || res.Loop.Reason != "not needed" {
		t.Fatalf("Act(cancel) = %s %q, %v; want cancelled \"not needed\"", res.Loop.Status, res.Loop.Reason, err)
	}
	_, err = c.Act(ctx, a.ID, api.ActionResume, api.ActionRequest{})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != api.CodeConflict || !ae.Usage() {
		t.Errorf("Act(resume cancelled) = %v; want a 409 conflict APIError", err)
	}
	_, err = c.Get(ctx, "no-such-loop")
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != api.CodeNotFound || !ae.Usage() {
		t.Errorf("Get(unknown) = %v; want a 404 not_found APIError", err)
	}

	st, err := c.Status(ctx)
	if err != nil {
		t.Fatalf("Status() = %v", err)
	}
	if st.Counts[loop.Pending] != 1 || st.Counts[loop.Cancelled] != 1 {
		t.Errorf("Status().Counts = %v; want pending 1, cancelled 1", st.Counts)
	}
}

func TestExportImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := startDaemon(t, newPaths(t), testConfig())
	for _, title := range []string{"one", "two", "three"} {
		create(t, src.c, title, false)
	}
	var buf bytes.Buffer
	n, err := src.c.Export(ctx, &buf)
	if err != nil || n != 3 {
		t.Fatalf("Export() = %d, %v; want 3", n, err)
	}
	loops, err := store.ReadJSONL(&buf)
	if err != nil {
		t.Fatalf("ReadJSONL(export) = %v", err)
	}

	dst := startDaemon(t, newPaths(t), testConfig())
	if n, err := dst.c.Import(ctx, loops); err != nil || n != 3 {
		t.Fatalf("Import() = %d, %v; want 3", n, err)
	}
	got, err := dst.c.List(ctx, api.ListRequest{})
	if err != nil {
		t.Fatalf("List() = %v", err)
	}
	if diff := cmp.Diff(loops, got); diff != "" {
		t.Errorf("imported loops mismatch (-want +got):\n%s", diff)
	}
	// All or nothing: one id already there refuses the whole batch.
	extra := loops[0]
	extra.ID = "fresh-1"
	_, err = dst.c.Import(ctx, []loop.Loop{extra, loops[1]})
	var ae *client.APIError
	if !errors.As(err, &ae) || !ae.Usage() {
		t.Errorf("Import(existing id) = %v; want a 4xx APIError", err)
	}
	if _, err := dst.c.Get(ctx, "fresh-1"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("after a refused import, Get(fresh-1) = %v; want 404", err)
	}
}

func TestEventStream(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startDaemon(t, newPaths(t), testConfig())
	old := create(t, d.c, "before the stream", false)
	ch, err := d.c.Events(ctx)
	if err != nil {
		t.Fatalf("Events() = %v", err)
	}
	snap := waitFor(t, ch, 5*time.Second, "snapshot", func(m api.StreamMsg) bool { return true })
	if snap.Type != api.StreamSnapshot || snap.Status == nil || !snap.Status.Daemon || snap.Seq == 0 {
		t.Fatalf("first message = %s (status %v, seq %d); want a snapshot with the daemon status and seq", snap.Type, snap.Status, snap.Seq)
	}
	if len(snap.Loops) != 1 || snap.Loops[0].ID != old.ID {
		t.Errorf("snapshot loops = %v; want [%s]", snap.Loops, old.ID)
	}

	began := time.Now()
	l := create(t, d.c, "runs now", true)
	m := waitFor(t, ch, 5*time.Second, "created event", func(m api.StreamMsg) bool {
		return m.Type == api.StreamEvent && m.Event.Loop == l.ID && m.Event.Kind == loop.EventCreated
	})
	took := time.Since(began)
	if took > 200*time.Millisecond {
		t.Errorf("created event arrived %s after the create call began; want < 200ms", took)
	}
	t.Logf("create → event on the stream: %s", took)
	if m.Loop == nil || m.Loop.ID != l.ID || m.Seq <= snap.Seq {
		t.Errorf("created event: loop %v seq %d; want the loop, seq > %d", m.Loop, m.Seq, snap.Seq)
	}

	// The agent (`true`) runs and the loop completes; each step is pushed.
	waitFor(t, ch, 10*time.Second, "running transition", func(m api.StreamMsg) bool {
		return m.Type == api.StreamEvent && m.Event.Loop == l.ID && m.Event.To == loop.Running
	})
	done := waitFor(t, ch, 10*time.Second, "complete transition", func(m api.StreamMsg) bool {
		return m.Type == api.StreamEvent && m.Event.Loop == l.ID && m.Event.To == loop.Complete
	})
	if done.Loop.Status != loop.Complete {
		t.Errorf("loop with the complete event = %s; want complete", done.Loop.Status)
	}
	st := waitFor(t, ch, 5*time.Second, "status update", func(m api.StreamMsg) bool { return m.Type == api.StreamStatus })
	if st.Status == nil || !st.Status.Daemon {
		t.Errorf("status message = %+v; want the daemon status", st.Status)
	}

	// The daemon's own stop is the last thing a stream sees.
	d.cancel()
	waitFor(t, ch, 10*time.Second, "daemon stopping event", func(m api.StreamMsg) bool {
		return m.Type == api.StreamEvent && m.Event.Kind == loop.EventDaemon && m.Event.Message == "daemon stopping"
	})
	for range ch { // closes when the daemon hangs up
	}
}

func TestOutputTail(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startDaemon(t, newPaths(t), testConfig("sh", "-c", "echo hello-from-agent; printf 'last line\\n'"))
	ch, err := d.c.Events(ctx)
	if err != nil {
		t.Fatalf("Events() = %v", err)
	}
	l := create(t, d.c, "speaks", true)
	waitFor(t, ch, 10*time.Second, "complete transition", func(m api.StreamMsg) bool {
		return m.Type == api.StreamEvent && m.Event.Loop == l.ID && m.Event.To == loop.Complete
	})
	out, err := d.c.Output(ctx, l.ID, 0)
	if err != nil {
		t.Fatalf("Output() = %v", err)
	}
	if !strings.Contains(out, "hello-from-agent\nlast line\n") {
		t.Errorf("Output() = %q; want the agent's output", out)
	}
	if out, err := d.c.Output(ctx, l.ID, 10); err != nil || out != "last line\n" {
		t.Errorf("Output(10 bytes) = %q, %v; want %q", out, err, "last line\n")
	}
	pending := create(t, d.c, "silent", false)
	if out, err := d.c.Output(ctx, pending.ID, 0); err != nil || out != "" {
		t.Errorf("Output(never ran) = %q, %v; want empty", out, err)
	}
}

func TestModes(t *testing.T) {
	t.Parallel()
	paths := newPaths(t)
	if err := os.Mkdir(paths.Home, 0o755); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, paths, testConfig())
	fi, err := os.Stat(paths.Home)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("home mode = %o, want 700", got)
	}
	fi, err = os.Stat(paths.Socket())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket with mode 600", fi.Mode())
	}
	if b, err := os.ReadFile(paths.PIDFile()); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("pid file = %q, %v; want %d", b, err, os.Getpid())
	}
}

func TestSecondDaemonRefused(t *testing.T) {
	t.Parallel()
	paths := newPaths(t)
	startDaemon(t, paths, testConfig())

	run := func() (error, time.Duration) {
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), testslack.Scale(10*time.Second))
		defer cancel()
		err := daemon.Run(ctx, daemon.Options{Paths: paths, Config: testConfig(), Ready: func(int) {
			t.Error("second daemon became ready")
		}})
		return err, time.Since(began)
	}
	err, took := run()
	if err == nil || !strings.Contains(err.Error(), "daemon already running (pid "+strconv.Itoa(os.Getpid())+")") || took > 2*time.Second {
		t.Errorf("second daemon.Run() = %v after %s; want \"daemon already running (pid %d)\" within 2s", err, took, os.Getpid())
	}

	// Without the socket, the store lock still refuses it, naming the pid.
	if err := os.Remove(paths.Socket()); err != nil {
		t.Fatal(err)
	}
	err, took = run()
	if err == nil || !strings.Contains(err.Error(), "in use by pid "+strconv.Itoa(os.Getpid())) || took > 2500*time.Millisecond {
		t.Errorf("second daemon.Run() without socket = %v after %s; want \"in use by pid %d\" within ~2s", err, took, os.Getpid())
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	t.Parallel()
	paths := newPaths(t)
	if err := os.MkdirAll(paths.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", paths.Socket())
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // leaves the file of a crashed daemon behind
	d := startDaemon(t, paths, testConfig())
	if _, err := d.c.Status(context.Background()); err != nil {
		t.Errorf("Status() over the replaced socket = %v", err)
	}
}

// TestSocketThatOnlyAcceptsIsReplaced: a crashed daemon's child caught
// between fork and exec holds the daemon's listener for a moment; the
// socket accepts connections and answers nothing. A daemon started then
// must not take it for a running daemon.
func TestSocketThatOnlyAcceptsIsReplaced(t *testing.T) {
	t.Parallel()
	paths := newPaths(t)
	if err := os.MkdirAll(paths.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", paths.Socket())
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	defer ln.Close() // open, never accepting: connects succeed, nothing answers
	d := startDaemon(t, paths, testConfig())
	if _, err := d.c.Status(context.Background()); err != nil {
		t.Errorf("Status() over the replaced socket = %v", err)
	}
}

func TestShutdown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	paths := newPaths(t)
	d := startDaemon(t, paths, testConfig("sleep", "60"))
	ch, err := d.c.Events(ctx)
	if err != nil {
		t.Fatalf("Events() = %v", err)
	}
	l := create(t, d.c, "long", true)
	waitFor(t, ch, 10*time.Second, "running transition", func(m api.StreamMsg) bool {
		return m.Type == api.StreamEvent && m.Event.Loop == l.ID && m.Event.To == loop.Running
	})

	began := time.Now()
	if err := d.stop(t); err != nil {
		t.Fatalf("daemon.Run() = %v after cancel; want nil", err)
	}
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("shutdown with a running agent took %s", took)
	}
	for _, p := range []string{paths.Socket(), paths.PIDFile()} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after shutdown, stat %s = %v; want it removed", p, err)
		}
	}
	st, err := store.Open(paths.DB(), store.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("store.Open() after shutdown = %v; want the store closed", err)
	}
	defer st.Close()
	got, err := st.Get(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != loop.Pending || got.Iteration != 1 {
		t.Errorf("after a clean stop the running loop is %s at iteration %d; want pending at 1", got.Status, got.Iteration)
	}
	var daemonEvents []string
	st.View(func(tx *store.Tx) error {
		evs, err := tx.EventsSince(0, 0)
		for _, ev := range evs {
			if ev.Kind == loop.EventDaemon {
				daemonEvents = append(daemonEvents, ev.Message)
			}
		}
		return err
	})
	if diff := cmp.Diff([]string{"daemon started", "daemon stopping"}, daemonEvents); diff != "" {
		t.Errorf("daemon events mismatch (-want +got):\n%s", diff)
	}
}

func TestCreateBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startDaemon(t, newPaths(t), testConfig())
	parent := create(t, d.c, "parent", false)
	reqs := []api.CreateRequest{
		{Type: loop.Ralph, Title: "b1", RunnableAt: later()},
		{Type: loop.Ralph, Title: "b2", RunnableAt: later(), Parent: parent.ID},
		{Type: loop.Ralph, Title: "b3", RunnableAt: later()},
	}
	got, err := d.c.CreateBatch(ctx, reqs)
	if err != nil || got.Created != 3 || got.Failed != 0 || len(got.Results) != 3 {
		t.Fatalf("CreateBatch() = %+v, %v; want 3 created", got, err)
	}
	for i, r := range got.Results {
		if r.Index != i || r.Error != nil || r.Loop == nil || r.ID != r.Loop.ID || r.Loop.Title != reqs[i].Title || r.Loop.Status != loop.Pending {
			t.Errorf("CreateBatch().Results[%d] = %+v; want %q pending", i, r, reqs[i].Title)
		}
	}
	if l := got.Results[1].Loop; l.Parent != parent.ID || l.Depth != 1 {
		t.Errorf("batch child: parent %q depth %d; want %q 1", l.Parent, l.Depth, parent.ID)
	}

	// Partial success: bad items are refused with their own errors, the
	// others are created.
	mixed := []api.CreateRequest{
		{Type: loop.Ralph, Title: "ok1", RunnableAt: later()},
		{Type: "dragon", Title: "bad type"},
		{Type: loop.Ralph, Title: "orphan", Parent: "nosuchloop"},
		{Type: loop.Ralph, MaxIterations: -1, Title: "bad budget"},
		{Type: loop.Ralph, Title: "ok2", RunnableAt: later()},
	}
	got, err = d.c.CreateBatch(ctx, mixed)
	if err != nil {
		t.Fatalf("CreateBatch(mixed) = %v; want per-item results", err)
	}
	type outcome struct {
		Index         int
		Created       bool
		Code, Message string
	}
	var outcomes []outcome
	for _, r := range got.Results {
		o := outcome{Index: r.Index, Created: r.Loop != nil && r.ID != ""}
		if r.Error != nil {
			o.Code, o.Message = r.Error.Code, r.Error.Message
		}
		outcomes = append(outcomes, o)
	}
	want := []outcome{
		{0, true, "", ""},
		{1, false, api.CodeInvalid, `type: unknown type "dragon" (known: plan, spec, phase, ralph)`},
		{2, false, api.CodeNotFound, "parent: loop nosuchloop: not found"},
		{3, false, api.CodeInvalid, "max_iterations: must be > 0"},
		{4, true, "", ""},
	}
	if diff := cmp.Diff(want, outcomes); diff != "" {
		t.Errorf("CreateBatch(mixed) mismatch (-want +got):\n%s", diff)
	}
	if got.Created != 2 || got.Failed != 3 {
		t.Errorf("CreateBatch(mixed) created %d failed %d; want 2 3", got.Created, got.Failed)
	}
	all, err := d.c.List(ctx, api.ListRequest{})
	if err != nil || len(all) != 6 {
		t.Errorf("after a partial batch, List() = %d loops, %v; want 6", len(all), err)
	}

	// The request as a whole can still be refused: then nothing is created.
	var ae *client.APIError
	if _, err := d.c.CreateBatch(ctx, nil); !errors.As(err, &ae) || ae.Status != 400 || !strings.HasPrefix(ae.Message, "loops: empty") {
		t.Errorf("CreateBatch(none) = %v; want 400 loops: empty", err)
	}
	tooMany := make([]api.CreateRequest, control.MaxBatch+1)
	for i := range tooMany {
		tooMany[i] = api.CreateRequest{Type: loop.Ralph, Title: "x"}
	}
	if _, err := d.c.CreateBatch(ctx, tooMany); !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "at most 1000") {
		t.Errorf("CreateBatch(1001) = %v; want 400 at most 1000", err)
	}
	huge := []api.CreateRequest{{Type: loop.Ralph, Title: "x", Task: strings.Repeat("x", daemon.MaxBatchBytes)}}
	if _, err := d.c.CreateBatch(ctx, huge); !errors.As(err, &ae) || ae.Status != 413 {
		t.Errorf("CreateBatch(17 MiB) = %v; want 413", err)
	}
	if all, _ := d.c.List(ctx, api.ListRequest{}); len(all) != 6 {
		t.Errorf("after refused batches, List() = %d loops; want 6", len(all))
	}
}

// TestSlowSubscriberBlocksNobody parks one stream that never reads while
// 1000 loops are created: the API keeps answering, and another stream gets
// every event, in order, none lost.
func TestSlowSubscriberBlocksNobody(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startDaemon(t, newPaths(t), testConfig())

	stuck, err := net.Dial("unix", d.paths.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if _, err := stuck.Write([]byte("GET /v1/events HTTP/1.1\r\nHost: loopr\r\n\r\n")); err != nil {
		t.Fatal(err)
	}

	ch, err := d.c.Events(ctx)
	if err != nil {
		t.Fatalf("Events() = %v", err)
	}
	snap := <-ch
	const n = 1000
	reqs := make([]api.CreateRequest, n)
	for i := range reqs {
		reqs[i] = api.CreateRequest{Type: loop.Ralph, Title: "bulk " + strconv.Itoa(i), Task: strings.Repeat("words ", 50), RunnableAt: later()}
	}
	if _, err := d.c.CreateBatch(ctx, reqs); err != nil {
		t.Fatalf("CreateBatch() = %v", err)
	}
	sctx, scancel := context.WithTimeout(ctx, testslack.Scale(5*time.Second))
	defer scancel()
	if _, err := d.c.Status(sctx); err != nil {
		t.Fatalf("Status() with a stuck stream = %v", err)
	}
	seq, created := snap.Seq, 0
	waitFor(t, ch, 20*time.Second, "all created events", func(m api.StreamMsg) bool {
		if m.Type != api.StreamEvent {
			return false
		}
		if m.Seq != seq+1 {
			t.Fatalf("event seq %d after %d: a gap", m.Seq, seq)
		}
		seq = m.Seq
		if m.Event.Kind == loop.EventCreated {
			created++
		}
		return created == n
	})
}

// TestSnapshotIncludesAncestors: a pending loop under parents that finished
// long ago still arrives with them, so a dashboard draws the real tree.
func TestSnapshotIncludesAncestors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startDaemon(t, newPaths(t), testConfig())
	old := time.Now().Add(-72 * time.Hour).UTC().Truncate(time.Millisecond)
	mk := func(id, typ, parent string, st loop.Status) loop.Loop {
		l := loop.Loop{ID: id, Type: typ, Status: st, Parent: parent, Title: id, Iteration: 1, MaxIterations: 3,
			CreatedAt: old, UpdatedAt: old, RunnableAt: later()}
		if st.Terminal() {
			l.FinishedAt = old
		}
		return l
	}
	loops := []loop.Loop{
		mk("root", loop.Plan, "", loop.Complete),
		mk("mid", loop.Spec, "root", loop.Complete),
		mk("leaf", loop.Phase, "mid", loop.Pending),
		mk("gone", loop.Plan, "", loop.Complete), // old, terminal, nobody's ancestor: not sent
	}
	if _, err := d.c.Import(ctx, loops); err != nil {
		t.Fatal(err)
	}
	ch, err := d.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snap := waitFor(t, ch, 5*time.Second, "snapshot", func(m api.StreamMsg) bool { return m.Type == api.StreamSnapshot })
	var ids []string
	for _, l := range snap.Loops {
		ids = append(ids, l.ID)
	}
	if diff := cmp.Diff([]string{"leaf", "mid", "root"}, ids); diff != "" {
		t.Errorf("snapshot ids mismatch (-want +got):\n%s", diff)
	}
}
