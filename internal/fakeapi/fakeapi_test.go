package fakeapi

import (
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestLog(t *testing.T) {
	t.Parallel()
	var l Log[string]
	var wg sync.WaitGroup
	seen := make([]bool, 51)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := "r"
			l.Record(&s, func(n int) { seen[n] = true }) // under the log's lock
		}()
	}
	wg.Wait()
	if n := len(l.Requests()); n != 50 {
		t.Fatalf("%d requests recorded, want 50", n)
	}
	for n := 1; n <= 50; n++ {
		if !seen[n] {
			t.Errorf("no request numbered %d", n)
		}
	}
}

func TestReadJSONWriteError(t *testing.T) {
	t.Parallel()
	var v struct{ A int }
	if err := ReadJSON(httptest.NewRequest("POST", "/", strings.NewReader(`{"A":3}`)), &v); err != nil || v.A != 3 {
		t.Errorf("ReadJSON = %v, %+v", err, v)
	}
	if err := ReadJSON(httptest.NewRequest("POST", "/", strings.NewReader(`{`)), &v); err == nil {
		t.Error("ReadJSON of a cut body: no error")
	}
	w := httptest.NewRecorder()
	WriteError(w, 429, map[string][]string{"Retry-After": {"30"}}, `{"error":{}}`)
	if w.Code != 429 || w.Header().Get("retry-after") != "30" || w.Header().Get("content-type") != "application/json" || w.Body.String() != `{"error":{}}` {
		t.Errorf("WriteError: %d %v %q", w.Code, w.Header(), w.Body)
	}
}
