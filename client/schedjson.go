package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// scheduler fetches GET /v1/scheduler and decodes it as it arrives, in a
// window of a few hundred KiB: 100k rows (30 MB) decode several times
// faster than through encoding/json and without holding the document.
// A document the fast decoder is not sure to read as encoding/json would
// (see decodeView) is fetched again and decoded by encoding/json.
func (c *Client) scheduler(ctx context.Context, path string) (api.SchedulerView, error) {
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return api.SchedulerView{}, c.transportError(err)
	}
	if resp.StatusCode/100 != 2 {
		return api.SchedulerView{}, decodeResponse(resp, nil)
	}
	p := parser{r: resp.Body, b: make([]byte, 0, 256<<10)}
	var v api.SchedulerView
	p.document(&v)
	resp.Body.Close()
	switch {
	case p.err == nil:
		return v, nil
	case !errors.Is(p.err, errSlow):
		return api.SchedulerView{}, c.transportError(p.err)
	}
	v = api.SchedulerView{}
	err = c.call(ctx, http.MethodGet, path, nil, &v)
	return v, err
}

// decodeView decodes a whole SchedulerView document as json.Unmarshal
// would: with the fast parser when it is sure to read it exactly as
// encoding/json does (it is for what the daemon writes), else with
// encoding/json (a key in another case, a surrogate escape, invalid UTF-8,
// a malformed document), so the result and the errors are encoding/json's.
func decodeView(b []byte, v *api.SchedulerView) error {
	p := parser{b: b}
	var out api.SchedulerView
	p.document(&out)
	if p.err == nil {
		*v = out
		return nil
	}
	*v = api.SchedulerView{}
	return json.Unmarshal(b, v)
}

// errSlow sends a document to encoding/json.
var errSlow = errors.New("not for the fast decoder")

// parser reads JSON from b[i:], refilling b from r (when not nil) at the
// points where the structure is known: before a punctuation mark, a key or
// a whole value (complete), so that the value parsers below always find
// their value whole in b.
type parser struct {
	b      []byte
	i      int
	r      io.Reader
	eof    bool
	err    error
	intern map[string]string // repeated strings (types, reasons) share one copy
}

// istr is str for a string many rows repeat: one copy for all of them.
func (p *parser) istr() string {
	if p.null() {
		return ""
	}
	if p.peek() != '"' {
		p.fail()
		return ""
	}
	end := bytes.IndexByte(p.b[p.i+1:], '"')
	if end < 0 {
		p.fail()
		return ""
	}
	raw := p.b[p.i+1 : p.i+1+end]
	if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return p.str()
	}
	for _, c := range raw {
		if c < 0x20 {
			return p.str() // str fails it as encoding/json does
		}
	}
	p.i += end + 2
	if s, ok := p.intern[string(raw)]; ok {
		return s
	}
	s := string(raw)
	if p.intern == nil {
		p.intern = map[string]string{}
	}
	if len(p.intern) < 4096 {
		p.intern[s] = s
	}
	return s
}

// fill reads more of the document into b, dropping what was consumed; false
// when there is no more.
func (p *parser) fill() bool {
	if p.r == nil || p.eof || p.err != nil {
		return false
	}
	n := copy(p.b[:cap(p.b)], p.b[p.i:])
	p.b, p.i = p.b[:n], 0
	if n == cap(p.b) {
		nb := make([]byte, n, 2*cap(p.b))
		copy(nb, p.b)
		p.b = nb
	}
	for {
		m, err := p.r.Read(p.b[n:cap(p.b)])
		p.b = p.b[:n+m]
		switch {
		case err == io.EOF:
			p.eof = true
		case err != nil:
			p.err = err
			p.i = len(p.b)
			return false
		}
		if m > 0 || p.eof {
			return m > 0
		}
	}
}

// nonSpace skips spaces, refilling, and reports whether a byte follows.
func (p *parser) nonSpace() bool {
	for {
		p.ws()
		if p.i < len(p.b) {
			return true
		}
		if !p.fill() {
			return false
		}
	}
}

// complete makes sure the value that starts at the next byte is wholly in
// b, and reports whether it is (false: malformed, or the input ended).
func (p *parser) complete() bool {
	if !p.nonSpace() {
		p.fail()
		return false
	}
	for {
		switch end := valueEnd(p.b[p.i:], p.eof || p.r == nil); {
		case end > 0:
			return true
		case end < 0:
			p.fail()
			return false
		}
		if !p.fill() {
			p.fail()
			return false
		}
	}
}

// valueEnd returns the length of the JSON value at the start of b, 0 when b
// ends inside it (and more may come), -1 when it is malformed. It only
// finds the value's extent; the parsers check the rest.
func valueEnd(b []byte, eof bool) int {
	switch b[0] {
	case '"', '{', '[':
		depth, inStr, esc := 0, false, false
		for i, c := range b {
			switch {
			case inStr:
				switch {
				case esc:
					esc = false
				case c == '\\':
					esc = true
				case c == '"':
					inStr = false
					if depth == 0 {
						return i + 1
					}
				}
			case c == '"':
				inStr = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				if depth--; depth == 0 {
					return i + 1
				}
				if depth < 0 {
					return -1
				}
			}
		}
		return 0
	case '}', ']', ',', ':':
		return -1
	}
	for i, c := range b {
		switch c {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':', '"', '{', '[':
			return i
		}
	}
	if eof {
		return len(b)
	}
	return 0
}

func (p *parser) fail() {
	if p.err == nil {
		p.err = errSlow
	}
	p.i = len(p.b)
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (p *parser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *parser) expect(c byte) {
	if p.peek() != c {
		p.fail()
		return
	}
	p.i++
}

// null consumes a null and reports whether there was one.
func (p *parser) null() bool {
	if p.peek() == 'n' && bytes.HasPrefix(p.b[p.i:], []byte("null")) {
		p.i += 4
		return true
	}
	return false
}

// members iterates over an object's members without closures.
type members struct {
	p     *parser
	first bool
	done  bool
	key   [64]byte // the current key, kept across a refill
}

// members consumes an object's '{' (or a null: no members).
func (p *parser) members() members {
	if !p.nonSpace() {
		p.fail()
		return members{p: p, done: true}
	}
	if p.b[p.i] == 'n' && p.complete() && p.null() {
		return members{p: p, done: true}
	}
	p.expect('{')
	return members{p: p, first: true, done: p.err != nil}
}

// next moves to the next member and returns its key (a key with escapes
// goes to encoding/json), positioned at the value; false after the
// object's last member.
func (m *members) next() ([]byte, bool) {
	p := m.p
	if m.done || p.err != nil {
		return nil, false
	}
	if !p.nonSpace() {
		p.fail()
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '}':
		p.i++
		m.done = true
		return nil, false
	case m.first:
		m.first = false
	case c == ',':
		p.i++
	default:
		p.fail()
		return nil, false
	}
	if !p.complete() || p.b[p.i] != '"' {
		p.fail()
		return nil, false
	}
	start := p.i + 1
	end := bytes.IndexByte(p.b[start:], '"')
	raw := p.b[start : start+end]
	if bytes.IndexByte(raw, '\\') >= 0 || len(raw) > len(m.key) {
		p.fail() // escaped or long keys: encoding/json's
		return nil, false
	}
	key := m.key[:copy(m.key[:], raw)]
	p.i = start + end + 1
	if !p.nonSpace() {
		p.fail()
		return nil, false
	}
	p.expect(':')
	return key, p.err == nil
}

// array calls elem for each element of an array; it reports false for null.
func (p *parser) array(elem func()) bool {
	if p.null() {
		return false
	}
	p.expect('[')
	if p.peek() == ']' {
		p.i++
		return true
	}
	for p.err == nil {
		elem()
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return true
		default:
			p.fail()
		}
	}
	return true
}

func (p *parser) str() string {
	if p.peek() != '"' {
		p.fail()
		return ""
	}
	p.i++
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				p.fail()
				return ""
			}
			return string(s)
		case c == '\\':
			if !utf8.Valid(p.b[start:p.i]) {
				p.fail()
				return ""
			}
			return p.escaped(p.b[start:p.i])
		case c < 0x20:
			p.fail()
			return ""
		}
		p.i++
	}
	p.fail()
	return ""
}

// escaped finishes a string from its first escape on, prefix being what
// came before.
func (p *parser) escaped(prefix []byte) string {
	var sb strings.Builder
	sb.Write(prefix)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return sb.String()
		case c < 0x20:
			p.fail()
			return ""
		case c != '\\':
			j := p.i
			for j < len(p.b) && p.b[j] != '\\' && p.b[j] != '"' && p.b[j] >= 0x20 {
				j++
			}
			if !utf8.Valid(p.b[p.i:j]) {
				p.fail()
				return ""
			}
			sb.Write(p.b[p.i:j])
			p.i = j
			continue
		}
		if p.i+1 >= len(p.b) {
			p.fail()
			return ""
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			sb.WriteByte(e)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			if p.i+4 > len(p.b) {
				p.fail()
				return ""
			}
			r, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 16)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				p.fail() // surrogate pairs: encoding/json's rules
				return ""
			}
			sb.WriteRune(rune(r))
			p.i += 4
		default:
			p.fail()
			return ""
		}
	}
	p.fail()
	return ""
}

// number returns the literal of a number.
func (p *parser) number() []byte {
	p.ws()
	j := p.i
	for j < len(p.b) {
		c := p.b[j]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			j++
			continue
		}
		break
	}
	n := p.b[p.i:j]
	p.i = j
	if !validNumber(n) {
		p.fail()
		return []byte("0")
	}
	return n
}

// validNumber reports whether n is a JSON number:
// -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?
func validNumber(n []byte) bool {
	i := 0
	if i < len(n) && n[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(n) && n[i] >= '0' && n[i] <= '9' {
			i++
		}
		return i - j
	}
	switch {
	case i < len(n) && n[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(n) && n[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(n) && (n[i] == 'e' || n[i] == 'E') {
		i++
		if i < len(n) && (n[i] == '+' || n[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(n)
}

func (p *parser) int() int64 {
	if p.null() {
		return 0
	}
	n := p.number()
	if len(n) < 16 { // fits: plain digits, the common case
		neg, v, ok := false, int64(0), true
		for i, c := range n {
			switch {
			case c == '-' && i == 0:
				neg = true
			case c >= '0' && c <= '9':
				v = v*10 + int64(c-'0')
			default:
				ok = false
			}
		}
		if ok {
			if neg {
				v = -v
			}
			return v
		}
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		p.fail()
	}
	return v
}

func (p *parser) float() float64 {
	if p.null() {
		return 0
	}
	f, err := strconv.ParseFloat(string(p.number()), 64)
	if err != nil {
		p.fail()
	}
	return f
}

func (p *parser) bool() bool {
	switch {
	case p.null():
		return false
	case bytes.HasPrefix(p.b[p.i:], []byte("true")):
		p.i += 4
		return true
	case bytes.HasPrefix(p.b[p.i:], []byte("false")):
		p.i += 5
		return false
	}
	p.fail()
	return false
}

// skip passes over any value.
func (p *parser) skip() {
	switch c := p.peek(); {
	case c == '{':
		m := p.members()
		for _, ok := m.next(); ok; _, ok = m.next() {
			p.skip()
		}
	case c == '[':
		p.array(p.skip)
	case c == '"':
		p.str()
	case c == 't' || c == 'f':
		p.bool()
	case p.null():
	default:
		p.float()
	}
}

// unknown handles a key the decoder does not know: skipped, unless
// encoding/json would match it to a field regardless of case.
func (p *parser) unknown(key string, known []string) {
	for _, k := range known {
		if strings.EqualFold(k, key) {
			p.fail()
			return
		}
	}
	p.skip()
}

func (p *parser) strs() []string {
	var out []string
	if !p.array(func() { out = append(out, p.istr()) }) {
		return nil
	}
	if out == nil {
		out = []string{}
	}
	return out
}

var viewKeys = []string{"now", "waiting", "eligible", "running", "slots", "rows"}

// document parses one SchedulerView and checks that nothing follows it.
func (p *parser) document(v *api.SchedulerView) {
	p.view(v)
	if p.nonSpace() {
		p.fail() // data after the document
	}
}

func (p *parser) view(v *api.SchedulerView) {
	m := p.members()
	for {
		key, ok := m.next()
		if !ok {
			return
		}
		if string(key) == "rows" {
			p.rows(v)
			continue
		}
		if !p.complete() {
			return
		}
		switch string(key) {
		case "now":
			if p.null() {
				continue
			}
			p.ws()
			start := p.i
			p.str()
			// encoding/json hands time.Time the literal as it is.
			if p.err != nil || v.Now.UnmarshalJSON(p.b[start:p.i]) != nil {
				p.fail()
			}
		case "waiting":
			v.Waiting = int(p.int())
		case "eligible":
			v.Eligible = int(p.int())
		case "running":
			v.Running = int(p.int())
		case "slots":
			v.Slots = int(p.int())
		default:
			p.unknown(string(key), viewKeys)
		}
	}
}

// rows parses the rows array one row at a time, each whole in the window.
func (p *parser) rows(v *api.SchedulerView) {
	if !p.nonSpace() {
		p.fail()
		return
	}
	if p.b[p.i] == 'n' {
		if p.complete() && p.null() {
			v.Rows = nil
		} else {
			p.fail()
		}
		return
	}
	rows := v.Rows[:0]
	if rows == nil { // the daemon says how many rows come before it sends them
		rows = make([]api.SchedRow, 0, min(max(v.Waiting, 1024), 1<<20))
	}
	p.expect('[')
	if !p.nonSpace() {
		p.fail()
	}
	if p.err == nil && p.b[p.i] == ']' {
		p.i++
	} else {
		for p.err == nil {
			// Far from the window's end a row is whole: parse it at once,
			// and only if it was not, go back, fill and parse it again.
			start, optimistic := p.i, p.eof || p.r == nil || len(p.b)-p.i >= 16<<10
			if !optimistic && !p.complete() {
				break
			}
			rows = append(rows, api.SchedRow{})
			p.row(&rows[len(rows)-1])
			if optimistic && p.err != nil && errors.Is(p.err, errSlow) && !p.eof && p.r != nil {
				p.err, p.i = nil, start
				rows[len(rows)-1] = api.SchedRow{}
				if !p.complete() {
					break
				}
				p.row(&rows[len(rows)-1])
			}
			if !p.nonSpace() {
				p.fail()
				break
			}
			if p.b[p.i] == ',' {
				p.i++
				continue
			}
			p.expect(']')
			break
		}
	}
	v.Rows = rows
}

var rowKeys = []string{"id", "type", "status", "title", "priority", "base", "age_boost", "depth", "depth_boost", "iteration",
	"retry_penalty", "runnable", "reasons", "reason_text", "age_seconds", "tier", "fairness_key", "key_used", "cost", "agent"}

func (p *parser) row(r *api.SchedRow) {
	m := p.members()
	for {
		key, ok := m.next()
		if !ok {
			return
		}
		switch string(key) {
		case "id":
			r.ID = p.optStr()
		case "type":
			r.Type = p.istr()
		case "status":
			r.Status = loop.Status(p.istr())
		case "title":
			r.Title = p.optStr()
		case "priority":
			r.Priority = int(p.int())
		case "base":
			r.Base = int(p.int())
		case "age_boost":
			r.AgeBoost = int(p.int())
		case "depth":
			r.Depth = int(p.int())
		case "depth_boost":
			r.DepthBoost = int(p.int())
		case "iteration":
			r.Iteration = int(p.int())
		case "retry_penalty":
			r.RetryPenalty = int(p.int())
		case "runnable":
			r.Runnable = p.bool()
		case "reasons":
			r.Reasons = p.strs()
		case "reason_text":
			r.ReasonText = p.strs()
		case "age_seconds":
			r.AgeSeconds = p.int()
		case "tier":
			r.Tier = int(p.int())
		case "fairness_key":
			r.FairnessKey = p.istr()
		case "key_used":
			r.KeyUsed = p.float()
		case "cost":
			r.Cost = p.float()
		case "agent":
			r.Agent = p.istr()
		default:
			p.unknown(string(key), rowKeys)
		}
	}
}

// optStr is a string or null ("").
func (p *parser) optStr() string {
	if p.null() {
		return ""
	}
	return p.str()
}
