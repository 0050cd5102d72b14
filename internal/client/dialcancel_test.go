package client_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
)

// TestDialCancelledDuringHandshake: a relay that takes the connection and
// never answers the upgrade; the dial's context is cancelled (a command
// interrupted) once it has connected. Dial returns then, with
// context.Canceled in a *DialError, not when the hour-long handshake
// timeout ends (gorilla watches only the context's deadline). The 30 s
// bound detects that hang; it is not a timing.
func TestDialCancelledDuringHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c, err := client.Dial(ctx, "ws://"+ln.Addr().String(), client.Options{HandshakeTimeout: time.Hour})
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	held, err := ln.Accept() // connected: the upgrade request is under way
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cancel()
	select {
	case err := <-done:
		var de *client.DialError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &de) {
			t.Fatalf("Dial: %v, want a *DialError with context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Dial still waiting 30 s after its context was cancelled")
	}
}
