package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestHTTPRequestBound: the relay reads at most 256 KiB of an HTTP request
// (head and body; nbio buffers a request whole before its handler runs,
// and bounded a chunked body not at all). Up to the bound a request is
// answered (a NIP-86 body past its 64 KiB with 413); past it, with a
// Content-Length, chunked, or in its head, the connection is closed
// unanswered once the bound is read, and the relay serves on.
func TestHTTPRequestBound(t *testing.T) {
	r := relaytest.Start(t, relaytest.Options{})
	addr := r.Server.Addr().String()
	const bound = 256 << 10
	head := "POST / HTTP/1.1\r\nHost: relay\r\nContent-Type: application/nostr+json+rpc\r\n"
	// send writes the request from a goroutine (the relay may stop
	// reading it) and returns the response, or the error reading one.
	send := func(req string) (*http.Response, error) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go io.WriteString(c, req)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		return http.ReadResponse(bufio.NewReader(c), nil)
	}
	closed := func(what string, res *http.Response, err error) {
		t.Helper()
		if err == nil || (!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET)) {
			t.Fatalf("%s: %v %v, want the connection closed unanswered", what, res, err)
		}
	}

	body := strings.Repeat("x", bound-len(head)-200)
	res, err := send(head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body)
	if err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a NIP-86 body within the bound: %v %v, want 413", res, err)
	}
	big := strings.Repeat("x", bound+1)
	res, err = send(head + fmt.Sprintf("Content-Length: %d\r\n\r\n", 64*bound) + big + big)
	closed("a Content-Length body past the bound", res, err)
	chunk := fmt.Sprintf("%x\r\n%s\r\n", 16<<10, strings.Repeat("x", 16<<10))
	res, err = send(head + "Transfer-Encoding: chunked\r\n\r\n" + strings.Repeat(chunk, 2*bound/(16<<10)) + "0\r\n\r\n")
	closed("a chunked body past the bound", res, err)
	res, err = send("GET / HTTP/1.1\r\nHost: relay\r\nX-Long: " + big + "\r\n\r\n")
	closed("a head past the bound", res, err)

	// The relay serves on.
	h := dialHTTP(t, addr)
	h.mustGet("/stats")
}
