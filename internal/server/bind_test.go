package server_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/server"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// TestBindListener: the listener of Bind is the one the server serves
// (petrel serve binds before it opens the store); a connection made
// between the two waits in the backlog and is answered once the server
// starts; an address that is taken fails in Bind, named.
func TestBindListener(t *testing.T) {
	ln, err := server.Bind(server.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Bind(server.Config{Listen: ln.Addr().String()}); err == nil ||
		!strings.HasPrefix(err.Error(), "listen on "+ln.Addr().String()+": ") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Bind of a taken address: %v", err)
	}
	early, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	if _, err := io.WriteString(early, "GET / HTTP/1.1\r\nHost: x\r\nAccept: application/nostr+json\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rl, err := relay.New(relay.Config{}, relay.Options{Store: storetest.NewModel(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Shutdown(context.Background()) })
	srv, err := server.New(server.Config{Listen: ln.Addr().String()}, server.Options{Relay: rl, Logger: log, Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	if want := "ws://" + ln.Addr().String(); srv.URL() != want {
		t.Fatalf("URL %s, want %s", srv.URL(), want)
	}
	early.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(early), nil)
	if err != nil {
		t.Fatalf("the connection made before Start: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "application/nostr+json") {
		t.Fatalf("the connection made before Start: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
}
