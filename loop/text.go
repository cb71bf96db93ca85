package loop

// MapText returns l with f applied to every field of free text: what a
// person or an agent wrote (task, title, feedback, reason, answer, the
// needs detail, comments and the lines around them). Identifiers, paths,
// branch names, commits and the validate commands of its evidence (the
// configuration's) are left as they are. l is not modified: the slices
// and pointers it changes are copied.
//
// The store passes every record it writes through it with the daemon's
// redactor (store.SetRedact), so no secret an agent printed is kept.
func (l Loop) MapText(f func(string) string) Loop {
	l.Task = f(l.Task)
	l.Title = f(l.Title)
	l.TriggeredBy = f(l.TriggeredBy)
	l.Feedback = f(l.Feedback)
	l.Reason = f(l.Reason)
	l.Answer = f(l.Answer)
	if l.Needs != nil {
		n := *l.Needs
		n.Detail = f(n.Detail)
		l.Needs = &n
	}
	if len(l.Comments) > 0 {
		cs := make([]Comment, len(l.Comments))
		for i, c := range l.Comments {
			c.Text, c.Context = f(c.Text), f(c.Context)
			cs[i] = c
		}
		l.Comments = cs
	}
	return l
}
