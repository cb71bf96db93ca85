package artifact

import "fmt"

// MaxSectionBytes bounds one section's text: every section becomes a child
// loop's task, and a task is limited to this many bytes
// (control.MaxTaskBytes is the same number).
const MaxSectionBytes = 256 << 10

// CheckSections reports the first section of d whose text is over
// MaxSectionBytes. The runner calls it while validating, so an oversized
// section fails the iteration that wrote it (with this message as feedback)
// instead of failing later, when the children are spawned.
func (d Doc) CheckSections() error {
	for _, s := range d.Sections {
		if len(s.Text) > MaxSectionBytes {
			return fmt.Errorf("section %d '%s' is %d bytes; the limit is %d (every section becomes a child loop's task: split it or shorten it)",
				s.N, s.Name, len(s.Text), MaxSectionBytes)
		}
	}
	return nil
}
