package tui

import (
	"github.com/charmbracelet/lipgloss"
	"github.com/loopr-dev/loopr/loop"
	"github.com/muesli/termenv"
)

// styles is every style of the dashboard, in one place. Colour only adds to
// what icons and words already say; with NoColor the styles keep bold,
// faint and reverse attributes and drop every colour.
type styles struct {
	r *lipgloss.Renderer

	Brand, Header, HeaderDim, Warn lipgloss.Style
	Rule, ColHeader, Dim, Selected lipgloss.Style
	Banner, Error, Info, Prompt    lipgloss.Style
	PaneTitle, PaneLabel           lipgloss.Style
	GateOK, GateBad, Connected     lipgloss.Style
	HelpKey, HelpDesc, HelpSep     lipgloss.Style
	HelpTitle, DiffAdd, DiffDel    lipgloss.Style
	OutTool, OutDone               lipgloss.Style // the output pane's tool calls, final result
	Status                         map[loop.Status]lipgloss.Style
}

// newStyles builds the styles for renderer r. noColor drops colours; an
// output that is not a terminal (r's profile Ascii) drops every attribute.
func newStyles(r *lipgloss.Renderer, noColor bool) styles {
	if noColor && r.ColorProfile() != termenv.Ascii {
		r.SetColorProfile(termenv.ANSI) // attributes only: no colour is ever set below
	}
	ns := r.NewStyle
	c := func(s lipgloss.Style, color string) lipgloss.Style {
		if noColor {
			return s
		}
		return s.Foreground(lipgloss.Color(color))
	}
	bg := func(s lipgloss.Style, color string) lipgloss.Style {
		if noColor {
			return s.Reverse(true)
		}
		return s.Background(lipgloss.Color(color))
	}
	st := styles{
		r:         r,
		Brand:     ns().Bold(true),
		Header:    ns(),
		HeaderDim: c(ns().Faint(noColor), "245"),
		Warn:      c(ns().Bold(true), "214"),
		Rule:      c(ns().Faint(noColor), "238"),
		ColHeader: c(ns().Bold(true), "245"),
		Dim:       c(ns().Faint(true), "242"),
		Selected:  bg(ns().Bold(true), "237"),
		Banner:    bg(c(ns().Bold(true), "231"), "124"),
		Error:     c(ns().Bold(true), "203"),
		Info:      c(ns(), "109"),
		Prompt:    c(ns().Bold(true), "214"),
		PaneTitle: c(ns().Bold(true), "75"),
		PaneLabel: c(ns(), "245"),
		GateOK:    c(ns(), "71"),
		GateBad:   c(ns().Bold(true), "203"),
		Connected: c(ns(), "71"),
		HelpKey:   c(ns().Bold(true), "250"),
		HelpDesc:  c(ns(), "245"),
		HelpSep:   c(ns(), "238"),
		HelpTitle: c(ns().Bold(true), "75"),
		DiffAdd:   c(ns(), "71"),
		DiffDel:   c(ns(), "203"),
		OutTool:   c(ns().Bold(true), "75"),
		OutDone:   c(ns().Bold(true), "71"),
		Status: map[loop.Status]lipgloss.Style{
			loop.Pending:          c(ns(), "75"),
			loop.Paused:           c(ns(), "179"),
			loop.Running:          c(ns().Bold(true), "78"),
			loop.Merging:          c(ns(), "80"),
			loop.AwaitingApproval: c(ns().Bold(true), "213"),
			loop.AwaitingReview:   c(ns().Bold(true), "177"),
			loop.NeedsHuman:       c(ns().Bold(true), "214"),
			loop.Complete:         c(ns(), "65"),
			loop.Failed:           c(ns().Bold(true), "203"),
			loop.Cancelled:        c(ns().Faint(true), "242"),
			loop.Expired:          c(ns().Faint(true), "242"),
			loop.Invalidated:      c(ns().Faint(true), "242"),
		},
	}
	return st
}

// statusStyle returns the style of status s (plain for unknown statuses).
func (s styles) statusStyle(st loop.Status) lipgloss.Style {
	if x, ok := s.Status[st]; ok {
		return x
	}
	return s.Header
}

// icon is the symbol of a status: the shape, not the colour, carries it.
func icon(s loop.Status) string {
	switch s {
	case loop.Pending:
		return "○"
	case loop.Running:
		return "●"
	case loop.Merging:
		return "⇢"
	case loop.AwaitingApproval:
		return "◆"
	case loop.AwaitingReview:
		return "◇"
	case loop.Failed:
		return "✗"
	case loop.Complete:
		return "✓"
	case loop.Paused:
		return "⏸"
	case loop.NeedsHuman:
		return "!"
	case loop.Cancelled, loop.Expired, loop.Invalidated:
		return "⊘"
	}
	return "?"
}

// statusText is the STATUS column: long words when there is room.
func statusText(s loop.Status, short bool) string {
	if s == loop.NeedsHuman {
		return "needs you"
	}
	if s == loop.AwaitingApproval {
		if short {
			return "awaiting"
		}
		return "awaiting approval"
	}
	if s == loop.AwaitingReview {
		if short {
			return "review"
		}
		return "awaiting review"
	}
	return string(s)
}
