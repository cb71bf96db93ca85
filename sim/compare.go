package sim

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/go-json-experiment/json/v1"
)

// Compare runs w under each named policy (Policies), in that order.
func Compare(w *Workload, names []string) ([]Result, error) {
	out := make([]Result, 0, len(names))
	for _, n := range names {
		r, err := RunWith(w, Options{Policy: n})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ParsePolicies splits a --compare list ("fifo,loopr") and checks each name.
func ParsePolicies(list string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		known := false
		for _, p := range Policies {
			known = known || p == n
		}
		if !known {
			return nil, fmt.Errorf("--compare: unknown policy %q: want a list of %s", n, strings.Join(Policies, ", "))
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--compare: empty: want a list of %s", strings.Join(Policies, ", "))
	}
	return out, nil
}

// comparison is the JSON form of --compare --json.
type comparison struct {
	Policies []policyMetrics `json:"policies"`
}

type policyMetrics struct {
	Policy  string  `json:"policy"`
	Metrics Metrics `json:"metrics"`
}

// WriteCompareJSON writes {"policies": [{"policy": "fifo", "metrics": {…}}, …]}.
func WriteCompareJSON(w io.Writer, rs []Result) error {
	c := comparison{Policies: make([]policyMetrics, len(rs))}
	for i, r := range rs {
		c.Policies[i] = policyMetrics{Policy: r.Policy, Metrics: r.Metrics}
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteCompareText writes one line per policy, then each tree's flow
// time under each policy.
func WriteCompareText(w io.Writer, rs []Result) error {
	if len(rs) == 0 {
		return nil
	}
	var b strings.Builder
	m0 := rs[0].Metrics
	fmt.Fprintf(&b, "%d trees, %d slots, work %s, lower bound %s\n\n", len(m0.Trees), m0.Slots, clock(float64(m0.Work)), clock(m0.LowerBound))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tMAKESPAN\t÷ BOUND\tMEAN FLOW\tP95 FLOW\tMAX SLOWDOWN\tUTILISATION")
	for _, r := range rs {
		m := r.Metrics
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%s\t%.2f\t%.0f%%\n", r.Policy, clock(float64(m.Makespan)), float64(m.Makespan)/max(m.LowerBound, 1),
			clock(m.MeanFlow), clock(m.P95Flow), maxSlowdown(m), 100*m.Utilisation)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "TREE\tSUBMIT\tCRITICAL PATH")
	for _, r := range rs {
		fmt.Fprintf(tw, "\t%s FLOW", strings.ToUpper(r.Policy))
	}
	fmt.Fprintln(tw)
	for i, t := range m0.Trees {
		fmt.Fprintf(tw, "%s\t%s\t%s", t.Root, clock(float64(t.Submit)), clock(float64(t.CriticalPath)))
		for _, r := range rs {
			fmt.Fprintf(tw, "\t%s", flowText(r.Metrics.Trees[i]))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func maxSlowdown(m Metrics) float64 {
	out := 0.0
	for _, t := range m.Trees {
		out = max(out, t.Slowdown)
	}
	return out
}

func flowText(t TreeMetrics) string {
	if t.Flow < 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%.2f×)", clock(float64(t.Flow)), t.Slowdown)
}

// clock formats seconds as 1h02m03s, 2m03s or 45s.
func clock(sec float64) string {
	s := int(sec + 0.5)
	switch {
	case s >= 3600:
		return fmt.Sprintf("%dh%02dm%02ds", s/3600, s%3600/60, s%60)
	case s >= 60:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		return fmt.Sprintf("%ds", s)
	}
}
