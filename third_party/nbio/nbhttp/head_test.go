package nbhttp

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHeadHasNoBody: a response to HEAD carries the headers a GET would
// get, a Content-Length of what the handler wrote and no body, however
// the handler writes it (petrel patch 16), so the next response on the
// connection is read as such; it had the body, chunked.
func TestHeadHasNoBody(t *testing.T) {
	big := strings.Repeat("x", 3*maxPacketSize)
	e := NewEngine(Config{
		Network: "tcp",
		Addrs:   []string{"127.0.0.1:0"},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/small":
				w.Header().Set("Content-Type", "application/nostr+json")
				io.WriteString(w, "hello")
			case "/big":
				io.WriteString(w, big[:maxPacketSize])
				io.WriteString(w, big[maxPacketSize:])
			case "/length":
				w.Header().Set("Content-Length", "5")
				io.WriteString(w, "hello")
			case "/chunked":
				w.Header().Set("Transfer-Encoding", "chunked")
				io.WriteString(w, "hello")
			case "/flush":
				io.WriteString(w, "hel")
				w.(http.Flusher).Flush()
				io.WriteString(w, "lo")
			case "/readfrom":
				w.(io.ReaderFrom).ReadFrom(strings.NewReader("hello"))
			case "/empty":
			}
		}),
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	c, err := net.Dial("tcp", e.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	ask := func(method, path string) *http.Response {
		t.Helper()
		if _, err := io.WriteString(c, method+" "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(method, path, nil)
		res, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return res
	}
	for _, c := range []struct {
		path, length string
	}{
		{"/small", "5"}, {"/big", strconv.Itoa(len(big))}, {"/length", "5"}, {"/chunked", "5"},
		{"/readfrom", "5"}, {"/empty", ""}, {"/small", "5"},
	} {
		res := ask(http.MethodHead, c.path)
		if res.StatusCode != 200 || res.Header.Get("Content-Length") != c.length || res.TransferEncoding != nil {
			t.Fatalf("HEAD %s: %d, Content-Length %q (want %q), Transfer-Encoding %v", c.path, res.StatusCode, res.Header.Get("Content-Length"), c.length, res.TransferEncoding)
		}
		if c.path == "/small" && res.Header.Get("Content-Type") != "application/nostr+json" {
			t.Fatalf("HEAD /small: Content-Type %q", res.Header.Get("Content-Type"))
		}
		// The next response is read from where this one ended: had a
		// body been sent, it would be read as the status line.
		res = ask(http.MethodGet, "/small")
		body, err := io.ReadAll(res.Body)
		if err != nil || string(body) != "hello" {
			t.Fatalf("GET after HEAD %s: %q %v", c.path, body, err)
		}
	}
	// Flushed part way: the head goes out with the length written so far.
	res := ask(http.MethodHead, "/flush")
	if res.StatusCode != 200 || res.TransferEncoding != nil || res.Header.Get("Content-Length") != "3" {
		t.Fatalf("HEAD /flush: %d, Content-Length %q, Transfer-Encoding %v", res.StatusCode, res.Header.Get("Content-Length"), res.TransferEncoding)
	}
	res = ask(http.MethodGet, "/small")
	if body, err := io.ReadAll(res.Body); err != nil || string(body) != "hello" {
		t.Fatalf("GET after HEAD /flush: %q %v", body, err)
	}
}
