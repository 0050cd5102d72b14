package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRelayCommits: the commit count is read from a petrel relay's
// /stats with the embedded store, and not from a PostgreSQL-backed one,
// another relay (no such field), or a /stats that is not there.
func TestRelayCommits(t *testing.T) {
	for _, c := range []struct {
		name, body string
		status     int
		want       int64
		ok         bool
	}{
		{"pebble", `{"store_backend":"pebble","store_commits":42}`, 200, 42, true},
		{"postgres", `{"store_backend":"postgres","store_commits":0}`, 200, 0, false},
		{"another relay", `{"store_backend":"pebble"}`, 200, 0, false},
		{"no /stats", `not found`, 404, 0, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/stats" {
				t.Errorf("%s: asked for %s", c.name, r.URL.Path)
			}
			w.WriteHeader(c.status)
			w.Write([]byte(c.body))
		}))
		got, ok := relayCommits(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/relay?x=1")
		srv.Close()
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
