package tui

import (
	"context"
	"errors"
	"fmt"
	"io"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// ErrInterrupted is Run's answer, with Options.ReportInterrupt, when the
// dashboard ended by ctrl+c or by its context rather than by q.
var ErrInterrupted = errors.New("interrupted")

// Run shows the dashboard on out (in the alternate screen), reading keys from
// in, until the user quits or ctx ends. Cancelling ctx also ends the event
// stream and any request in flight.
func Run(ctx context.Context, o Options, in io.Reader, out io.Writer) error {
	if o.Client == nil && o.Dial == nil {
		return errors.New("tui: no daemon client")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.Notify == nil {
		o.Notify = out
	}
	m := New(o)
	m.ctx = ctx
	m.setStyles(newStyles(lipgloss.NewRenderer(out), o.NoColor))
	p := tea.NewProgram(m,
		tea.WithContext(ctx),
		tea.WithInput(in),
		tea.WithOutput(out),
		tea.WithAltScreen(),
		tea.WithReportFocus(), // desktop notifications only while the terminal is not focused
	)
	final, err := p.Run()
	if err != nil && errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		if o.ReportInterrupt {
			return ErrInterrupted
		}
		return nil // the caller ended it: a clean stop
	}
	if err != nil {
		return fmt.Errorf("tui: %w", err)
	}
	if fm, ok := final.(Model); ok && fm.interrupted && o.ReportInterrupt {
		return ErrInterrupted
	}
	return nil
}
