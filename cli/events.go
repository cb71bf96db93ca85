package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/v1"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) eventsCmd() *cobra.Command {
	var follow, jsonOut bool
	c := &cobra.Command{
		Use:   "events [ID] [-f] [--json]",
		Short: "Print the event journal, of all loops or of one (-f follows the daemon's stream)",
		Long: `Print the event journal in order, one aligned line per event: time, loop,
type and title, event, detail. With ID only that loop's events. With -f,
after the journal so far, print events as the daemon journals them, until
it stops or you press Ctrl-C. --json prints JSON Lines instead (the event's
fields plus its loop's type and title).

ID is a loop id, a unique prefix of one (at least 4 characters), or its short id (the end of the id, as list and branch names show it).`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withReader(func(b Backend) error {
				ctx := cmd.Context()
				id := ""
				if len(args) == 1 {
					var err error
					if id, err = resolveID(ctx, b, args[0]); err != nil {
						return err
					}
				}
				p := &eventPrinter{w: e.stdout, json: jsonOut}
				c, viaDaemon := b.(*client.Client)
				if !follow || !viaDaemon {
					if err := journal(ctx, b, id, 0, p.print); err != nil {
						return err
					}
					if follow {
						fmt.Fprintf(e.stderr, "loopr: no daemon running here: no events are coming (start one with loopr daemon --detach)\n")
					}
					return nil
				}
				return e.followEvents(ctx, c, id, p)
			})
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "go on printing events as they happen (needs a daemon)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON Lines")
	return c
}

// journal reads the journal through the daemon or the store.
func journal(ctx context.Context, b Backend, id string, until uint64, fn func(api.JournalEntry) error) error {
	switch b := b.(type) {
	case *client.Client:
		return b.Journal(ctx, id, 0, until, fn)
	case *local:
		return b.svc.Journal(id, 0, until, fn)
	}
	return fmt.Errorf("events: this backend has no journal")
}

// followEvents prints the journal up to the daemon's stream snapshot, then
// the stream's events as they come, without a gap or a repeat.
func (e *env) followEvents(ctx context.Context, c *client.Client, id string, p *eventPrinter) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := c.Events(ctx)
	if err != nil {
		return err
	}
	first, ok := <-ch
	if !ok || first.Type != api.StreamSnapshot {
		return fmt.Errorf("events: the daemon's stream did not start with a snapshot")
	}
	if err := c.Journal(ctx, id, 0, first.Seq, p.print); err != nil {
		return err
	}
	for m := range ch {
		if m.Type != api.StreamEvent || m.Event == nil || (id != "" && m.Event.Loop != id) {
			continue
		}
		entry := api.JournalEntry{Event: *m.Event}
		if m.Loop != nil {
			entry.Type, entry.Title = m.Loop.Type, m.Loop.Title
		}
		if err := p.print(entry); err != nil {
			return err
		}
	}
	if ctx.Err() == nil {
		fmt.Fprintln(e.stderr, "loopr: the daemon stopped; no more events")
	}
	return nil
}

// eventPrinter prints journal entries as aligned lines or JSON Lines.
type eventPrinter struct {
	w    io.Writer
	json bool
}

func (p *eventPrinter) print(ev api.JournalEntry) error {
	if p.json {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	id, what := "-", "-"
	if ev.Loop != "" {
		id = ev.Loop
		what = ev.Type
		if ev.Title != "" {
			what += " " + ev.Title
		}
	}
	line := fmt.Sprintf("%s  %-26s  %-32s  %-30s  %s", ev.Time.Local().Format("2006-01-02 15:04:05"),
		id, oneLine(what, 32), eventName(ev.Event), oneLine(ev.Message, 200))
	_, err := fmt.Fprintln(p.w, strings.TrimRight(line, " "))
	return err
}

// eventName is the event column: the kind, a transition's two statuses,
// an iteration's number.
func eventName(ev loop.Event) string {
	switch {
	case ev.Kind == loop.EventTransition:
		return fmt.Sprintf("%s → %s", ev.From, ev.To)
	case ev.Kind == loop.EventIteration && ev.Iteration > 0:
		return fmt.Sprintf("iteration %d", ev.Iteration)
	}
	return string(ev.Kind)
}
