package server_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestLimitCloseLogged: at debug, a connection the relay closes because
// its client went past a limit is logged with the client and the reason
// (what an operator looks for when a client says it was disconnected);
// one its client closes is not.
func TestLimitCloseLogged(t *testing.T) {
	var logs relaytest.SyncBuffer
	r := relaytest.Start(t, relaytest.Options{
		Relay:  relay.Config{OutQueueBytes: 1024},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	polite := relaytest.Dial(t, r.URL)
	polite.Req("x", `{"kinds":[1]}`)
	polite.Close()

	// Pings whose pongs it does not read: closed as not reading.
	c, err := relaytest.DialWith(t, r.URL, relaytest.DialOptions{Paused: true, ReadBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	ping := bytes.Repeat([]byte("p"), 125)
	const want = `level=DEBUG msg="connection closed by the relay" client=127.0.0.1 reason="not reading responses"`
	for deadline := time.Now().Add(relaytest.DefaultTimeout); !strings.Contains(logs.String(), want); {
		if time.Now().After(deadline) {
			t.Fatalf("no log line %s:\n%s", want, logs.String())
		}
		if c.WriteMessage(websocket.PingMessage, ping) != nil {
			time.Sleep(10 * time.Millisecond) // closed: wait for the line
		}
	}
	if n := strings.Count(logs.String(), "connection closed by the relay"); n != 1 {
		t.Fatalf("%d lines for one connection closed by the relay (the polite client's close is not one):\n%s", n, logs.String())
	}
}
