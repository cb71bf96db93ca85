package cli

import (
	"fmt"
	"strings"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
)

// printWorkers lists the workers of an etcd store, after `loopr status`'s
// table: name, host, running/max_loops, labels, and which one is the
// scheduler and which is this daemon.
func printWorkers(e *env, c *api.Cluster) {
	fmt.Fprintf(e.stdout, "\nWORKERS (%d, lease %ds)\n", len(c.Workers), c.LeaseTTLSecs)
	if len(c.Workers) == 0 {
		fmt.Fprintf(e.stdout, "  none: start `loopr daemon` on a machine that reaches the store\n")
		return
	}
	w := table(e.stdout)
	fmt.Fprintf(w, "  NAME\tHOST\tRUNNING\tLABELS\t\n")
	for _, wk := range c.Workers {
		labels := strings.Join(wk.Labels, ",")
		if labels == "" {
			labels = "-"
		}
		var marks []string
		if wk.Scheduler {
			marks = append(marks, "scheduler")
		}
		if wk.Name == c.Worker {
			marks = append(marks, "this daemon")
		}
		fmt.Fprintf(w, "  %s\t%s\t%d/%d\t%s\t%s\n", termsafe.Line(wk.Name), termsafe.Line(wk.Host), wk.Running, wk.MaxLoops, termsafe.Line(labels), strings.Join(marks, ", "))
	}
	w.Flush()
}
