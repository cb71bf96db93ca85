package fastjson

import (
	"errors"
	"io"
)

// Indenter re-indents one compact JSON array or object streamed through
// Write exactly as json.Indent(dst, src, "", "  ") would, and Close ends it
// with a newline: the bytes of a json.Encoder with SetIndent("", "  ")
// encoding the value the JSON decodes to (when its strings are valid
// UTF-8). It keeps no more than a buffer: a 100 MB document streams. It
// checks the document's shape as it goes (brackets balanced, strings
// closed, nothing after the value), not every JSON rule: feed it JSON that
// a JSON encoder wrote, and Close says whether it all arrived.
type Indenter struct {
	w          io.Writer
	buf        []byte
	stack      []byte // open brackets
	needIndent bool   // an object or array just opened: indent before its first member
	inString   bool
	escape     bool
	started    bool // the value began
	err        error
}

// NewIndenter returns an Indenter that writes to w.
func NewIndenter(w io.Writer) *Indenter {
	return &Indenter{w: w, buf: make([]byte, 0, 64<<10)}
}

// ErrTruncated reports a document that ended before its value closed.
var ErrTruncated = errors.New("JSON document ends before its value closes")

var errShape = errors.New("malformed JSON document")

func (ix *Indenter) newline() {
	ix.buf = append(ix.buf, '\n')
	for range len(ix.stack) {
		ix.buf = append(ix.buf, ' ', ' ')
	}
}

func (ix *Indenter) flush() error {
	if ix.err == nil && len(ix.buf) > 0 {
		_, ix.err = ix.w.Write(ix.buf)
	}
	ix.buf = ix.buf[:0]
	return ix.err
}

// Write indents p, which may end anywhere in the document.
func (ix *Indenter) Write(p []byte) (int, error) {
	if ix.err != nil {
		return 0, ix.err
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if ix.inString {
			// Copy the run of plain string bytes at once.
			j := i
			for j < len(p) && p[j] != '"' && p[j] != '\\' && !ix.escape {
				j++
			}
			if j > i {
				ix.buf = append(ix.buf, p[i:j]...)
				i = j - 1
				continue
			}
			ix.buf = append(ix.buf, c)
			switch {
			case ix.escape:
				ix.escape = false
			case c == '\\':
				ix.escape = true
			case c == '"':
				ix.inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if ix.started && len(ix.stack) == 0 {
			ix.err = errShape // something after the value
			return i, ix.err
		}
		if !ix.started && c != '[' && c != '{' {
			ix.err = errShape
			return i, ix.err
		}
		ix.started = true
		if ix.needIndent && c != ']' && c != '}' {
			ix.needIndent = false
			ix.newline()
		}
		switch c {
		case '{', '[':
			ix.buf = append(ix.buf, c)
			ix.stack = append(ix.stack, c)
			ix.needIndent = true
		case ',':
			ix.buf = append(ix.buf, c)
			ix.newline()
		case ':':
			ix.buf = append(ix.buf, ':', ' ')
		case '}', ']':
			n := len(ix.stack)
			if n == 0 || (c == '}') != (ix.stack[n-1] == '{') {
				ix.err = errShape
				return i, ix.err
			}
			ix.stack = ix.stack[:n-1]
			if ix.needIndent {
				ix.needIndent = false // an empty object or array stays {} or []
			} else {
				ix.newline()
			}
			ix.buf = append(ix.buf, c)
		case '"':
			ix.buf = append(ix.buf, c)
			ix.inString = true
		default:
			ix.buf = append(ix.buf, c)
		}
		if len(ix.buf) >= 60<<10 {
			if err := ix.flush(); err != nil {
				return i, err
			}
		}
	}
	return len(p), nil
}

// Close writes the final newline and what is buffered, and reports a
// document that did not arrive whole.
func (ix *Indenter) Close() error {
	if ix.err == nil && (!ix.started || len(ix.stack) > 0 || ix.inString) {
		ix.err = ErrTruncated
	}
	if ix.err != nil {
		ix.flush()
		return ix.err
	}
	ix.buf = append(ix.buf, '\n')
	return ix.flush()
}
