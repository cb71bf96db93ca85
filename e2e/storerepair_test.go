package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/testslack"
	bolt "go.etcd.io/bbolt"
)

// damagedStore is a workspace whose store holds n loops (a plan and its
// ralph children, so both indexes span several pages), written by
// `loopr import` with no daemon.
func damagedStore(t *testing.T, n int) (dir, db string) {
	t.Helper()
	dir = t.TempDir()
	now := time.Now().UTC().Format(time.RFC3339)
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":"plan0","type":"plan","status":"complete","iteration":1,"max_iterations":10,"created_at":%q,"updated_at":%q,"title":"Plan"}`+"\n", now, now)
	for i := 1; i < n; i++ {
		st := []string{"pending", "paused", "complete", "failed"}[i%4]
		fmt.Fprintf(&b, `{"id":"task-%04d","type":"ralph","status":%q,"parent":"plan0","depth":1,"iteration":1,"max_iterations":5,"created_at":%q,"updated_at":%q,"title":"Task number %d with a title long enough to fill pages"}`+"\n", i, st, now, now, i)
	}
	seed := filepath.Join(t.TempDir(), "seed.jsonl")
	if err := os.WriteFile(seed, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, dir, "import", seed)
	return dir, filepath.Join(dir, ".loopr", "loopr.db")
}

// leafPages returns the page size of the bbolt file at path and the leaf
// pages of bucket's B+tree with their element counts. It asks bbolt for
// the bucket's root page, then follows the branch pages in the file's own
// layout (a 16-byte page header: id, flags, count, overflow; branch
// elements of 16 bytes: pos, ksize, child page id).
func leafPages(t *testing.T, path, bucket string) (pageSize int, leaves map[uint64]int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	if err := db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte(bucket)).RootPage())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pageSize = db.Info().PageSize
	db.Close()
	if root == 0 {
		t.Fatalf("bucket %s is inline: add more loops", bucket)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	leaves = map[uint64]int{}
	var walk func(id uint64)
	walk = func(id uint64) {
		p := file[int(id)*pageSize:]
		flags, count := binary.LittleEndian.Uint16(p[8:]), int(binary.LittleEndian.Uint16(p[10:]))
		switch {
		case flags&0x01 != 0: // branch
			for i := 0; i < count; i++ {
				walk(binary.LittleEndian.Uint64(p[16+16*i+8:]))
			}
		case flags&0x02 != 0: // leaf
			leaves[id] = count
		default:
			t.Fatalf("page %d of bucket %s has flags %#x", id, bucket, flags)
		}
	}
	walk(root)
	return pageSize, leaves
}

// smash overwrites the header and first elements of page id with bytes a
// disk or a stray write could leave, so bbolt can no longer read it.
func smash(t *testing.T, path string, pageSize int, id uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef\x1b[2J\x1b]52;c;x\a", 8))
	if _, err := f.WriteAt(junk, int64(id)*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
}

// noTrace fails when a command's output shows a Go panic or raw bytes of
// the damaged file.
func noTrace(t *testing.T, what string, r result) {
	t.Helper()
	for _, s := range []string{r.stdout, r.stderr} {
		if strings.Contains(s, "goroutine ") || strings.Contains(s, "panic") || strings.ContainsAny(s, "\x1b\a") {
			t.Errorf("%s printed a trace or raw bytes:\nstdout: %q\nstderr: %q", what, r.stdout, r.stderr)
		}
	}
}

var repairCounts = regexp.MustCompile(`recovered (\d+) loops, (\d+) journal events.*\nskipped (\d+) loops, (\d+) journal events`)

// TestStoreRepairDamagedIndexes: pages of both loop indexes smashed while
// no daemon runs. Commands that read them fail with one line naming
// `loopr store repair` (no trace); store check lists the problems and
// exits 1; store repair recovers every record and every event, keeps the
// damaged file, and the repaired store checks clean and serves again.
func TestStoreRepairDamagedIndexes(t *testing.T) {
	t.Parallel()
	const n = 300
	dir, db := damagedStore(t, n)
	if r := run(t, dir, "", "store", "check"); r.code != 0 || !strings.Contains(r.stdout, ": ok") {
		t.Fatalf("store check of a sound store: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, bucket := range []string{"idx_status", "idx_parent"} {
		ps, leaves := leafPages(t, db, bucket)
		if len(leaves) < 2 {
			t.Fatalf("%s has %d leaf pages, want several", bucket, len(leaves))
		}
		for id := range leaves {
			smash(t, db, ps, id)
			break
		}
	}

	for _, args := range [][]string{{"status"}, {"list", "--status", "pending,paused,complete,failed"}, {"list", "--parent", "plan0"}, {"cancel", "plan0"}} {
		r := run(t, dir, "", args...)
		noTrace(t, strings.Join(args, " "), r)
		if r.code != 1 || !strings.Contains(r.stderr, "is damaged") || !strings.Contains(r.stderr, "loopr store repair") ||
			strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("loopr %s on damaged indexes: exit %d, stderr %q; want exit 1 and one line naming loopr store repair",
				strings.Join(args, " "), r.code, r.stderr)
		}
	}

	r := run(t, dir, "", "store", "check")
	noTrace(t, "store check", r)
	if r.code != 1 || strings.Count(r.stdout, "\n") < 2 {
		t.Errorf("store check of damaged indexes: exit %d, want 1 with a line per problem:\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("store check:\n%s", r.stdout)

	r = run(t, dir, "", "store", "repair")
	noTrace(t, "store repair", r)
	if r.code != 0 {
		t.Fatalf("store repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("store repair:\n%s", r.stdout)
	m := repairCounts.FindStringSubmatch(r.stdout)
	if m == nil || m[1] != fmt.Sprint(n) || m[2] != fmt.Sprint(n) || m[3] != "0" || m[4] != "0" {
		t.Errorf("store repair counts %q, want %d loops and %d events recovered, none skipped", m, n, n)
	}
	backups, _ := filepath.Glob(db + ".broken-*")
	if len(backups) != 1 {
		t.Errorf("damaged file kept as %v, want one loopr.db.broken-<time>", backups)
	}
	if r := run(t, dir, "", "store", "check"); r.code != 0 {
		t.Errorf("store check after repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var st struct{ Counts map[string]int }
	mustJSON(t, ok(t, dir, "status", "--json"), &st)
	if total := st.Counts["pending"] + st.Counts["paused"] + st.Counts["complete"] + st.Counts["failed"]; total != n {
		t.Errorf("after repair status counts %v (%d loops), want %d", st.Counts, total, n)
	}
	if kids := ok(t, dir, "list", "--parent", "plan0"); strings.Count(kids, "task-") != n-1 {
		t.Errorf("after repair plan0 lists %d children, want %d", strings.Count(kids, "task-"), n-1)
	}
}

// TestStoreRepairDamagedRecords: a page of loop records smashed. Reading
// commands fail with one clear line (no trace, no raw bytes); store
// repair reports exactly the records on that page as skipped, names them,
// and recovers the rest.
func TestStoreRepairDamagedRecords(t *testing.T) {
	t.Parallel()
	const n = 300
	dir, db := damagedStore(t, n)
	ps, leaves := leafPages(t, db, "loops")
	if len(leaves) < 3 {
		t.Fatalf("loops has %d leaf pages, want several", len(leaves))
	}
	var victim uint64
	for id := range leaves {
		victim = max(victim, id) // any page but the first, whose ids sort first
	}
	lost := leaves[victim]
	smash(t, db, ps, victim)

	for _, args := range [][]string{{"list"}, {"export"}} {
		r := run(t, dir, "", args...)
		noTrace(t, strings.Join(args, " "), r)
		t.Logf("loopr %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		if r.code != 1 || !strings.Contains(r.stderr, "loopr store repair") {
			t.Errorf("loopr %s on damaged records: exit %d, stderr %q; want exit 1 naming loopr store repair", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	r := run(t, dir, "", "daemon")
	noTrace(t, "daemon", r)
	t.Logf("daemon on the damaged store: exit %d: %s", r.code, r.stderr)
	if r.code == 0 || !strings.Contains(r.stderr, "loopr store repair") {
		t.Errorf("daemon on a damaged store: exit %d, stderr %q; want a refusal naming loopr store repair", r.code, r.stderr)
	}

	if r := run(t, dir, "", "store", "check"); r.code != 1 {
		t.Errorf("store check: exit %d, want 1\n%s", r.code, r.stdout)
	}
	r = run(t, dir, "", "store", "repair")
	noTrace(t, "store repair", r)
	if r.code != 0 {
		t.Fatalf("store repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("store repair (page %d held %d records):\n%s", victim, lost, r.stdout)
	m := repairCounts.FindStringSubmatch(r.stdout)
	if m == nil || m[1] != fmt.Sprint(n-lost) || m[3] != fmt.Sprint(lost) {
		t.Errorf("store repair counts %q, want %d loops recovered and %d skipped", m, n-lost, lost)
	}
	if !strings.Contains(r.stdout, "lost loops: task-") {
		t.Errorf("store repair does not name the lost loops:\n%s", r.stdout)
	}
	if r := run(t, dir, "", "store", "check"); r.code != 0 {
		t.Errorf("store check after repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := strings.Count(ok(t, dir, "list"), "\n") - 1; got != n-lost {
		t.Errorf("list after repair shows %d loops, want %d", got, n-lost)
	}
}

// TestStoreRepairRefusesWhileDaemonRuns: check and repair work on the file
// with the daemon stopped; while one runs they say so and change nothing.
func TestStoreRepairRefusesWhileDaemonRuns(t *testing.T) {
	t.Parallel()
	r := newRepo(t, "storage:\n  disk_quota_min_gb: 0\n")
	d := startDaemon(t, r)
	ok(t, r.dir, "add", "--type", "ralph", "--title", "x", "--at", "2099-01-01T00:00:00Z")
	db := filepath.Join(r.home, "loopr.db")
	for _, verb := range []string{"check", "repair"} {
		res := run(t, r.dir, "", "store", verb)
		want := fmt.Sprintf("the daemon (pid %d) is running", d.cmd.Process.Pid)
		if res.code != 4 || !strings.Contains(res.stderr, want) { // 4: in use (1 is damaged)
			t.Errorf("store %s with a daemon: exit %d stderr %q, want 4 and %q", verb, res.code, res.stderr, want)
		}
	}
	// (The daemon writes the file itself, so its bytes may change; what
	// repair would leave may not appear.)
	if m, _ := filepath.Glob(db + ".*"); len(m) != 1 || !strings.HasSuffix(m[0], ".pid") {
		t.Errorf("files next to the store: %v, want the daemon's pid file only", m)
	}
	if got := len(list(t, r)); got != 1 {
		t.Errorf("list after the refusals: %d loops, want 1", got)
	}
}

// TestStoreRepairDamagedFreelist: the freelist page smashed. A read-write
// open (every command, the daemon) reads it and fails with the one line;
// repair does not need it and recovers everything.
func TestStoreRepairDamagedFreelist(t *testing.T) {
	t.Parallel()
	const n = 50
	dir, db := damagedStore(t, n)
	// Read-write: only then does bbolt load the freelist Tx.Page needs.
	bdb, err := bolt.Open(db, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var freelist uint64
	_ = bdb.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			if info.Type == "freelist" {
				freelist = uint64(id)
			}
		}
	})
	ps := bdb.Info().PageSize
	bdb.Close()
	if freelist == 0 {
		t.Fatal("no freelist page found")
	}
	smash(t, db, ps, freelist)

	r := run(t, dir, "", "list")
	noTrace(t, "list", r)
	if r.code != 1 || !strings.Contains(r.stderr, "loopr store repair") {
		t.Errorf("list with a damaged freelist: exit %d stderr %q, want 1 naming loopr store repair", r.code, r.stderr)
	}
	r = run(t, dir, "", "store", "repair")
	noTrace(t, "store repair", r)
	m := repairCounts.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[1] != fmt.Sprint(n) || m[3] != "0" {
		t.Fatalf("store repair: exit %d, counts %q; want %d loops, none skipped\n%s%s", r.code, m, n, r.stdout, r.stderr)
	}
	if got := strings.Count(ok(t, dir, "list"), "\n") - 1; got != n {
		t.Errorf("list after repair shows %d loops, want %d", got, n)
	}
}

// TestStoreRepairDanglingIndexEntry: one index entry naming no record (the
// pages themselves sound). The daemon refused to start with no way out;
// now it names the repair, store check names the entry, repair drops it
// and the daemon starts.
func TestStoreRepairDanglingIndexEntry(t *testing.T) {
	t.Parallel()
	r := newRepo(t, "storage:\n  disk_quota_min_gb: 0\n")
	ok(t, r.dir, "add", "--type", "ralph", "--title", "kept", "--at", "2099-01-01T00:00:00Z")
	db := filepath.Join(r.home, "loopr.db")
	bdb, err := bolt.Open(db, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("idx_status")).Put([]byte("running\x00ghost"), []byte{})
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()

	res := run(t, r.dir, "", "daemon")
	noTrace(t, "daemon", res)
	if res.code != 1 || !strings.Contains(res.stderr, "loop ghost: no record") || !strings.Contains(res.stderr, "loopr store repair") {
		t.Errorf("daemon on a dangling index entry: exit %d stderr %q, want 1 naming the entry and loopr store repair", res.code, res.stderr)
	}
	res = run(t, r.dir, "", "store", "check")
	if res.code != 1 || !strings.Contains(res.stdout, "index idx_status: loop ghost: no record") {
		t.Errorf("store check: exit %d stdout %q, want 1 naming the entry", res.code, res.stdout)
	}
	out := ok(t, r.dir, "store", "repair")
	if !strings.Contains(out, "recovered 1 loops") || !strings.Contains(out, "dropped 1 index entries") {
		t.Errorf("store repair output:\n%s", out)
	}
	startDaemon(t, r)
	if got := list(t, r); len(got) != 1 || got[0].Title != "kept" {
		t.Errorf("after repair the daemon lists %v", describe(got))
	}
}

// TestStoreRepairBranchPointsOutsideFile: a branch page of the loop
// records whose child id was flipped to a page far past the file's end.
// bbolt follows such a reference into unmapped memory; no command may die
// of it: reads fail with the one line, store check names the reference
// (and does not run bbolt's own check, whose goroutine cannot survive the
// fault), repair loses exactly the records of the unreachable leaf.
func TestStoreRepairBranchPointsOutsideFile(t *testing.T) {
	t.Parallel()
	const n = 300
	dir, db := damagedStore(t, n)
	bdb, err := bolt.Open(db, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	_ = bdb.View(func(tx *bolt.Tx) error { root = uint64(tx.Bucket([]byte("loops")).RootPage()); return nil })
	bdb.Close()
	ps, leaves := leafPages(t, db, "loops")
	file, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	rootPage := file[int(root)*ps:]
	if binary.LittleEndian.Uint16(rootPage[8:])&0x01 == 0 || binary.LittleEndian.Uint16(rootPage[10:]) < 2 {
		t.Fatal("the loops bucket's root is not a branch page with children: add more loops")
	}
	const elem = 16 + 16 // the second branch element
	child := binary.LittleEndian.Uint64(rootPage[elem+8:])
	lost, isLeaf := leaves[child]
	if !isLeaf {
		t.Fatalf("child page %d is not a leaf", child)
	}
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 4 GiB in: inside bbolt's address arithmetic, far outside the mapping.
	if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, 1<<20), int64(root)*int64(ps)+elem+8); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r := run(t, dir, "", "list")
	noTrace(t, "list", r)
	if r.code != 1 || !strings.Contains(r.stderr, "loopr store repair") {
		t.Errorf("list: exit %d stderr %q, want 1 naming loopr store repair", r.code, r.stderr)
	}
	r = run(t, dir, "", "store", "check")
	noTrace(t, "store check", r)
	if r.code != 1 || !strings.Contains(r.stdout, `bucket "loops": page 1048576 is outside the file's pages`) {
		t.Errorf("store check: exit %d, want 1 naming the reference\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, dir, "", "store", "repair")
	noTrace(t, "store repair", r)
	m := repairCounts.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[1] != fmt.Sprint(n-lost) || m[3] != fmt.Sprint(lost) {
		t.Errorf("store repair: exit %d counts %q, want %d recovered and %d skipped\n%s%s", r.code, m, n-lost, lost, r.stdout, r.stderr)
	}
	if r := run(t, dir, "", "store", "check"); r.code != 0 {
		t.Errorf("store check after repair: exit %d\n%s", r.code, r.stdout)
	}
}

// TestStoreRepairCyclicIndex: a branch page of idx_status whose second
// child id was flipped to the page's own id, so the tree loops back on
// itself. bbolt's descent into it never ends, so check and repair find the
// cycle with their own reads first: check names it and returns, repair
// leaves that index alone and rebuilds it from the records (all kept).
func TestStoreRepairCyclicIndex(t *testing.T) {
	t.Parallel()
	const n = 300
	dir, db := damagedStore(t, n)
	bdb, err := bolt.Open(db, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	_ = bdb.View(func(tx *bolt.Tx) error { root = uint64(tx.Bucket([]byte("idx_status")).RootPage()); return nil })
	ps := bdb.Info().PageSize
	bdb.Close()
	file, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if p := file[int(root)*ps:]; binary.LittleEndian.Uint16(p[8:])&0x01 == 0 || binary.LittleEndian.Uint16(p[10:]) < 2 {
		t.Fatal("idx_status's root is not a branch page with children: add more loops")
	}
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, root), int64(root)*int64(ps)+16+16+8); err != nil {
		t.Fatal(err)
	}
	f.Close()

	bounded := func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), testslack.Scale(30*time.Second))
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LOOPR_HOME=", "NO_COLOR=1")
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("loopr %s did not finish in 30s", strings.Join(args, " "))
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return result{so.String(), se.String(), code}
	}
	r := bounded("store", "check")
	noTrace(t, "store check", r)
	if r.code != 1 || !strings.Contains(r.stdout, fmt.Sprintf("page %d refers back to itself", root)) {
		t.Errorf("store check: exit %d, want 1 naming the cycle\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = bounded("store", "repair")
	noTrace(t, "store repair", r)
	m := repairCounts.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[1] != fmt.Sprint(n) || m[3] != "0" {
		t.Errorf("store repair: exit %d counts %q, want all %d loops recovered\n%s%s", r.code, m, n, r.stdout, r.stderr)
	}
	if r := bounded("store", "check"); r.code != 0 {
		t.Errorf("store check after repair: exit %d\n%s", r.code, r.stdout)
	}
	if r := bounded("status"); r.code != 0 {
		t.Errorf("status after repair: exit %d\n%s", r.code, r.stderr)
	}
}
