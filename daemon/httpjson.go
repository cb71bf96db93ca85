// The API's JSON plumbing: how a handler's error becomes an api.Error
// body, how bodies are decoded (size limits, unknown fields, a named field
// for a wrong type or time) and query parameters checked.

package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// jsonFallback answers what the mux cannot route (404, 405) with an
// api.Error body instead of net/http's plain text.
func jsonFallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &recorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.code < 400 { // a redirect to the clean path
			mux.ServeHTTP(w, r)
			return
		}
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		switch rec.code {
		case http.StatusMethodNotAllowed:
			writeError(w, rec.code, api.CodeInvalid, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow")))
		case http.StatusNotFound:
			writeError(w, rec.code, api.CodeNotFound, "no route "+r.Method+" "+r.URL.Path)
		default:
			writeError(w, rec.code, api.CodeInvalid, http.StatusText(rec.code))
		}
	})
}

// recorder captures the status a fallback handler would write.
type recorder struct {
	header http.Header
	code   int
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return len(b), nil
}
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

// trackWriter records whether a response has begun.
type trackWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackWriter) WriteHeader(code int) { t.wrote = true; t.ResponseWriter.WriteHeader(code) }
func (t *trackWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (t *trackWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// wrap turns a handler's error, or its panic, into an api.Error response.
func (d *daemon) wrap(h apiHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &trackWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			d.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			if tw.wrote {
				panic(http.ErrAbortHandler) // the client must not take a cut-off body for a whole one
			}
			writeError(tw, http.StatusInternalServerError, api.CodeInternal, fmt.Sprintf("internal error: %v", p))
		}()
		err := h(tw, r)
		if err == nil {
			return
		}
		status, code := errorStatus(err)
		switch {
		case status == http.StatusServiceUnavailable: // shutting down, disk full: not a bug
			d.log.Warn("api", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		case status >= 500:
			d.log.Error("api", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		default:
			d.log.Debug("api", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		}
		if tw.wrote {
			panic(http.ErrAbortHandler)
		}
		writeError(tw, status, code, apiMessage(err))
	})
}

// apiMessage is err's message with the CLI's flag names (--max-iterations)
// that control uses for input errors replaced by the JSON field names
// (max_iterations) an API caller sent.
func apiMessage(err error) string {
	msg := err.Error()
	var ie *control.InputError
	if errors.As(err, &ie) && strings.HasPrefix(ie.Field, "--") {
		msg = strings.Replace(msg, ie.Error(), (&control.InputError{Field: jsonField(ie.Field), Msg: ie.Msg}).Error(), 1)
	}
	if m := flagPrefix.FindStringSubmatch(msg); m != nil { // "--parent: loop x: not found"
		msg = jsonField(m[1]) + msg[len(m[1]):]
	}
	return diskMessage(err, msg)
}

// flagPrefix matches a message that starts with a flag name.
var flagPrefix = regexp.MustCompile(`^(--[a-z][a-z-]*):`)

// jsonField turns a flag name into its JSON field name.
func jsonField(flag string) string {
	return strings.ReplaceAll(strings.TrimPrefix(flag, "--"), "-", "_")
}

// bodyTooLarge reports a request body over its limit (413).
type bodyTooLarge struct {
	limit int64
	err   *http.MaxBytesError
}

func (e *bodyTooLarge) Error() string {
	return fmt.Sprintf("request body too large (limit %d MiB)", e.limit>>20)
}
func (e *bodyTooLarge) Unwrap() error { return e.err }

// tooLarge returns a *bodyTooLarge when err is a body limit error, else err.
func tooLarge(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &bodyTooLarge{limit: mbe.Limit, err: mbe}
	}
	return err
}

// errorStatus maps an error to its HTTP status and api error code.
func errorStatus(err error) (int, string) {
	var mbe *http.MaxBytesError
	var te *loop.TransitionError
	var le *control.LimitError
	var fe *control.ForbiddenError
	switch {
	case errors.As(err, &fe):
		return http.StatusForbidden, api.CodeForbidden
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, api.CodeTooLarge
	case errors.As(err, &le):
		return http.StatusTooManyRequests, le.Code
	case errors.Is(err, errStopping), errors.Is(err, syscall.ENOSPC),
		errors.Is(err, store.ErrCorrupt): // a damaged file is not a bug: its message names the repair
		return http.StatusServiceUnavailable, api.CodeUnavailable
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, api.CodeNotFound
	case errors.As(err, &te), errors.Is(err, store.ErrExists),
		errors.Is(err, control.ErrNoRadar), errors.Is(err, gitflow.ErrOldGit), errors.Is(err, control.ErrNoDiff):
		return http.StatusConflict, api.CodeConflict
	case control.IsUsage(err):
		return http.StatusBadRequest, api.CodeInvalid
	}
	return http.StatusInternalServerError, api.CodeInternal
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeError writes an api.Error body.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Err: api.ErrorBody{Code: code, Message: msg}})
}

// decodeBody decodes the request body, at most MaxBodyBytes, strictly into
// v: unknown fields, wrong types and trailing data are errors that name the
// field. An empty body is accepted only when allowEmpty.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	return decodeBodyLimit(w, r, v, allowEmpty, MaxBodyBytes)
}

// decodeBodyLimit is decodeBody with a body limit of its own.
func decodeBodyLimit(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool, limit int64) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if tl := tooLarge(err); tl != err {
			return tl
		}
		return fmt.Errorf("read request body: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if allowEmpty {
			return nil
		}
		return control.Invalid("body", "empty: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, body, v)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return control.Invalid("body", "unexpected data after the JSON object")
	}
	return nil
}

// decodeError turns a JSON decoding error of body into v into an input
// error naming the field at fault.
func decodeError(err error, body []byte, v any) error {
	var se *json.SyntaxError
	var ute *json.UnmarshalTypeError
	var pe *time.ParseError
	switch {
	case errors.As(err, &se):
		return control.Invalid("body", "malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			field = "body"
		}
		return control.Invalid(field, "want %s, got JSON %s", jsonKind(ute.Type.String()), ute.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return control.Invalid("body", "malformed JSON: unexpected end of input")
	case errors.As(err, &pe):
		return control.Invalid(badTimeField(body, v), "bad time %s: want RFC 3339, e.g. \"2025-01-02T15:04:05Z\"", pe.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return control.Invalid(strings.Trim(f, `"`), "unknown field")
	}
	return control.Invalid("body", "%s", strings.TrimPrefix(msg, "json: "))
}

// badTimeField finds the top-level field of body that does not parse as
// the time.Time field of v it names (encoding/json does not say which).
func badTimeField(body []byte, v any) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return "body"
	}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return "body"
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type != reflect.TypeFor[time.Time]() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		raw, ok := fields[name]
		if !ok {
			continue
		}
		var tm time.Time
		if json.Unmarshal(raw, &tm) != nil {
			return name
		}
	}
	return "body"
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(goType string) string {
	switch goType {
	case "string", "loop.Status", "api.Status":
		return "a string"
	case "int", "int64", "uint64":
		return "an integer"
	case "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "time.Time":
		return "an RFC 3339 time string"
	}
	if strings.HasPrefix(goType, "[]") {
		return "an array"
	}
	if strings.HasPrefix(goType, "api.") || strings.HasPrefix(goType, "loop.") {
		return "a JSON object"
	}
	return goType
}

// checkQuery refuses query parameters the route does not know.
func checkQuery(q url.Values, known ...string) error {
	for k := range q {
		if !slices.Contains(known, k) {
			if len(known) == 0 {
				return control.Invalid(k, "unknown query parameter (this route takes none)")
			}
			return control.Invalid(k, "unknown query parameter (known: %s)", strings.Join(known, ", "))
		}
	}
	return nil
}
