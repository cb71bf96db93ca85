package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/loopr-dev/loopr/api"
)

// jsonLister is a Backend that streams `list --json` as JSON it never
// decodes: 100k loops in a fraction of a decode and re-encode.
type jsonLister interface {
	ListJSON(ctx context.Context, req api.ListRequest, w io.Writer) error
}

// ListJSON streams the stored records as one JSON array (store.WriteJSON).
func (b *local) ListJSON(_ context.Context, req api.ListRequest, w io.Writer) error {
	_, err := b.svc.WriteList(w, req)
	return err
}

// writeListJSON prints what `list --json` prints — the records indented as
// writeJSON indents them — when b can stream them, and reports whether it did.
// The array is re-indented record by record as it arrives by a jsontext
// decoder and encoder (github.com/go-json-experiment/json): each record's
// members, strings and numbers as the daemon wrote them (encoding/json's
// bytes), only the white space changes.
func writeListJSON(ctx context.Context, b Backend, req api.ListRequest, out io.Writer) (bool, error) {
	jl, ok := b.(jsonLister)
	if !ok {
		return false, nil
	}
	pr, pw := io.Pipe()
	listed := make(chan error, 1)
	go func() {
		err := jl.ListJSON(ctx, req, pw)
		pw.CloseWithError(err)
		listed <- err
	}()
	err := indentArray(out, pr)
	pr.CloseWithError(errStopped) // a lister still writing stops
	if lerr := <-listed; lerr != nil && !errors.Is(lerr, errStopped) {
		return true, lerr // the daemon's error, not the cut-off JSON it left
	}
	return true, err
}

// errStopped ends a listing whose output failed.
var errStopped = errors.New("output stopped")

// indentArray copies the JSON array r holds to w as json.Encoder with
// SetIndent("", "  ") writes it.
func indentArray(w io.Writer, r io.Reader) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	// The decoder reads 4 KiB at a time: from a buffer, not from the pipe
	// (a hand-over between goroutines each).
	dec := jsontext.NewDecoder(bufio.NewReaderSize(r, 256<<10), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	enc := jsontext.NewEncoder(bw, jsontext.WithIndent("  "), jsontext.PreserveRawStrings(true),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return listError(err)
	}
	if tok.Kind() != '[' {
		return fmt.Errorf("list: the answer is not a JSON array (it begins with %s)", tok.Kind())
	}
	if err := enc.WriteToken(jsontext.BeginArray); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return listError(err)
		}
		if err := enc.WriteValue(v); err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return listError(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return errors.New("list: the answer goes on after its array")
	}
	if err := enc.WriteToken(jsontext.EndArray); err != nil {
		return err
	}
	return bw.Flush()
}

// listError explains a listing that is not a whole JSON array.
func listError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("list: the answer ends before its array closes")
	}
	return fmt.Errorf("list: %w", err)
}
