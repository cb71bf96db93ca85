package sim

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/scheduler"
)

// admitText is the rest of an ADMIT line: type, priority, tier, fairness.
func admitText(l *simLoop, r *scheduler.Row, running, maxLoops int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s prio=%d", l.Type, r.Score.Priority)
	if r.Tier > 0 {
		fmt.Fprintf(&b, " tier=%d", r.Tier)
	}
	if r.Key != "" {
		fmt.Fprintf(&b, " key=%s cost=%s used=%s", r.Key, num(r.Cost), num(r.KeyUsed+r.Cost))
	}
	if l.ConflictKey != "" {
		fmt.Fprintf(&b, " conflict_key=%s", l.ConflictKey)
	}
	fmt.Fprintf(&b, " running=%d/%d", running, maxLoops)
	return b.String()
}

// num formats a cost: integers without decimals, others with one.
func num(f float64) string {
	if f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

func slicesSortedKeys(m map[string]*KeyStats) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// WriteJSON writes the events as a JSON array, one event per line:
// [{"t":3,"event":"admit","id":"a1"}, …].
func (r Result) WriteJSON(w io.Writer) error {
	var b strings.Builder
	b.WriteString("[")
	for i, e := range r.Events {
		if i > 0 {
			b.WriteString(",")
		}
		line, err := json.Marshal(e)
		if err != nil {
			return err
		}
		b.WriteString("\n  ")
		b.Write(line)
	}
	b.WriteString("\n]\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSONMetrics writes the events and the metrics as one object
// (`loopr sim --json --metrics`): {"policy": "loopr", "events": [...], "metrics": {...}}.
func (r Result) WriteJSONMetrics(w io.Writer) error {
	v := struct {
		Policy  string  `json:"policy"`
		Events  []Event `json:"events"`
		Metrics Metrics `json:"metrics"`
	}{r.Policy, r.Events, r.Metrics}
	if v.Events == nil {
		v.Events = []Event{}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// write adds the metrics to the text summary: makespan against its bound,
// tree completion, and each tree's times when the workload has trees.
func (m Metrics) write(b *strings.Builder) error {
	fmt.Fprintf(b, "\nmakespan %s (lower bound %s: %.2f×); slots %.0f%% busy; tree completion (flow) mean %s, p95 %s\n",
		clock(float64(m.Makespan)), clock(m.LowerBound), float64(m.Makespan)/max(m.LowerBound, 1), 100*m.Utilisation, clock(m.MeanFlow), clock(m.P95Flow))
	if len(m.Trees) == 0 || len(m.Trees) == m.loops {
		return nil // no loop has a parent: the keys above say it all
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TREE\tSUBMIT\tFIRST TASK\tCOMPLETE\tFLOW\tCRITICAL PATH\tSLOWDOWN")
	for _, t := range m.Trees {
		slow := "-"
		if t.Flow >= 0 {
			slow = fmt.Sprintf("%.2f×", t.Slowdown)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Root, at2(t.Submit), at2(t.FirstTaskDone), at2(t.Complete), at2(t.Flow), clock(float64(t.CriticalPath)), slow)
	}
	return tw.Flush()
}

// at2 formats a time of the metrics: -1 is "-".
func at2(sec int) string {
	if sec < 0 {
		return "-"
	}
	return clock(float64(sec))
}

// WriteText writes the timeline, a summary per key and what still waits.
func (r Result) WriteText(w io.Writer) error {
	var b strings.Builder
	width := 0
	for _, e := range r.Events {
		width = max(width, len(e.ID))
	}
	for _, e := range r.Events {
		line := fmt.Sprintf("T=%3d %-6s %-*s %s", e.T, strings.ToUpper(e.Event), width, e.ID, e.info)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	fmt.Fprintf(&b, "\nsimulated 0..%d s; fairness %s\n\n", r.Until, map[bool]string{true: "on", false: "off"}[r.Fairness])
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tLOOPS\tADMITTED\tDONE\tWAIT AVG\tWAIT MAX\tDONE AT")
	for _, k := range r.Keys {
		avg, mx := "-", "-"
		if len(k.Waits) > 0 {
			sum, m := 0, 0
			for _, x := range k.Waits {
				sum += x
				m = max(m, x)
			}
			avg, mx = num(float64(sum)/float64(len(k.Waits))), strconv.Itoa(m)
		}
		doneAt := "-"
		if len(k.DoneAt) > 0 {
			parts := make([]string, len(k.DoneAt))
			for i, t := range k.DoneAt {
				parts[i] = strconv.Itoa(t)
			}
			if len(parts) > 12 { // the first and last five
				parts = append(append(parts[:5:5], "…"), parts[len(parts)-5:]...)
			}
			doneAt = strings.Join(parts, " ")
		}
		admitted := strconv.Itoa(k.Admitted)
		if k.Expired > 0 {
			admitted += fmt.Sprintf(" (%d expired)", k.Expired)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", k.Key, k.Loops, admitted, len(k.DoneAt), avg, mx, doneAt)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.Metrics.write(&b); err != nil {
		return err
	}
	if len(r.Waiting) > 0 {
		fmt.Fprintf(&b, "\nstill waiting at T=%d:\n", r.Until)
		for _, wt := range r.Waiting {
			texts := make([]string, len(wt.Reasons))
			for i, re := range wt.Reasons {
				texts[i] = re.Text
			}
			fmt.Fprintf(&b, "  %s: %s\n", wt.ID, strings.Join(texts, "; "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
