package daemon

import (
	"bytes"
	"github.com/go-json-experiment/json/v1"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/api"
)

// The decoding of API request bodies, fuzzed. Whatever the body, decodeBody
// never panics; a refusal is a 400 or 413 whose message is one line; an
// accepted body is one JSON value that encoding/json agrees with. The
// committed corpora are in testdata/fuzz/<name>; `make fuzz` runs each
// for a while.

// checkDecode runs decodeBodyLimit over body into v and checks the invariants.
func checkDecode(t *testing.T, body []byte, v any, allowEmpty bool, limit int64) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/loops", bytes.NewReader(body))
	w := httptest.NewRecorder()
	err := decodeBodyLimit(w, r, v, allowEmpty, limit)
	if err != nil {
		status, code := errorStatus(err)
		if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge {
			t.Fatalf("decodeBody(%q) = %v: status %d %s, want 400 or 413", body, err, status, code)
		}
		msg := apiMessage(err)
		if msg == "" || strings.Contains(msg, "\n") {
			t.Fatalf("decodeBody(%q): message %q, want one non-empty line", body, msg)
		}
		if int64(len(body)) > limit && status != http.StatusRequestEntityTooLarge {
			t.Fatalf("decodeBody of %d bytes: %d, want 413", len(body), status)
		}
		return
	}
	if int64(len(body)) > limit {
		t.Fatalf("decodeBody accepted %d bytes (limit %d)", len(body), limit)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if !allowEmpty {
			t.Fatal("decodeBody accepted an empty body")
		}
		return
	}
	if !json.Valid(body) {
		t.Fatalf("decodeBody accepted invalid JSON %q", body)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatalf("accepted value does not encode: %v", err)
	}
}

func FuzzDecodeCreateRequest(f *testing.F) {
	for _, s := range []string{
		`{"type":"ralph","task":"x"}`,
		`{"type":"plan","title":"t","max_iterations":3,"runnable_at":"2026-01-02T03:04:05Z","deadline":"2026-01-03T00:00:00+02:00"}`,
		`{"type":5}`, `{"max_iterations":"ten"}`, `{"deadline":"tomorrow"}`, `{"colour":"red"}`,
		`{"type":"ralph"} {"type":"ralph"}`, `[]`, `null`, ``, `{"type":`, `{"cost_hint":1e309}`,
		"{\"task\":\"\\u0000../../etc/passwd\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v api.CreateRequest
		checkDecode(t, body, &v, false, MaxBodyBytes)
	})
}

func FuzzDecodeActionRequest(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"reason":"why"}`, `{"feedback":"more tests"}`, `{"reason":5}`, `{"why":1}`, `{"reason":"a"}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v api.ActionRequest
		checkDecode(t, body, &v, true, MaxBodyBytes)
	})
}

func FuzzDecodeBatchRequest(f *testing.F) {
	for _, s := range []string{
		`{"loops":[{"type":"ralph","task":"x"},{"type":"spec","parent":"p","title":"t"}]}`,
		`{"loops":[]}`, `{"loops":{}}`, `{"loops":[{"max_iterations":"9"}]}`, `{"loops":[1,2]}`, `{"loop":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v api.BatchRequest
		checkDecode(t, body, &v, false, MaxBatchBytes)
	})
}

// TestDecodeOversize: a body over MaxBodyBytes is a 413 whatever it holds.
func TestDecodeOversize(t *testing.T) {
	t.Parallel()
	body := append([]byte(`{"type":"ralph","task":"`), bytes.Repeat([]byte("x"), MaxBodyBytes)...)
	body = append(body, `"}`...)
	var v api.CreateRequest
	r := httptest.NewRequest(http.MethodPost, "/v1/loops", bytes.NewReader(body))
	err := decodeBody(httptest.NewRecorder(), r, &v, false)
	if status, _ := errorStatus(err); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("decodeBody(%d bytes) = %v (%d), want 413", len(body), err, status)
	}
}
