package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/loop"
)

func (m Model) feedbackKey(k tea.KeyMsg) (Model, tea.Cmd) {
	if m.confirm.action == actionComment {
		return m.commentKey(k) // diff.go
	}
	switch {
	case key.Matches(k, m.keys.Accept) && m.confirm.action == api.ActionAnswer:
		m.mode = modeNormal
		m.input.Blur()
		return m, m.act(m.confirm.id, api.ActionAnswer, api.ActionRequest{Answer: strings.TrimSpace(m.input.Value())})
	case k.Type == tea.KeyEsc && m.confirm.action == api.ActionAnswer:
		m.mode = modeNormal
		m.input.Blur()
		m.flash = flash{text: "answer cancelled: the loop still needs you"}
		return m, nil
	case key.Matches(k, m.keys.Accept):
		text := strings.TrimSpace(m.input.Value())
		if text == "" {
			m.flash = flash{text: "feedback is empty: write what the next iteration should change, or esc", err: true}
			return m, nil
		}
		m.mode = modeNormal
		m.input.Blur()
		return m, m.act(m.confirm.id, api.ActionIterate, api.ActionRequest{Feedback: text})
	case k.Type == tea.KeyEsc:
		m.mode = modeNormal
		m.input.Blur()
		m.flash = flash{text: "iterate cancelled"}
		return m, nil
	}
	m.flash = flash{}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	return m, cmd
}

func (m Model) confirmKey(k tea.KeyMsg) (Model, tea.Cmd) {
	switch {
	case key.Matches(k, m.keys.Yes):
		m.mode = modeNormal
		c := m.confirm
		return m, m.act(c.id, c.action, api.ActionRequest{})
	case key.Matches(k, m.keys.No):
		m.mode = modeNormal
		m.flash = flash{text: verbNoun(m.confirm.action) + " not confirmed: nothing changed"}
	}
	return m, nil
}

// startAction checks that the action fits the selected loop's status, then
// asks for confirmation or feedback where it must, or acts at once. A refusal
// says why in the status line.
func (m Model) startAction(action string) (Model, tea.Cmd) {
	l := m.selected()
	if l == nil {
		m.flash = flash{text: "no loop selected", err: true}
		return m, nil
	}
	if refusal := refuse(action, l, m.descendants(l.ID) > 0); refusal != "" {
		m.flash = flash{text: refusal, err: true}
		return m, nil
	}
	if m.client == nil || m.conn != connConnected {
		m.flash = flash{text: "not connected to the daemon: try again when it is back", err: true}
		return m, nil
	}
	name := fmt.Sprintf("%s %q", l.Type, title(l))
	switch action {
	case api.ActionCancel:
		what := name
		if n := m.descendants(l.ID); n > 0 {
			what += fmt.Sprintf(" and %d unfinished loop%s under it", n, plural(n))
			if !loop.CanTransition(l.Status, loop.Cancelled) {
				// A finished loop keeps its status; what runs below it stops.
				what = fmt.Sprintf("the %d unfinished loop%s under %s (it stays %s)", n, plural(n), name, statusText(l.Status, false))
			}
		}
		m.mode = modeConfirm
		m.confirm = confirmation{action: action, id: l.ID, prompt: "cancel " + what + "?"}
		return m, nil
	case api.ActionReject:
		m.mode = modeConfirm
		m.confirm = confirmation{action: action, id: l.ID, prompt: "reject " + name + "? it fails and spawns nothing"}
		return m, nil
	case api.ActionApprove:
		what := "its children are created and start"
		if f, ok := artifact.FormatOf(l.Type); ok {
			what = "its " + strings.ToLower(f.Section) + " are created and start"
		}
		if l.Status == loop.AwaitingReview {
			what = "its branch goes to the merge queue"
		}
		m.mode = modeConfirm
		m.confirm = confirmation{action: action, id: l.ID, prompt: "approve " + name + "? " + what}
		return m, nil
	case api.ActionIterate:
		m.mode = modeFeedback
		m.confirm = confirmation{action: action, id: l.ID}
		m.input.Placeholder = "what should the next iteration change?"
		// The placeholder says what to write: the prompt gives way to it.
		m.input.Prompt = "feedback for " + name + ": "
		if lipgloss.Width(m.input.Prompt)+lipgloss.Width(m.input.Placeholder)+inputReserve(modeFeedback) > m.width {
			m.input.Prompt = "feedback: "
		}
		m.input.SetValue("")
		m.sizeInput()
		return m, m.input.Focus()
	case api.ActionAnswer:
		m.mode = modeFeedback
		m.confirm = confirmation{action: action, id: l.ID}
		m.input.Prompt = "answer " + name + ": "
		m.input.Placeholder = "your answer, put in its next prompt (enter: send, may be empty)"
		m.input.SetValue("")
		m.sizeInput()
		return m, m.input.Focus()
	case api.ActionPause:
		if l.Status == loop.Paused {
			action = api.ActionResume
		}
	}
	return m, m.act(l.ID, action, api.ActionRequest{})
}

// refuse returns why action does not apply to l, or "" when it does.
// liveBelow says whether any loop under l can still be cancelled.
func refuse(action string, l *loop.Loop, liveBelow bool) string {
	st := statusText(l.Status, false)
	switch action {
	case api.ActionCancel:
		if !loop.CanTransition(l.Status, loop.Cancelled) && !liveBelow {
			return fmt.Sprintf("can't cancel: this %s is already %s and nothing under it runs or waits", l.Type, st)
		}
	case api.ActionReset:
		if l.Status != loop.Failed {
			return fmt.Sprintf("can't reset: only failed loops reset, this %s is %s", l.Type, st)
		}
	case api.ActionPause:
		if l.Status != loop.Pending && l.Status != loop.Paused {
			return fmt.Sprintf("can't pause: only pending loops pause (and paused ones resume), this %s is %s", l.Type, st)
		}
	case api.ActionAnswer:
		if l.Status != loop.NeedsHuman {
			return fmt.Sprintf("can't answer: only a loop that needs you takes an answer, this %s is %s", l.Type, st)
		}
		if l.Needs != nil && l.Needs.Reason == loop.NeedsBudget { // answered, the budget gate would hold it
			return fmt.Sprintf("can't answer: this %s waits for a budget, not an answer — %s resumes it", l.Type, loop.ShortIDs(l.NeedsAction()))
		}
	case api.ActionApprove, api.ActionReject, api.ActionIterate:
		if !l.Status.AwaitsPerson() {
			return fmt.Sprintf("can't %s: only a plan awaiting approval or a task awaiting review can be %s, this %s is %s",
				action, pastTense(action), l.Type, st)
		}
	}
	return ""
}

// act sends an action to the daemon.
func (m Model) act(id, action string, req api.ActionRequest) tea.Cmd {
	c, ctx := m.client, m.ctx
	if c == nil {
		return nil
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		res, err := c.Act(ctx, id, action, req)
		return actMsg{action: action, id: id, res: res, err: err}
	}
}

func (m Model) actDone(msg actMsg) (tea.Model, tea.Cmd) {
	if msg.err != nil {
		m.flash = flash{text: fmt.Sprintf("%s %s: %s", msg.action, loop.ShortID(msg.id), loop.ShortIDs(msg.err.Error())), err: true}
		return m, nil
	}
	m.applyLoop(msg.res.Loop)
	name := msg.id
	if l := m.loops[msg.id]; l != nil {
		name = fmt.Sprintf("%s %q", l.Type, title(l))
	}
	text := pastTense(msg.action) + " " + name
	// The other loops the action changed, named by title in the status line.
	others := slices.DeleteFunc(slices.Clone(msg.res.Affected), func(id string) bool { return id == msg.id })
	switch n := len(others); {
	case msg.action == api.ActionIterate:
		text = name + " goes back for another iteration with your feedback"
		if n > 0 {
			text += fmt.Sprintf("; invalidated %d loop%s", n, plural(n))
		}
	case msg.action == api.ActionAnswer:
		text = name + " resumes with your answer"
	case msg.action == api.ActionCancel && msg.res.Loop.ID != "" && msg.res.Loop.Status != loop.Cancelled:
		text = fmt.Sprintf("cancelled %d loop%s under %s (it stays %s)", n, plural(n), name, statusText(msg.res.Loop.Status, false))
	case msg.action == api.ActionCancel && n > 0:
		text += fmt.Sprintf(" and %d loop%s under it", n, plural(n))
	case msg.action == api.ActionApprove && msg.res.Loop.Status == loop.Merging:
		text += "; its branch waits in the merge queue"
	case msg.action == api.ActionApprove:
		child := "child loop"
		if l := m.loops[msg.id]; l != nil {
			if f, ok := artifact.FormatOf(l.Type); ok {
				child = strings.ToLower(f.Child)
			}
		}
		text += fmt.Sprintf("; created %d %s%s", n, child, plural(n))
	}
	m.flash = flash{text: text, names: others}
	if msg.action != api.ActionCancel && msg.id == m.art.id {
		m.art.open = false // decided: back to the tree, where the new loops show
	}
	if m.synced {
		m.rebuild()
	}
	return m, nil
}

func pastTense(action string) string {
	switch action {
	case api.ActionCancel:
		return "cancelled"
	case api.ActionReset:
		return "reset"
	case api.ActionPause:
		return "paused"
	case api.ActionResume:
		return "resumed"
	case api.ActionApprove:
		return "approved"
	case api.ActionReject:
		return "rejected"
	case api.ActionIterate:
		return "iterated"
	case api.ActionAnswer:
		return "answered"
	}
	return action + "ed"
}

func verbNoun(action string) string {
	switch action {
	case api.ActionCancel:
		return "cancel"
	case api.ActionReject:
		return "reject"
	case api.ActionApprove:
		return "approval"
	}
	return action
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// title is a loop's display name: its title, else its id.
func title(l *loop.Loop) string {
	if l.Title != "" {
		return l.Title
	}
	return l.ID
}
