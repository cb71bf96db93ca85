package e2e

import (
	"context"
	"crypto/sha256"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// TestArtifactTextIsNeverAPathOrACommand runs a whole tree whose artifacts
// (testdata/evilagent.sh) name children "../../etc/passwd",
// "/abs/loopr-evil-path", "a/b", "nul\x00byte", "..", "$(touch …)",
// "`touch …`" and "x; touch … | touch …", in a git workspace with
// worktrees. Every loop completes; every child has a loopr id, never a name
// taken from its title; loops/<id> and worktrees/<id> directories and
// loopr/<id> branches are named by ids only; nothing is created outside
// the workspace and its home; no command in the text ever runs (the
// canary directory stays empty); and the titles are stored verbatim.
func TestArtifactTextIsNeverAPathOrACommand(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	canary := filepath.Join(root, "canary")
	if err := os.Mkdir(canary, 0o755); err != nil {
		t.Fatal(err)
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	cfg := relSimpleConfig([]string{"sh", abs(t, "testdata/evilagent.sh"), canary}, "")
	cfg = strings.Replace(cfg, "worktrees: false", "worktrees: true", 1)
	cfg = strings.Replace(cfg, "ralph: {validate: []}", `ralph: {validate: ["test -f done-$LOOPR_LOOP_ID.txt"]}`, 1)
	e := newRelEnv(t, cfg)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "loopr.yml"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = e.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	d := e.start()
	ctx := context.Background()
	planTitle := "../../plan $(touch " + canary + "/plan-title)"
	if _, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Plan, Title: planTitle, Task: "`touch " + canary + "/plan-task`"}); err != nil {
		t.Fatal(err)
	}
	const want = 1 + 8 + 8 + 8
	relWaitFor(t, 60*time.Second, "the tree to complete", func() bool {
		st := d.status(t)
		if st.Counts[loop.Failed] > 0 {
			t.Fatalf("loops failed: %v", st.Counts)
		}
		return st.Counts[loop.Complete] == want
	})
	if code := d.stop(); code != 0 {
		t.Errorf("daemon exit code %d", code)
	}
	loops, _ := e.relStore(t)

	titles := map[string]bool{}
	for _, l := range loops {
		titles[l.Title] = true
		if !loop.ValidID(l.ID) || strings.ContainsAny(l.ID, "./") {
			t.Errorf("loop id %q is not a safe id", l.ID)
		}
		for _, p := range []string{l.Artifact, l.Workdir, l.TriggeredBy} {
			if p != "" && !strings.HasPrefix(p, e.home+string(filepath.Separator)) && p != e.dir {
				t.Errorf("loop %s: path %q outside the home", l.ID, p)
			}
		}
	}
	for _, title := range []string{"../../etc/passwd", "/abs/loopr-evil-path", "a/b", "nul\x00byte", "..",
		"$(touch " + canary + "/dollar)", "`touch " + canary + "/backtick`", planTitle} {
		if !titles[title] {
			t.Errorf("no loop titled %q: titles are not stored verbatim", title)
		}
	}

	// Directories named after loops are named by ids.
	for _, dir := range []string{"loops", "worktrees"} {
		entries, err := os.ReadDir(filepath.Join(e.home, dir))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, en := range entries {
			if !loop.ValidID(en.Name()) {
				t.Errorf("%s/%s is not named by a loop id", dir, en.Name())
			}
		}
	}
	// Branches too.
	cmd := exec.Command("git", "for-each-ref", "--format=%(refname:short)", "refs/heads/loopr/")
	cmd.Dir = e.dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range strings.Fields(string(out)) {
		if id, ok := strings.CutPrefix(b, "loopr/"); !ok || !loop.ValidID(id) {
			t.Errorf("branch %q is not loopr/<id>", b)
		}
	}

	// Nothing escaped, nothing ran.
	if entries, _ := os.ReadDir(canary); len(entries) > 0 {
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		t.Errorf("commands in artifact text ran: the canary directory holds %v", names)
	}
	bad := []string{"passwd", "loopr-evil", "dollar", "backtick", "semicolon", "pipe", "deep-", "nul"}
	filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := de.Name()
		if strings.ContainsRune(name, 0) || slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(name, b) }) {
			t.Errorf("a file named after artifact text: %s", p)
		}
		return nil
	})
	for _, p := range []string{"/abs", filepath.Join(e.dir, "etc"), filepath.Join(root, "etc"), filepath.Join(e.home, "etc")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
	if now, _ := os.ReadFile("/etc/passwd"); sha256.Sum256(now) != sha256.Sum256(passwd) {
		t.Error("/etc/passwd changed")
	}
	t.Logf("%d loops with hostile titles completed; ids, directories and branches are loopr ids; canary empty", len(loops))
}
