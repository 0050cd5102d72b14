package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/client"
)

// TestFetchInfoLimits: a document of MaxInfoBytes is read, one byte more
// is refused, and so are a missing document, one that is not JSON and a
// URL that is not ws(s).
func TestFetchInfoLimits(t *testing.T) {
	t.Parallel()
	serve := func(status int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Accept") != "application/nostr+json" {
				http.Error(w, "not NIP-11", http.StatusBadRequest)
				return
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return "ws" + strings.TrimPrefix(srv.URL, "http")
	}
	doc := `{"name":"x","limitation":{"max_limit":7,"auth_required":true}}`
	padded := func(n int) string { return doc + strings.Repeat(" ", n-len(doc)) }
	f := func(url string, wantErr error) client.Info {
		t.Helper()
		inf, err := client.FetchInfo(ctx(t), nil, url)
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s: %v, want %v", url, err, wantErr)
		}
		return inf
	}
	inf := f(serve(http.StatusOK, padded(client.MaxInfoBytes)), nil)
	if inf.Name != "x" || inf.Limitation.MaxLimit != 7 || !inf.Limitation.AuthRequired || len(inf.Raw) != client.MaxInfoBytes {
		t.Fatalf("info %+v", inf.Limitation)
	}
	reason := func(url, want string) {
		t.Helper()
		_, err := client.FetchInfo(ctx(t), nil, url)
		var ie *client.InfoError
		if !errors.Is(err, client.ErrInfo) || !errors.As(err, &ie) || ie.URL != url || ie.Reason != want {
			t.Fatalf("%s: %v, want an InfoError saying %q", url, err, want)
		}
	}
	reason(serve(http.StatusOK, padded(client.MaxInfoBytes+1)), "larger than 1048576 bytes")
	reason(serve(http.StatusNotFound, doc), "HTTP 404 Not Found")
	reason(serve(http.StatusOK, "<html>"), "invalid character '<' looking for beginning of value")
	reason(serve(http.StatusOK, `{"name":5}`), "json: cannot unmarshal number into Go struct field Info.name of type string")
	f("http://127.0.0.1:1", client.ErrURL)
}

// TestHTTPURL maps relay URLs to their HTTP(S) form.
func TestHTTPURL(t *testing.T) {
	t.Parallel()
	f := func(in, want string) {
		t.Helper()
		if got, err := client.HTTPURL(in); err != nil || got != want {
			t.Fatalf("HTTPURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	f("ws://127.0.0.1:7447", "http://127.0.0.1:7447")
	f("wss://relay.example.com/path?x=1", "https://relay.example.com/path?x=1")
	if _, err := client.HTTPURL("https://x"); !errors.Is(err, client.ErrURL) {
		t.Fatal(err)
	}
}
