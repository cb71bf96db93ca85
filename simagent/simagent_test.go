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
	// Find a seed that does not hit the one-time 429 so the outcome is the artifact.
	seed := firstSeed(func(s int64) bool { return roll(Key(s, "plan", "Add OAuth login"), "429", 6) != 0 })
	art := filepath.Join(dir, "plan.md")
	var out bytes.Buffer
	code := Run(Env{LoopID: "PLAN", Type: "plan", Artifact: art, Workdir: dir, Home: dir, Iteration: 1, Seed: seed},
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

	// A ralph loop whose key rolls a bug: broken on iteration 1, fixed on 2.
	rseed := firstSeed(func(s int64) bool {
		k := Key(s, "ralph", "Create the table")
		return roll(k, "bug", 4) == 0 && roll(k, "429", 6) != 0
	})
	for it, wantBroken := range map[int]bool{1: true, 2: false} {
		wd := filepath.Join(dir, "wt", string(rune('0'+it)))
		if code := Run(Env{LoopID: "RALPH", Type: "ralph", Workdir: wd, Home: dir, Iteration: it, Seed: rseed},
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
	seed := firstSeed(func(s int64) bool { return roll(Key(s, "ralph", "work"), "429", 6) == 0 })
	e := Env{LoopID: "L1", Type: "ralph", Workdir: dir, Home: dir, Iteration: 1, Seed: seed}
	var out bytes.Buffer
	if code := Run(e, strings.NewReader(""), &out, func(time.Duration) {}); code == 0 || !strings.Contains(out.String(), "retry-after: 3") {
		t.Fatalf("first call: exit %d output %q, want a 429", code, out.String())
	}
	out.Reset()
	if code := Run(e, strings.NewReader(""), &out, func(time.Duration) {}); code != 0 {
		t.Fatalf("second call: exit %d output %q, want success", code, out.String())
	}
}

// firstSeed returns the first seed from 1 that satisfies ok.
func firstSeed(ok func(int64) bool) int64 {
	for s := int64(1); ; s++ {
		if ok(s) {
			return s
		}
	}
}

// TestTreeIsDeterministicAndUnique: the whole tree a seed gives — every
// title, every bug, every 429 — is the same on every run, whatever the
// loop ids; titles are unique across the tree; another seed gives another
// tree.
func TestTreeIsDeterministicAndUnique(t *testing.T) {
	t.Parallel()
	const request = "Add a URL shortener service with an HTTP API, storage and metrics"
	tree := func(seed int64) []string {
		var out []string
		var walk func(typ, title string)
		walk = func(typ, title string) {
			k := Key(seed, typ, title)
			out = append(out, fmt.Sprintf("%s %q bug=%v 429=%v", typ, title, roll(k, "bug", 4) == 0, roll(k, "429", 6) == 0))
			child := map[string]string{"plan": "spec", "spec": "phase", "phase": "ralph"}[typ]
			if child == "" {
				return
			}
			doc, err := artifact.Parse(typ, []byte(Artifact(typ, k, title)))
			if err != nil {
				t.Fatalf("seed %d: %s %q: %v", seed, typ, title, err)
			}
			for _, s := range doc.Sections {
				walk(child, s.Name)
			}
		}
		walk("plan", request)
		return out
	}
	a, b := tree(1), tree(1)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("seed 1 gave two trees:\n%v\n%v", a, b)
	}
	seen := map[string]bool{}
	for _, line := range a {
		title := line[strings.Index(line, " ")+1 : strings.Index(line, " bug=")]
		if seen[title] {
			t.Errorf("title %s appears twice in the tree of seed 1", title)
		}
		seen[title] = true
	}
	if len(a) < 10 {
		t.Errorf("seed 1 gave only %d loops: %v", len(a), a)
	}
	if fmt.Sprint(a) == fmt.Sprint(tree(2)) {
		t.Error("seeds 1 and 2 gave the same tree")
	}
	// The prompt's first line carries the title the tree is rolled from.
	if got := titleOf("You are a coding agent run by loopr: iteration 1 of at most 100 for task loop 01JX, \"2.1.3 Add an index\".\n"); got != "2.1.3 Add an index" {
		t.Errorf("titleOf = %q", got)
	}
}
