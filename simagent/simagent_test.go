package simagent

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/artifact"
)

func TestArtifactsParse(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"plan", "spec", "phase"} {
		for i := range 50 {
			id := "01JD" + string(rune('A'+i%26)) + strings.Repeat("X", i%5)
			doc, err := artifact.Parse(typ, []byte(Artifact(typ, id, "Add OAuth login")))
			if err != nil {
				t.Fatalf("Artifact(%s, %s) does not parse: %v", typ, id, err)
			}
			if len(doc.Sections) == 0 {
				t.Fatalf("Artifact(%s, %s) has no sections", typ, id)
			}
		}
	}
}

func TestRunWritesArtifactAndCode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noSleep := func(time.Duration) {}
	// Find ids that do not hit the one-time 429 so the outcome is the artifact.
	id := firstID("PLAN", func(id string) bool { return roll(id, "429", 6) != 0 })
	art := filepath.Join(dir, "plan.md")
	var out bytes.Buffer
	code := Run(Env{LoopID: id, Type: "plan", Artifact: art, Workdir: dir, Home: dir, Iteration: 1},
		strings.NewReader("Title: Add OAuth login\n"), &out, noSleep)
	if code != 0 {
		t.Fatalf("plan exit %d: %s", code, out.String())
	}
	data, err := os.ReadFile(art)
	if err != nil {
		t.Fatal(err)
	}
	if doc, err := artifact.Parse("plan", data); err != nil || doc.Title != "Add OAuth login" {
		t.Fatalf("plan artifact: %v %+v", err, doc)
	}

	// A ralph loop whose id rolls a bug: broken on iteration 1, fixed on 2.
	rid := firstID("RALPH", func(id string) bool { return roll(id, "bug", 4) == 0 && roll(id, "429", 6) != 0 })
	for it, wantBroken := range map[int]bool{1: true, 2: false} {
		wd := filepath.Join(dir, "wt", string(rune('0'+it)))
		if code := Run(Env{LoopID: rid, Type: "ralph", Workdir: wd, Home: dir, Iteration: it},
			strings.NewReader("Title: Create the table\n"), &out, noSleep); code != 0 {
			t.Fatalf("ralph exit %d", code)
		}
		files, _ := filepath.Glob(filepath.Join(wd, "sim", "*.go"))
		if len(files) != 1 {
			t.Fatalf("iteration %d wrote %v", it, files)
		}
		src, _ := os.ReadFile(files[0])
		if got := strings.Contains(string(src), BrokenMarker); got != wantBroken {
			t.Errorf("iteration %d broken = %v, want %v", it, got, wantBroken)
		}
	}
}

func TestRateLimitOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	id := firstID("L", func(id string) bool { return roll(id, "429", 6) == 0 })
	e := Env{LoopID: id, Type: "ralph", Workdir: dir, Home: dir, Iteration: 1}
	var out bytes.Buffer
	if code := Run(e, strings.NewReader(""), &out, func(time.Duration) {}); code == 0 || !strings.Contains(out.String(), "retry-after: 3") {
		t.Fatalf("first call: exit %d output %q, want a 429", code, out.String())
	}
	out.Reset()
	if code := Run(e, strings.NewReader(""), &out, func(time.Duration) {}); code != 0 {
		t.Fatalf("second call: exit %d output %q, want success", code, out.String())
	}
}

// firstID returns the first id prefix+N that satisfies ok.
func firstID(prefix string, ok func(string) bool) string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("%s%d", prefix, i); ok(id) {
			return id
		}
	}
}
