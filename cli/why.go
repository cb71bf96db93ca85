package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (e *env) whyCmd() *cobra.Command {
	var (
		jsonOut bool
		nowFlag string
	)
	c := &cobra.Command{
		Use:   "why ID",
		Short: "Explain a loop's priority and every scheduling gate",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := e.now().UTC()
			if nowFlag != "" {
				var err error
				if now, err = parseTime("--now", nowFlag); err != nil {
					return err
				}
			}
			return e.withReader(func(b Backend) error {
				w, err := b.Why(cmd.Context(), args[0], now)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, w)
				}
				fmt.Fprintf(e.stdout, "%s %q  %s  (%s, iteration %d/%d)\n", w.Loop.Type, w.Loop.Title, w.Loop.ID,
					w.Loop.Status, w.Loop.Iteration, w.Loop.MaxIterations)
				fmt.Fprintln(e.stdout, w.Formula)
				for _, g := range w.Gates {
					mark := "✓"
					if !g.OK {
						mark = "✗"
					}
					fmt.Fprintf(e.stdout, "  %s %s\n", mark, g.Text)
				}
				switch {
				case !w.Scheduled:
				case w.Row.Runnable:
					fmt.Fprintln(e.stdout, "runnable: yes — starts at the next scheduling tick")
				default:
					fmt.Fprintf(e.stdout, "runnable: %s\n", runnableText(w.Row.Runnable, w.Row.ReasonText))
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the explanation as JSON")
	c.Flags().StringVar(&nowFlag, "now", "", "evaluate at this RFC 3339 instant")
	return c
}
