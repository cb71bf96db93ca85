// Package sim runs a workload through loopr's scheduler under a virtual
// clock (`loopr sim WORKLOAD.yaml`), so that a configuration can be tried
// before it is deployed. It uses the same code as the daemon: the
// configuration is loopr.yml with the workload's overrides decoded by the
// config package, the policy is control.Policy, and every admission is
// decided by scheduler.Plan with the fairness state kept the way the daemon
// keeps it.
//
// A workload:
//
//	until: 30                  # last virtual second simulated (0 or absent: until all is done)
//	config: {concurrency: {max_loops: 8}, scheduler: {fairness: {enabled: true}}}
//	types: {sync-clone: {base: 100, tier: 8, max_running: 8, conflict_group: git}}
//	limits: [{profile: default, from: 600, until: 2400}]
//	loops:
//	  - {id: a1, type: sync-clone, key: clientA, conflict_key: repo1, cost: 10, duration: 3, at: 1}
//	  - {id: a2, type: sync-clone, depends_on: [a1]}
//	  - {id: p1, type: plan, duration: 300, approval: 600}
//	  - {id: s1, type: spec, parent: p1, iterations: [{duration: 200, pass: false}, {duration: 150, pass: true}]}
//
// Each virtual second: arrivals, then iterations that end (a loop admitted
// at t whose iteration lasts d ends at t+d) and approvals given, then loops
// past their deadline expire, then admissions until nothing is admissible.
//
// A loop with a parent and no at: is created when its parent completes,
// as the daemon creates children; with at: it exists from that second and
// waits for its parent. A loop's depends_on names loops listed before it;
// it starts once each of them and every loop below it in the workload is
// done, as in the daemon. Children without depends_on follow their parent
// type's children setting (loops.<type>.children: a spec's phases run one
// after another, each after the sibling listed before it).
//
// iterations are a loop's attempts, listed or drawn ({pass_rate, sigma,
// seed}: each passes with that probability and lasts duration × a
// lognormal factor, the same for the same seed and id): a failed one sends it back to waiting
// with Iteration+1 and RunnableAt after config.Retry.Delay, as loopmgr
// does; approval holds a loop that passed (no slot) before it completes;
// limits hold the loops of a profile with reason rate_limited (running
// iterations finish: a window holds starts). With a tree
// weight on, each plan gets Snapshot.Trees from scheduler.AddWork over the
// unfinished loops, with durations learned by scheduler.Durations.Observe
// from every iteration that ended (alpha: scheduler.fairness.alpha).
//
// Run measures the makespan, each tree's flow and slowdown, and the lower
// bound (Metrics); RunWith and Compare run the reference policies
// (Policies: loopr, seed, fifo, cpf) on the same workload, and Generate
// writes workloads like the issue-25 study's.
package sim

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
)

// Loop is one loop of a workload.
type Loop struct {
	ID          string
	Type        string
	Key         string  // fairness key; "" = the root of its tree (the loop itself when it has no parent)
	Owner       string  // for quotas
	ConflictKey string  // resource held within the type's conflict group
	Parent      string  // a loop of the workload that must complete first
	Cost        float64 // cost hint in seconds; 0 = learned or the type's default_cost
	Duration    int     // virtual seconds it runs once admitted (>= 1)
	At          int     // the second it arrives
	Deadline    int     // expires if still waiting at this second; 0 = none
	DependsOn   []string
	// DependsSet: the workload gives depends_on (maybe empty), which
	// overrides the parent type's children setting.
	DependsSet bool
	// AtSet: the workload gives at. A child without at is created when its
	// parent completes, as the daemon creates a parent's children.
	AtSet bool
	// Iterations are the loop's attempts in order: each runs Duration
	// seconds and passes or fails. nil: one passing iteration of Duration.
	Iterations []Iteration
	// Approval is how long the loop waits for `loopr approve` once an
	// iteration passed (seconds, a plan's require_approval): it holds no slot.
	Approval int
	Agent    string // agent profile; "" = its type's
	Line     int    // where it is in the workload file
}

// Iteration is one attempt of a loop.
type Iteration struct {
	Duration int  `yaml:"duration"`
	Pass     bool `yaml:"pass"`
}

// Attempts returns l's iterations: Iterations, or one passing of Duration.
func (l *Loop) Attempts() []Iteration {
	if len(l.Iterations) > 0 {
		return l.Iterations
	}
	return []Iteration{{Duration: l.Duration, Pass: true}}
}

// Limit is a rate-limit window of an agent profile: its loops are held
// (reason rate_limited) from From until Until (seconds).
type Limit struct {
	Profile     string
	From, Until int
}

// Workload is a parsed workload file.
type Workload struct {
	Until  int            // last second simulated; 0 = until nothing is left to happen
	Config *config.Config // loopr.yml with the workload's config: and types:
	Loops  []Loop         // in file order
	Limits []Limit        // rate-limit windows
	File   string
}

// maxLoops bounds a workload, and maxUntil its virtual time, so that a typo
// cannot make `loopr sim` run for hours.
const (
	maxLoops = 100_000
	maxUntil = 10_000_000
)

// Parse decodes a workload over base (the configuration in force) strictly:
// unknown keys, wrong types, bad values and unknown loop types are errors
// that name the file, line and key, as *config.Error.
func Parse(data []byte, filename string, base *config.Config) (*Workload, error) {
	p := parser{file: baseName(filename)}
	w := &Workload{File: filename, Config: base}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.errorf(0, "", "empty workload: want loops")
		}
		msg, line := strings.TrimPrefix(err.Error(), "yaml: "), 0
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		return nil, p.errorf(line, "", "invalid YAML: %s", msg)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, p.errorf(doc.Line, "", "must be a mapping with loops")
	}
	root := doc.Content[0]
	var cfgNode, typesNode, loopsNode, limitsNode *yaml.Node
	typesLine := 0
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if first, dup := seen[k.Value]; dup {
			return nil, p.errorf(k.Line, k.Value, "duplicate key (first at line %d)", first)
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case "until":
			n, err := p.integer(v, "until", 0, maxUntil)
			if err != nil {
				return nil, err
			}
			w.Until = n
		case "config":
			cfgNode = v
		case "types":
			typesNode, typesLine = v, k.Line
		case "loops":
			loopsNode = v
		case "limits":
			limitsNode = v
		default:
			return nil, p.errorf(k.Line, k.Value, "unknown key (want until, config, types, limits, loops)")
		}
	}
	var err error
	if cfgNode != nil {
		if w.Config, err = config.Overlay(w.Config, cfgNode, filename, "config"); err != nil {
			return nil, err
		}
	}
	if typesNode != nil {
		wrapped := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "types", Line: typesLine}, typesNode}}
		if w.Config, err = config.Overlay(w.Config, wrapped, filename, ""); err != nil {
			return nil, err
		}
	}
	if loopsNode == nil {
		return nil, p.errorf(root.Line, "loops", "missing: a workload lists its loops")
	}
	if w.Loops, err = p.loops(loopsNode, w.Config); err != nil {
		return nil, err
	}
	if limitsNode != nil {
		if w.Limits, err = p.limits(limitsNode, w.Config); err != nil {
			return nil, err
		}
	}
	return w, nil
}

var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// parser decodes the workload's own keys.
type parser struct{ file string }

func (p parser) errorf(line int, key, format string, args ...any) *config.Error {
	return &config.Error{File: p.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)}
}

func (p parser) integer(n *yaml.Node, key string, lo, hi int) (int, error) {
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return 0, p.errorf(n.Line, key, "must be an integer, got %s", config.Describe(n))
	}
	if v < lo || v > hi {
		return 0, p.errorf(n.Line, key, "must be between %d and %d", lo, hi)
	}
	return v, nil
}

func (p parser) number(n *yaml.Node, key string) (float64, error) {
	var v float64
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&v) != nil {
		return 0, p.errorf(n.Line, key, "must be a number, got %s", config.Describe(n))
	}
	if v < 0 || v > 1e9 || v != v {
		return 0, p.errorf(n.Line, key, "must be between 0 and 1e9")
	}
	return v, nil
}

func (p parser) text(n *yaml.Node, key string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return "", p.errorf(n.Line, key, "must be a string, got %s", config.Describe(n))
	}
	return n.Value, nil
}

// loops decodes the list of loops and checks ids, types and parents.
func (p parser) loops(n *yaml.Node, c *config.Config) ([]Loop, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errorf(n.Line, "loops", "must be a list of loops, got %s", config.Describe(n))
	}
	if len(n.Content) == 0 {
		return nil, p.errorf(n.Line, "loops", "empty: a workload needs at least one loop")
	}
	if len(n.Content) > maxLoops {
		return nil, p.errorf(n.Line, "loops", "%d loops: at most %d", len(n.Content), maxLoops)
	}
	out := make([]Loop, 0, len(n.Content))
	index := map[string]int{}
	for i, el := range n.Content {
		key := fmt.Sprintf("loops[%d]", i)
		if el.Kind != yaml.MappingNode {
			return nil, p.errorf(el.Line, key, "must be a mapping like {id: a1, type: ralph, duration: 3}, got %s", config.Describe(el))
		}
		l := Loop{Duration: 1, Line: el.Line}
		var dist *distribution
		lines := map[string]int{}
		for j := 0; j+1 < len(el.Content); j += 2 {
			k, v := el.Content[j], el.Content[j+1]
			sub := key + "." + k.Value
			if first, dup := lines[k.Value]; dup {
				return nil, p.errorf(k.Line, sub, "duplicate key (first at line %d)", first)
			}
			lines[k.Value] = k.Line
			var err error
			switch k.Value {
			case "id":
				l.ID, err = p.text(v, sub)
			case "type":
				l.Type, err = p.text(v, sub)
			case "key":
				l.Key, err = p.text(v, sub)
			case "owner":
				l.Owner, err = p.text(v, sub)
			case "conflict_key":
				l.ConflictKey, err = p.text(v, sub)
			case "parent":
				l.Parent, err = p.text(v, sub)
			case "cost":
				l.Cost, err = p.number(v, sub)
			case "duration":
				l.Duration, err = p.integer(v, sub, 1, maxUntil)
			case "at":
				l.At, err = p.integer(v, sub, 0, maxUntil)
				l.AtSet = true
			case "iterations":
				if v.Kind == yaml.MappingNode {
					dist, err = p.distribution(v, sub)
				} else {
					l.Iterations, err = p.iterations(v, sub)
				}
			case "approval":
				l.Approval, err = p.integer(v, sub, 0, maxUntil)
			case "agent":
				l.Agent, err = p.text(v, sub)
			case "deadline":
				l.Deadline, err = p.integer(v, sub, 1, maxUntil)
			case "depends_on":
				l.DependsOn, err = p.ids(v, sub)
				l.DependsSet = true
			default:
				err = p.errorf(k.Line, sub, "unknown key (want id, type, key, owner, conflict_key, parent, cost, duration, iterations, approval, agent, at, deadline, depends_on)")
			}
			if err != nil {
				return nil, err
			}
		}
		if dist != nil {
			l.Iterations = dist.draw(l.ID, l.Duration, max(c.Loop(l.Type).MaxIterations, 1))
		}
		line := func(k string) int {
			if l, ok := lines[k]; ok {
				return l
			}
			return el.Line
		}
		switch {
		case l.ID == "":
			return nil, p.errorf(el.Line, key+".id", "missing")
		case !loop.ValidID(l.ID):
			return nil, p.errorf(line("id"), key+".id", "%q: use 1-64 letters, digits, '-' and '_'", l.ID)
		case l.Type == "":
			return nil, p.errorf(el.Line, key+".type", "missing (one of %s)", strings.Join(c.Types(), ", "))
		case !c.KnownType(l.Type):
			return nil, p.errorf(line("type"), key+".type", "unknown type %q (known: %s; add it under types:)", l.Type, strings.Join(c.Types(), ", "))
		case l.Agent != "" && !slices.Contains(c.Profiles(), l.Agent):
			return nil, p.errorf(line("agent"), key+".agent", "unknown agent profile %q (known: %s)", l.Agent, strings.Join(c.Profiles(), ", "))
		}
		if first, dup := index[l.ID]; dup {
			return nil, p.errorf(line("id"), key+".id", "duplicate id %q (first at line %d)", l.ID, out[first].Line)
		}
		if l.Parent != "" {
			pi, ok := index[l.Parent]
			switch {
			case !ok:
				return nil, p.errorf(line("parent"), key+".parent", "no loop %q before this one", l.Parent)
			case l.AtSet && out[pi].AtSet && out[pi].At > l.At:
				return nil, p.errorf(line("at"), key+".at", "%d: before its parent %s arrives (at %d)", l.At, l.Parent, out[pi].At)
			}
		}
		for _, d := range l.DependsOn {
			if _, ok := index[d]; !ok {
				return nil, p.errorf(line("depends_on"), key+".depends_on", "no loop %q before this one (a loop depends only on loops listed before it)", d)
			}
		}
		index[l.ID] = len(out)
		out = append(out, l)
	}
	return out, nil
}

// fields calls f with each key, value and the key's name under key of
// the mapping n, stopping at the first error.
func fields(n *yaml.Node, key string, f func(k, v *yaml.Node, sub string) error) error {
	for j := 0; j+1 < len(n.Content); j += 2 {
		if err := f(n.Content[j], n.Content[j+1], key+"."+n.Content[j].Value); err != nil {
			return err
		}
	}
	return nil
}

// iterations decodes a list of {duration, pass}.
func (p parser) iterations(n *yaml.Node, key string) ([]Iteration, error) {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, p.errorf(n.Line, key, "must be a list like [{duration: 300, pass: false}, {duration: 200, pass: true}] or a distribution like {pass_rate: 0.6, sigma: 0.5, seed: 1}, got %s", config.Describe(n))
	}
	out := make([]Iteration, len(n.Content))
	for i, el := range n.Content {
		sub := fmt.Sprintf("%s[%d]", key, i)
		if el.Kind != yaml.MappingNode {
			return nil, p.errorf(el.Line, sub, "must be a mapping like {duration: 300, pass: true}, got %s", config.Describe(el))
		}
		it := Iteration{Duration: 1}
		err := fields(el, sub, func(k, v *yaml.Node, sub string) (err error) {
			switch k.Value {
			case "duration":
				it.Duration, err = p.integer(v, sub, 1, maxUntil)
			case "pass":
				if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&it.Pass) != nil {
					err = p.errorf(v.Line, sub, "must be true or false, got %s", config.Describe(v))
				}
			default:
				err = p.errorf(k.Line, sub, "unknown key (want duration, pass)")
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		out[i] = it
	}
	return out, nil
}

// distribution is iterations given as {pass_rate, sigma, seed}: each
// attempt passes with probability pass_rate and lasts duration × a
// lognormal factor of sigma, drawn from seed and the loop's id, up to the
// type's max_iterations (the loop fails if none passes).
type distribution struct {
	passRate, sigma float64
	seed            uint64
}

func (d *distribution) draw(id string, duration, maxIterations int) []Iteration {
	h := fnv.New64a()
	h.Write([]byte(id))
	r := rand.New(rand.NewPCG(d.seed, h.Sum64()))
	var out []Iteration
	for range min(maxIterations, 1000) {
		// Clamped as a float: a long duration × a wide sigma's factor would
		// pass maxUntil, or wrap converted to int.
		f := math.Round(float64(duration) * math.Exp(d.sigma*r.NormFloat64()))
		it := Iteration{Duration: int(min(max(f, 1), maxUntil)), Pass: r.Float64() < d.passRate}
		out = append(out, it)
		if it.Pass {
			break
		}
	}
	return out
}

func (p parser) distribution(n *yaml.Node, key string) (*distribution, error) {
	d := &distribution{passRate: 1}
	err := fields(n, key, func(k, v *yaml.Node, sub string) (err error) {
		switch k.Value {
		case "pass_rate":
			if d.passRate, err = p.number(v, sub); err == nil && (d.passRate <= 0 || d.passRate > 1) {
				err = p.errorf(v.Line, sub, "must be above 0 and at most 1")
			}
		case "sigma":
			if d.sigma, err = p.number(v, sub); err == nil && d.sigma > 5 {
				err = p.errorf(v.Line, sub, "must be between 0 and 5")
			}
		case "seed":
			var s int
			s, err = p.integer(v, sub, 0, math.MaxInt32)
			d.seed = uint64(s)
		default:
			err = p.errorf(k.Line, sub, "unknown key (want pass_rate, sigma, seed)")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// limits decodes the rate-limit windows.
func (p parser) limits(n *yaml.Node, c *config.Config) ([]Limit, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errorf(n.Line, "limits", "must be a list like [{profile: claude, from: 600, until: 2400}], got %s", config.Describe(n))
	}
	out := make([]Limit, len(n.Content))
	for i, el := range n.Content {
		key := fmt.Sprintf("limits[%d]", i)
		if el.Kind != yaml.MappingNode {
			return nil, p.errorf(el.Line, key, "must be a mapping like {profile: claude, from: 600, until: 2400}, got %s", config.Describe(el))
		}
		var l Limit
		err := fields(el, key, func(k, v *yaml.Node, sub string) (err error) {
			switch k.Value {
			case "profile":
				if l.Profile, err = p.text(v, sub); err == nil && !slices.Contains(c.Profiles(), l.Profile) {
					err = p.errorf(v.Line, sub, "unknown agent profile %q (known: %s)", l.Profile, strings.Join(c.Profiles(), ", "))
				}
			case "from":
				l.From, err = p.integer(v, sub, 0, maxUntil)
			case "until":
				l.Until, err = p.integer(v, sub, 0, maxUntil)
			default:
				err = p.errorf(k.Line, sub, "unknown key (want profile, from, until)")
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		switch {
		case l.Profile == "":
			return nil, p.errorf(el.Line, key+".profile", "missing (one of %s)", strings.Join(c.Profiles(), ", "))
		case l.Until <= l.From:
			return nil, p.errorf(el.Line, key+".until", "%d: must be after from (%d)", l.Until, l.From)
		}
		out[i] = l
	}
	return out, nil
}

// ids decodes a list of loop ids, or one string of them separated by commas.
func (p parser) ids(n *yaml.Node, key string) ([]string, error) {
	var raw []string
	switch {
	case n.Kind == yaml.SequenceNode:
		for _, el := range n.Content {
			s, err := p.text(el, key)
			if err != nil {
				return nil, err
			}
			raw = append(raw, s)
		}
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		raw = strings.Split(n.Value, ",")
	default:
		return nil, p.errorf(n.Line, key, "must be a list of loop ids, got %s", config.Describe(n))
	}
	var out []string
	for _, s := range raw {
		if s = strings.TrimSpace(s); s == "" {
			return nil, p.errorf(n.Line, key, "an empty id")
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

func baseName(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}
