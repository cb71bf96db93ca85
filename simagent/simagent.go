// Package simagent is loopr's built-in simulated coding agent, used by
// `loopr demo` so loopr can be seen working on a machine with no real agent
// installed. It follows the real agent contract (docs/agent-contract.md): it reads the
// prompt on stdin, reads the LOOPR_* environment, writes the artifact for
// plan/spec/phase loops and code files for ralph loops, takes a few seconds
// like a real agent, sometimes leaves a bug that validation catches (and
// fixes it on the next iteration, from the feedback), and sometimes answers
// "429" once so the shared backoff shows.
//
// Its choices — titles, how many children, which tasks carry a bug, which
// calls answer 429, how long it thinks — are a pure function of the seed
// (LOOPR_SIM_SEED, `loopr demo --seed`) and the loop's title, never of its
// id or the clock: the same seed gives the same tree, the same titles and
// the same failures. Titles are unique: each child's name starts with its
// place in the tree ("2.1.3 Add an index" is task 3 of phase 1 of spec 2).
package simagent

import (
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// BrokenMarker is written into code that should fail validation; the demo's
// ralph validate command greps for it.
const BrokenMarker = "LOOPR-SIM-BROKEN"

// DefaultSeed is the seed of `loopr demo` without --seed.
const DefaultSeed = 6

// Env is what the agent reads from its environment.
type Env struct {
	LoopID, Type, Artifact, Workdir, Home string
	Iteration                             int
	Speed                                 float64 // multiplies sleeps; 0 → no sleep
	Seed                                  int64   // varies every choice; DefaultSeed when unset
}

// EnvFrom reads Env from getenv. LOOPR_SIM_SPEED scales the sleeps
// (default 1); LOOPR_SIM_SEED seeds the choices (default DefaultSeed).
func EnvFrom(getenv func(string) string) Env {
	e := Env{LoopID: getenv("LOOPR_LOOP_ID"), Type: getenv("LOOPR_LOOP_TYPE"), Artifact: getenv("LOOPR_ARTIFACT"),
		Workdir: getenv("LOOPR_WORKDIR"), Home: getenv("LOOPR_HOME"), Speed: 1, Seed: DefaultSeed}
	e.Iteration, _ = strconv.Atoi(getenv("LOOPR_ITERATION"))
	if s := getenv("LOOPR_SIM_SPEED"); s != "" {
		if v, err := strconv.ParseFloat(s, 64); err == nil && v >= 0 {
			e.Speed = v
		}
	}
	if s := getenv("LOOPR_SIM_SEED"); s != "" {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			e.Seed = v
		}
	}
	return e
}

// Key is what every choice about a loop is rolled from: the seed, the
// loop's type and its title (unique in a demo tree).
func Key(seed int64, typ, title string) string {
	return fmt.Sprintf("%d/%s/%s", seed, typ, title)
}

// roll returns a stable number in [0, n) for the loop and a salt.
func roll(id, salt string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(id + "/" + salt))
	// Take the high bits: FNV-1a's low bits are poorly mixed.
	return int(uint64(h.Sum32()) * uint64(n) >> 32)
}

// Run performs one agent invocation and returns the process exit code.
func Run(e Env, stdin io.Reader, stdout io.Writer, sleep func(time.Duration)) int {
	prompt, _ := io.ReadAll(io.LimitReader(stdin, 4<<20))
	title := titleOf(string(prompt))
	if e.LoopID == "" || e.Type == "" {
		fmt.Fprintln(stdout, "simagent: LOOPR_LOOP_ID and LOOPR_LOOP_TYPE must be set (run me from loopr)")
		return 2
	}
	key := Key(e.Seed, e.Type, title)
	think := time.Duration((800 + roll(key, "think"+strconv.Itoa(e.Iteration), 2200)) * int(time.Millisecond))
	fmt.Fprintf(stdout, "sim-agent: %s %s iteration %d: %q\n", e.Type, e.LoopID, e.Iteration, title)
	fmt.Fprintln(stdout, "sim-agent: reading the repository…")
	if e.Speed > 0 {
		sleep(time.Duration(float64(think) * e.Speed))
	}
	// About one call in six hits the provider's rate limit, once per loop.
	if e.Iteration == 1 && roll(key, "429", 6) == 0 && e.Home != "" {
		marker := filepath.Join(e.Home, "sim", "429-"+e.LoopID)
		if _, err := os.Stat(marker); err != nil {
			os.MkdirAll(filepath.Dir(marker), 0o755)
			os.WriteFile(marker, nil, 0o644)
			fmt.Fprintln(stdout, "API Error: 429 {\"type\":\"rate_limit_error\",\"message\":\"Number of requests has exceeded your rate limit\"} retry-after: 3")
			return 1
		}
	}
	switch e.Type {
	case "plan", "spec", "phase":
		if err := os.MkdirAll(filepath.Dir(e.Artifact), 0o755); err != nil {
			fmt.Fprintln(stdout, "sim-agent:", err)
			return 1
		}
		if err := os.WriteFile(e.Artifact, []byte(Artifact(e.Type, key, title)), 0o644); err != nil {
			fmt.Fprintln(stdout, "sim-agent:", err)
			return 1
		}
		fmt.Fprintf(stdout, "sim-agent: wrote %s\n", e.Artifact)
	default:
		broken := e.Iteration == 1 && roll(key, "bug", 4) == 0
		name := filepath.Join(e.Workdir, "sim", slug(title)+".go")
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			fmt.Fprintln(stdout, "sim-agent:", err)
			return 1
		}
		if err := os.WriteFile(name, []byte(code(title, broken)), 0o644); err != nil {
			fmt.Fprintln(stdout, "sim-agent:", err)
			return 1
		}
		if broken {
			fmt.Fprintf(stdout, "sim-agent: wrote %s (left a bug in it)\n", name)
		} else {
			fmt.Fprintf(stdout, "sim-agent: wrote %s\n", name)
		}
	}
	fmt.Fprintln(stdout, "sim-agent: done")
	return 0
}

// firstLineTitle finds the title the built-in prompts quote at the end of
// their first line: `… for task loop 01J…, "2.1.3 Add an index".`
var firstLineTitle = regexp.MustCompile(`, "(.+)"\.?$`)

// titleOf finds the loop title in the prompt: a "Title: …" line, the
// quoted title of the built-in prompts' first line, else the first
// non-empty line.
func titleOf(prompt string) string {
	first := ""
	for _, line := range strings.Split(prompt, "\n") {
		t := strings.TrimSpace(line)
		if first == "" && t != "" {
			first = t
			if m := firstLineTitle.FindStringSubmatch(t); m != nil {
				return m[1]
			}
		}
		for _, p := range []string{"Title:", "**Title:**", "title:"} {
			if rest, ok := strings.CutPrefix(t, p); ok && strings.TrimSpace(rest) != "" {
				return strings.TrimSpace(rest)
			}
		}
	}
	if first == "" {
		return "work"
	}
	return strings.TrimLeft(first, "# ")
}

var (
	specNames  = []string{"Data model", "API endpoints", "Background jobs", "Access control", "Observability", "Client library"}
	phaseNames = []string{"Schema and migrations", "Core logic", "Handlers", "Tests and docs"}
	taskNames  = []string{"Create the table", "Add an index", "Write the repository", "Validate input", "Handle errors", "Add unit tests", "Wire the route", "Document the API"}
)

// outlineRe finds a title's place in the tree: "2.1" in "2.1 Core logic".
var outlineRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)*) `)

// Artifact returns a well-formed artifact (docs/artifacts.md) for a loop
// titled title, its choices rolled from key. Each child's name starts with
// its outline number, which extends title's ("2.1" → "2.1.1", "2.1.2"), so
// every title in the tree is unique.
func Artifact(typ, key, title string) string {
	id := key
	var head, list, item string
	var names []string
	var n int
	switch typ {
	case "plan":
		head, list, item, names, n = "Plan", "Specs", "Spec", specNames, 2+roll(id, "n", 2)
	case "spec":
		head, list, item, names, n = "Spec", "Phases", "Phase", phaseNames, 1+roll(id, "n", 2)
	default:
		head, list, item, names, n = "Phase", "Tasks", "Task", taskNames, 2+roll(id, "n", 2)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %s\n\n", head, title)
	fmt.Fprintf(&b, "This %s breaks \"%s\" into %d parts that can be worked on in order.\n\n## %s\n\n", strings.ToLower(head), title, n, list)
	off := roll(id, "names", len(names))
	prefix := ""
	if m := outlineRe.FindStringSubmatch(title); m != nil {
		prefix = m[1] + "."
	}
	for i := range n {
		name := names[(off+i)%len(names)]
		fmt.Fprintf(&b, "### %s %d: %s%d %s\n\n%s for %s. Keep the change small and covered by tests.\n\n",
			item, i+1, prefix, i+1, name, name, outlineRe.ReplaceAllString(title, ""))
	}
	return b.String()
}

func code(title string, broken bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// Package sim was written by loopr's simulated agent for %q.\npackage sim\n\n", title)
	fmt.Fprintf(&b, "// %s reports whether the work is done.\nfunc %s() bool {\n", ident(title), ident(title))
	if broken {
		fmt.Fprintf(&b, "\treturn false // %s: forgot the edge case\n}\n", BrokenMarker)
	} else {
		b.WriteString("\treturn true\n}\n")
	}
	return b.String()
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
		if b.Len() >= 32 {
			break
		}
	}
	out := strings.Trim(b.String(), "_")
	if out == "" {
		return "work"
	}
	return out
}

func ident(s string) string {
	var b strings.Builder
	for _, w := range strings.Fields(slug(s)) {
		b.WriteString(w)
	}
	parts := strings.Split(slug(s), "_")
	b.Reset()
	for _, p := range parts {
		if p != "" {
			b.WriteString(strings.ToUpper(p[:1]) + p[1:])
		}
	}
	if b.Len() == 0 || b.String()[0] >= '0' && b.String()[0] <= '9' {
		return "Work" + b.String()
	}
	return b.String()
}
