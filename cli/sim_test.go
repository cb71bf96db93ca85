package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/v1"
)

// TestSimCommand runs `loopr sim` with the workspace's loopr.yml: text and
// JSON output, and bad workloads refused with exit 2 and the line.
func TestSimCommand(t *testing.T) {
	t.Parallel()
	ws := policyWorkspace(t, "concurrency: {max_loops: 1}\n")
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("w.yaml", `until: 10
types: {sync-clone: {base: 100, tier: 8, max_running: 8, conflict_group: git}}
loops:
  - {id: a1, type: sync-clone, key: clientA, conflict_key: repo1, cost: 10, duration: 3, at: 1}
  - {id: a2, type: sync-clone, key: clientA, duration: 1, at: 1}
`)
	code, out, errs := run(append(slices.Clone(ws), "sim", good)...)
	if code != 0 {
		t.Fatalf("loopr sim = exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"T=  1 ADMIT  a1 sync-clone prio=1",        // 100, plus the tree term when loopr.yml's defaults turn it on
		" tier=8 conflict_key=repo1 running=1/1\n", // max_loops 1 from loopr.yml
		"T=  4 DONE   a1\n",
		"T=  4 ADMIT  a2 ",
		"KEY      LOOPS  ADMITTED  DONE  WAIT AVG  WAIT MAX  DONE AT\nclientA  2      2         2     1.5       3         4 5\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("loopr sim output lacks %q:\n%s", want, out)
		}
	}

	code, out, errs = run(append(slices.Clone(ws), "sim", "--json", good)...)
	if code != 0 {
		t.Fatalf("loopr sim --json = exit %d: %s", code, errs)
	}
	var events []map[string]any
	if err := json.Unmarshal([]byte(out), &events); err != nil {
		t.Fatalf("loopr sim --json: %v\n%s", err, out)
	}
	if len(events) != 6 || events[2]["event"] != "admit" || events[2]["id"] != "a1" || events[2]["t"] != 1.0 || len(events[2]) != 3 {
		t.Errorf("loopr sim --json = %v", events)
	}

	bad := write("bad.yaml", "loops:\n  - {id: a1, type: sync-clone}\n")
	code, _, errs = run(append(slices.Clone(ws), "sim", bad)...)
	if want := "loopr: bad.yaml:2: loops[0].type: unknown type \"sync-clone\" (known: plan, spec, phase, ralph; add it under types:)\n"; code != 2 || errs != want {
		t.Errorf("loopr sim bad.yaml = exit %d %q, want 2 %q", code, errs, want)
	}
	self := write("self.yaml", "loops:\n  - {id: p, type: phase}\n  - {id: c, type: ralph, parent: p, depends_on: [p]}\n")
	for _, args := range [][]string{{"sim", self}, {"sim", "--compare", "fifo,loopr", self}} {
		code, _, errs = run(append(slices.Clone(ws), args...)...)
		if want := "loopr: self.yaml:3: loops[1].depends_on: c waits for itself"; code != 2 || !strings.HasPrefix(errs, want) {
			t.Errorf("loopr %v = exit %d %q, want 2 %q…", args, code, errs, want)
		}
	}
	code, _, errs = run(append(slices.Clone(ws), "sim", filepath.Join(dir, "missing.yaml"))...)
	if code != 2 || !strings.Contains(errs, "missing.yaml") {
		t.Errorf("loopr sim missing.yaml = exit %d %q", code, errs)
	}
}

// TestSimDependsOn: `loopr sim` follows depends_on and the workspace's
// children setting (a spec's phases one after another), and what still
// waits at the end says which loop it waits for.
func TestSimDependsOn(t *testing.T) {
	t.Parallel()
	ws := policyWorkspace(t, "")
	path := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(path, []byte(`until: 4
loops:
  - {id: s, type: spec, duration: 1}
  - {id: p1, type: phase, parent: s, duration: 1}
  - {id: p2, type: phase, parent: s, duration: 1}
  - {id: t1, type: ralph, parent: p1, duration: 5}
  - {id: x, type: ralph, duration: 1, depends_on: [t1]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(append(slices.Clone(ws), "sim", path)...)
	if code != 0 {
		t.Fatalf("loopr sim = exit %d: %s", code, errs)
	}
	for _, want := range []string{"T=  2 ADMIT  t1 ", "still waiting at T=4:\n", "  p2: waits for p1 (complete, not all loops below it)\n", "  x: waits for t1 ("} {
		if !strings.Contains(out, want) {
			t.Errorf("loopr sim output lacks %q:\n%s", want, out)
		}
	}
}

// TestSimCompareAndMetrics: --compare runs the named policies on one
// workload (text and JSON), an unknown one is exit 2; --json --metrics is
// an object with the events and the metrics, and --json alone stays the
// events array.
func TestSimCompareAndMetrics(t *testing.T) {
	t.Parallel()
	ws := policyWorkspace(t, "concurrency: {max_loops: 1}\n")
	path := filepath.Join(t.TempDir(), "trees.yaml")
	body := `loops:
  - {id: a, type: plan, duration: 1}
  - {id: a1, type: ralph, parent: a, duration: 60}
  - {id: a2, type: ralph, parent: a, duration: 60}
  - {id: b, type: plan, duration: 1, at: 2}
  - {id: b1, type: ralph, parent: b, duration: 60}
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(append(slices.Clone(ws), "sim", "--compare", "fifo,cpf", path)...)
	if code != 0 {
		t.Fatalf("loopr sim --compare = exit %d: %s", code, errs)
	}
	for _, want := range []string{"2 trees, 1 slots", "\nfifo ", "\ncpf ", "TREE  SUBMIT  CRITICAL PATH  FIFO FLOW", "\na     0s      1m01s          2m01s (1.98×)"} {
		if !strings.Contains(out, want) {
			t.Errorf("loopr sim --compare lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = run(append(slices.Clone(ws), "sim", "--compare", "loopr,seed", "--json", path)...)
	var cmp struct {
		Policies []struct {
			Policy  string `json:"policy"`
			Metrics struct {
				Makespan int `json:"makespan"`
				Trees    []struct {
					Root     string `json:"root"`
					Complete int    `json:"complete"`
				} `json:"trees"`
			} `json:"metrics"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(out), &cmp); code != 0 || err != nil {
		t.Fatalf("loopr sim --compare --json = exit %d %v: %s%s", code, err, out, errs)
	}
	if len(cmp.Policies) != 2 || cmp.Policies[1].Policy != "seed" || cmp.Policies[0].Metrics.Makespan != 182 || len(cmp.Policies[0].Metrics.Trees) != 2 {
		t.Errorf("loopr sim --compare --json = %+v", cmp)
	}
	code, _, errs = run(append(slices.Clone(ws), "sim", "--compare", "fifo,lifo", path)...)
	if code != 2 || !strings.Contains(errs, `unknown policy "lifo"`) {
		t.Errorf("loopr sim --compare lifo = exit %d %q, want 2 naming it", code, errs)
	}
	code, out, _ = run(append(slices.Clone(ws), "sim", "--json", "--metrics", path)...)
	var obj struct {
		Policy  string           `json:"policy"`
		Events  []map[string]any `json:"events"`
		Metrics struct {
			MeanFlow   float64 `json:"mean_flow"`
			LowerBound float64 `json:"lower_bound"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(out), &obj); code != 0 || err != nil || obj.Policy != "loopr" || len(obj.Events) != 15 || obj.Metrics.LowerBound != 182 || obj.Metrics.MeanFlow <= 0 {
		t.Errorf("loopr sim --json --metrics = exit %d %v: %+v\n%s", code, err, obj, out)
	}
}
