package server_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestHTTPHead: the relay's pages answer HEAD with a GET's headers and no
// body, so a monitor's HEAD and a GET after it share a kept-alive
// connection (nbio patch 16; the body was sent, chunked, and read as the
// next response).
func TestHTTPHead(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{})
	h := dialHTTP(t, r.Server.Addr().String())
	for _, c := range []struct {
		path, accept, ctype string
	}{
		{"/", "Accept: application/nostr+json", "application/nostr+json"},
		{"/", "Accept: text/html", "text/html; charset=utf-8"},
		{"/stats", "Accept: */*", "application/json"},
		{"/metrics", "Accept: */*", ""},
	} {
		_, body := h.mustGet(c.path, c.accept)
		if _, err := io.WriteString(h.c, "HEAD "+c.path+" HTTP/1.1\r\nHost: relay\r\n"+c.accept+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(h.r, &http.Request{Method: http.MethodHead})
		if err != nil {
			t.Fatalf("HEAD %s: %v", c.path, err)
		}
		n, err := strconv.Atoi(res.Header.Get("Content-Length"))
		if res.StatusCode != http.StatusOK || res.TransferEncoding != nil || err != nil || n <= 0 ||
			(c.ctype != "" && res.Header.Get("Content-Type") != c.ctype) {
			t.Fatalf("HEAD %s (%s): %s, Content-Type %q, Content-Length %q, Transfer-Encoding %v (the GET's body: %d bytes)",
				c.path, c.accept, res.Status, res.Header.Get("Content-Type"), res.Header.Get("Content-Length"), res.TransferEncoding, len(body))
		}
		// The connection is where the HEAD's headers ended: the next
		// GET reads as a response.
		if res, _, err := h.get("/stats"); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET after HEAD %s: %v %v", c.path, res, err)
		}
	}
}
