package cli

import (
	"context"
	"io"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/fastjson"
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
func writeListJSON(ctx context.Context, b Backend, req api.ListRequest, out io.Writer) (bool, error) {
	jl, ok := b.(jsonLister)
	if !ok {
		return false, nil
	}
	ix := fastjson.NewIndenter(out)
	if err := jl.ListJSON(ctx, req, ix); err != nil {
		return true, err
	}
	return true, ix.Close()
}
