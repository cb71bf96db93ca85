// Package fastjson writes and re-indents JSON byte for byte as encoding/json
// does, without reflection or intermediate values, for the few large
// documents loopr streams: a list of 100k loop records, the scheduler's
// 100k rows. Its tests hold it to encoding/json's exact output.
package fastjson

import (
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// htmlSafe[b] is true for the ASCII bytes encoding/json writes as they are
// (it escapes ", \, control characters, and <, > and & as HTML-unsafe).
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// AppendString appends s as a JSON string, escaped exactly as
// encoding/json.Marshal escapes it (HTML-safe, invalid UTF-8 as \ufffd,
// U+2028 and U+2029 escaped).
func AppendString[S []byte | string](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if htmlSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		n := min(len(s)-i, utf8.UTFMax)
		c, size := utf8.DecodeRuneInString(string(s[i : i+n]))
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// errTime is the error of a time encoding/json cannot write either.
var errTime = errors.New("time not representable in RFC 3339")

// AppendTime appends t as time.Time.MarshalJSON does (RFC 3339 with
// nanoseconds, in t's zone), or fails where it fails: a year outside
// 0–9999 or a zone offset of 24 hours or more.
func AppendTime(dst []byte, t time.Time) ([]byte, error) {
	n0 := len(dst)
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano) // the same code as MarshalJSON
	b := dst[n0+1:]
	switch {
	case len(b) < len("2006-01-02T15:04:05Z") || b[4] != '-':
		return dst[:n0], errTime
	case b[len(b)-1] != 'Z':
		c := b[len(b)-len("Z07:00")]
		h := b[len(b)-len("07:00"):]
		if ('0' <= c && c <= '9') || 10*(h[0]-'0')+(h[1]-'0') >= 24 {
			return dst[:n0], errTime
		}
	}
	return append(dst, '"'), nil
}

// errFloat is the error of a float encoding/json cannot write either.
var errFloat = errors.New("unsupported float value")

// AppendFloat appends f as encoding/json writes a float64.
func AppendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, errFloat
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

// Object appends the members of a JSON object one by one: the keys are
// the caller's literal field names (no escaping needed).
type Object struct {
	B     []byte
	first bool
}

// Begin starts an object at the end of b.
func Begin(b []byte) Object { return Object{B: append(b, '{'), first: true} }

// Key appends the key of the next member.
func (o *Object) Key(k string) {
	if !o.first {
		o.B = append(o.B, ',')
	}
	o.first = false
	o.B = append(o.B, '"')
	o.B = append(o.B, k...)
	o.B = append(o.B, '"', ':')
}

// Str appends a string member.
func (o *Object) Str(k, v string) { o.Key(k); o.B = AppendString(o.B, v) }

// Int appends an integer member.
func (o *Object) Int(k string, v int64) { o.Key(k); o.B = strconv.AppendInt(o.B, v, 10) }

// Bool appends a boolean member.
func (o *Object) Bool(k string, v bool) { o.Key(k); o.B = strconv.AppendBool(o.B, v) }

// End closes the object and returns the bytes.
func (o *Object) End() []byte { return append(o.B, '}') }
