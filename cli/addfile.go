package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
)

// maxFileBytes bounds a file given to `loopr add --file`.
const maxFileBytes = 64 << 20

// batchBytes bounds the requests sent in one POST /v1/loops/batch, below
// the daemon's limit.
const batchBytes = 8 << 20

// fileItem is one create request of a loops file and the line it starts on.
type fileItem struct {
	req  api.CreateRequest
	line int
}

// fileError is a problem with a loops file: it names the file, the line
// and the item's key, like loopr.yml's errors.
type fileError struct {
	file string
	line int
	key  string
	msg  string
}

func (e *fileError) Error() string {
	s := e.file
	if e.line > 0 {
		s += ":" + strconv.Itoa(e.line)
	}
	if e.key != "" {
		s += ": " + e.key
	}
	return s + ": " + e.msg
}

// fileKeys are the keys of an item: the JSON fields of POST /v1/loops,
// plus `in` (a delay from now, for runnable_at).
var fileKeys = []string{"type", "parent", "task", "title", "max_iterations", "runnable_at", "in",
	"deadline", "fairness_key", "conflict_key", "cost_hint", "owner", "agent", "budget_usd", "budget_tokens", "fanout"}

// parseLoopsFile decodes a YAML list of create requests strictly: an
// unknown or duplicate key, a value of the wrong type or a bad time is an
// error naming the file, line and key. Checks that need the configuration
// (the type exists, the parent exists) are the daemon's, per item.
func parseLoopsFile(name string, data []byte, now time.Time) ([]fileItem, error) {
	base := filepath.Base(name)
	fail := func(line int, key, format string, args ...any) error {
		return &fileError{file: base, line: line, key: key, msg: fmt.Sprintf(format, args...)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fail(0, "", "empty: want a YAML list of loops")
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line := 0
		if l, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(l, "line ") {
			line, _ = strconv.Atoi(strings.TrimPrefix(l, "line "))
			msg = rest
		}
		return nil, fail(line, "", "invalid YAML: %s", msg)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fail(extra.Line, "", "must hold a single YAML document")
	}
	if len(doc.Content) == 0 {
		return nil, fail(0, "", "empty: want a YAML list of loops")
	}
	root := doc.Content[0]
	if root.Kind != yaml.SequenceNode {
		return nil, fail(root.Line, "", "want a YAML list of loops (- type: ralph …), got %s", config.Describe(root))
	}
	if len(root.Content) == 0 {
		return nil, fail(root.Line, "", "empty list: want at least one loop")
	}
	items := make([]fileItem, 0, len(root.Content))
	for i, n := range root.Content {
		item := fmt.Sprintf("[%d]", i)
		if n.Kind == yaml.AliasNode {
			return nil, fail(n.Line, item, "aliases are not supported")
		}
		if n.Kind != yaml.MappingNode {
			return nil, fail(n.Line, item, "want a mapping (type: …, task: …), got %s", config.Describe(n))
		}
		var req api.CreateRequest
		var in string
		inLine, atLine := 0, 0
		seen := map[string]int{}
		for j := 0; j+1 < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			key := item + "." + k.Value
			if k.Kind != yaml.ScalarNode {
				return nil, fail(k.Line, item, "keys must be strings")
			}
			if first, dup := seen[k.Value]; dup {
				return nil, fail(k.Line, key, "duplicate key (first at line %d)", first)
			}
			seen[k.Value] = k.Line
			if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
				return nil, fail(k.Line, key, "want a value, got %s", config.Describe(v))
			}
			str := v.Value
			var err error
			switch k.Value {
			case "type":
				req.Type = str
			case "parent":
				req.Parent = str
			case "task":
				req.Task = str
			case "title":
				req.Title = str
			case "owner":
				req.Owner = str
			case "agent":
				req.Agent = str
			case "budget_usd":
				if t := v.ShortTag(); t != "!!int" && t != "!!float" {
					return nil, fail(v.Line, key, "want a number, got %q", str)
				}
				if req.Budget.USD, err = strconv.ParseFloat(str, 64); err != nil || req.Budget.USD < 0 {
					return nil, fail(v.Line, key, "want a number >= 0, got %q", str)
				}
			case "budget_tokens":
				if v.ShortTag() != "!!int" {
					return nil, fail(v.Line, key, "want an integer, got %q", str)
				}
				if req.Budget.Tokens, err = strconv.ParseInt(str, 10, 64); err != nil || req.Budget.Tokens < 0 {
					return nil, fail(v.Line, key, "want an integer >= 0, got %q", str)
				}
			case "fairness_key":
				req.FairnessKey = str
			case "conflict_key":
				req.ConflictKey = str
			case "max_iterations":
				if v.ShortTag() != "!!int" {
					return nil, fail(v.Line, key, "want an integer, got %q", str)
				}
				if req.MaxIterations, err = strconv.Atoi(str); err != nil {
					return nil, fail(v.Line, key, "want an integer, got %q", str)
				}
			case "fanout":
				if v.ShortTag() != "!!int" {
					return nil, fail(v.Line, key, "want an integer, got %q", str)
				}
				if req.Fanout, err = strconv.Atoi(str); err != nil {
					return nil, fail(v.Line, key, "want an integer, got %q", str)
				}
			case "cost_hint":
				if t := v.ShortTag(); t != "!!int" && t != "!!float" {
					return nil, fail(v.Line, key, "want a number, got %q", str)
				}
				if req.CostHint, err = strconv.ParseFloat(str, 64); err != nil {
					return nil, fail(v.Line, key, "want a number, got %q", str)
				}
			case "runnable_at", "deadline":
				t, err := time.Parse(time.RFC3339Nano, str)
				if err != nil {
					return nil, fail(v.Line, key, "%q is not an RFC 3339 time (e.g. 2026-01-25T12:00:00Z)", str)
				}
				if k.Value == "deadline" {
					req.Deadline = t.UTC()
				} else {
					req.RunnableAt, atLine = t.UTC(), k.Line
				}
			case "in":
				d, err := time.ParseDuration(str)
				if err != nil || d < 0 {
					return nil, fail(v.Line, key, "%q is not a duration like 10m or 1h30m", str)
				}
				in, inLine = str, k.Line
				req.RunnableAt = now.UTC().Add(d)
			default:
				return nil, fail(k.Line, key, "unknown key (known: %s)", strings.Join(fileKeys, ", "))
			}
		}
		if in != "" && atLine > 0 {
			return nil, fail(max(inLine, atLine), item, "runnable_at and in: give one, not both")
		}
		items = append(items, fileItem{req: req, line: n.Line})
	}
	return items, nil
}

// fileResult is one line of `loopr add --file --json`: the item's result
// and the line of the file it came from.
type fileResult struct {
	Line int `json:"line"`
	api.BatchItem
}

// addFile creates the loops listed in path through a batch (several when
// the file is large), prints a result per item, and fails (exit 1) when
// any item was refused.
func (e *env) addFile(cmd *cobra.Command, path string, jsonOut bool) error {
	data, err := readLimited(path)
	if err != nil {
		return &UsageError{err}
	}
	items, err := parseLoopsFile(path, data, e.now())
	if err != nil {
		return &UsageError{err}
	}
	return e.withBackend(func(b Backend) error {
		results := make([]fileResult, 0, len(items))
		for start := 0; start < len(items); {
			end, size := start, 0
			for end < len(items) && end-start < control.MaxBatch {
				n := len(items[end].req.Task) + len(items[end].req.Title) + 512
				if end > start && size+n > batchBytes {
					break
				}
				size += n
				end++
			}
			reqs := make([]api.CreateRequest, 0, end-start)
			for _, it := range items[start:end] {
				reqs = append(reqs, it.req)
			}
			res, err := b.CreateBatch(cmd.Context(), reqs)
			if err != nil {
				if len(results) > 0 {
					printFileResults(e, items, results, jsonOut)
					return fmt.Errorf("items %d-%d: %w (items before them were sent)", start, end-1, err)
				}
				return err
			}
			for _, r := range res.Results {
				r.Index += start
				results = append(results, fileResult{Line: items[r.Index].line, BatchItem: r})
			}
			start = end
		}
		printFileResults(e, items, results, jsonOut)
		failed := 0
		for _, r := range results {
			if r.Error != nil {
				failed++
			}
		}
		if _, ok := b.(*local); ok && failed < len(results) {
			e.queued = true
		}
		if failed > 0 {
			return fmt.Errorf("%d of %d loops not created", failed, len(results))
		}
		return nil
	})
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("--file: %s is over %d MiB", path, maxFileBytes>>20)
	}
	return data, nil
}

// printFileResults prints one aligned line per item and a summary, or the
// results as JSON.
func printFileResults(e *env, items []fileItem, results []fileResult, jsonOut bool) {
	if jsonOut {
		writeJSON(e.stdout, results)
		return
	}
	w := table(e.stdout)
	fmt.Fprintln(w, "ITEM\tLINE\tRESULT\tID\tTYPE\tTITLE / ERROR")
	created := 0
	for _, r := range results {
		if r.Error != nil {
			typ := items[r.Index].req.Type
			if typ == "" {
				typ = "-"
			}
			fmt.Fprintf(w, "%d\t%d\terror\t-\t%s\t%s\n", r.Index, r.Line, oneLine(typ, 20), oneLine(r.Error.Message, 120))
			continue
		}
		created++
		typ, title := "", ""
		if r.Loop != nil {
			typ, title = r.Loop.Type, oneLine(r.Loop.Title, 50)
		}
		fmt.Fprintf(w, "%d\t%d\tcreated\t%s\t%s\t%s\n", r.Index, r.Line, loop.ShortID(r.ID), typ, title)
	}
	w.Flush()
	fmt.Fprintf(e.stdout, "%d created, %d failed\n", created, len(results)-created)
}
