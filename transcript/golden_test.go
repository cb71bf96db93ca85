package transcript

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestCapturedGolden renders every output the real CLIs printed
// (preset/testdata: stdout and stderr as agent.log holds them) and compares
// it with testdata/<dir>/<file>.golden, which a person has read: each line
// is what they want to see of the run.
func TestCapturedGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../preset/testdata/*/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in ../preset/testdata: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		dir := filepath.Base(filepath.Dir(f))
		name, _, _ := strings.Cut(dir, "-") // claude-2.1.332 → claude
		seen[name] = true
		t.Run(dir+"/"+filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			out, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got := plain(Render(name, out))
			golden := filepath.Join("testdata", dir, filepath.Base(f)+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run TestCapturedGolden ./transcript/ -update writes it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("Render(%s) mismatch (-want +got):\n%s", f, diff)
			}
		})
	}
	for _, p := range []string{"claude", "codex", "gemini", "opencode"} {
		if !seen[p] {
			t.Errorf("no capture of %s in ../preset/testdata", p)
		}
	}
}

func plain(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.String() + "\n")
	}
	return b.String()
}
