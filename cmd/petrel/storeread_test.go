package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestServeQuery: the control socket's POST /query, on a real store.
func TestServeQuery(t *testing.T) {
	st := openStoreAt(t, filepath.Join(t.TempDir(), "data"))
	defer st.Close()
	k := relaytest.NewKey("serve-query")
	a, b := k.Event(1, "a", nil, fixtureBase), k.Event(1, "b", nil, fixtureBase+1)
	if _, err := st.Save(t.Context(), []*nostr.Event{a, b}); err != nil {
		t.Fatal(err)
	}
	ask := func(body string) *httptest.ResponseRecorder {
		t.Helper()
		w := httptest.NewRecorder()
		serveQuery(w, httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(body)), st)
		return w
	}
	if w := ask(`{"filters":[{"kinds":[1]}]}`); w.Code != 200 || w.Body.String() != string(b.Raw)+"\n"+string(a.Raw)+"\n" {
		t.Fatalf("query: %d %q", w.Code, w.Body.String())
	}
	if w := ask(`{"filters":[{"kinds":[1],"limit":1}],"count":true}`); w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"count":2}` {
		t.Fatalf("count: %d %q", w.Code, w.Body.String())
	}
	if w := ask(`{"filters":[{"kinds":[1]}],"oldest_first":true}`); w.Code != 200 || w.Body.String() != string(a.Raw)+"\n"+string(b.Raw)+"\n" {
		t.Fatalf("oldest first: %d %q", w.Code, w.Body.String())
	}
	if w := ask(`{"filters":[{"kinds":[1]}],"ids":true}`); w.Code != 200 || w.Body.String() != b.ID.Hex()+"\n"+a.ID.Hex()+"\n" {
		t.Fatalf("ids: %d %q", w.Code, w.Body.String())
	}
	if w := ask(`{"filters":[{"kinds":[1]}],"explain":true}`); w.Code != 200 || !strings.Contains(w.Body.String(), `"explain":"filter 0: index kind (K)`) {
		t.Fatalf("explain: %d %q", w.Code, w.Body.String())
	}
	for _, bad := range []string{`{"filters":[{"kind":[1]}]}`, `{}`, `{"filters":[]}`, `{"filters":[{"kinds":"x"}]}`, `not json`} {
		if w := ask(bad); w.Code != 400 {
			t.Fatalf("%s: %d", bad, w.Code)
		}
	}
	// The body limit: a request of cli.MaxQueryBody bytes is read, one byte
	// more is refused.
	body := func(n int) string {
		pre, post := `{"filters":[{"kinds":[1],"search":"`, `"}]}`
		return pre + strings.Repeat("x", n-len(pre)-len(post)) + post
	}
	at := body(cli.MaxQueryBody)
	if !json.Valid([]byte(at)) || len(at) != cli.MaxQueryBody {
		t.Fatal("bad fixture")
	}
	if w := ask(at); w.Code != 200 {
		t.Fatalf("at the limit: %d %s", w.Code, w.Body.String())
	}
	if w := ask(body(cli.MaxQueryBody + 1)); w.Code != 400 || !bytes.Contains(w.Body.Bytes(), []byte("filters")) {
		t.Fatalf("past the limit: %d", w.Code)
	}
}
