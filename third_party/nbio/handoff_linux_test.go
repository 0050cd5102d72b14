package nbio

import (
	"io"
	"net"
	"testing"
)

// TestHandoffToPoller: what the goroutine that adds a connection writes
// before AddConn is ordered, for the race detector, before what its poller
// does with the connection, from the first event on. OnReadBufferAlloc
// runs on the poller before nbio reads the socket, so nothing else (the
// lock the read takes, the race detector's model of read(2)) orders it.
// Under -race, without the hand-off, this test fails with a data race on
// state.id; without -race it checks the same values arrive.
func TestHandoffToPoller(t *testing.T) {
	type state struct{ id int }
	g := NewEngine(Config{NPoller: 1})
	seen := make(chan int, 64)
	g.OnReadBufferAlloc(func(c *Conn) *[]byte {
		if st, ok := c.Session().(*state); ok {
			select {
			case seen <- st.id:
			default:
			}
		}
		return g.PollerBufferPtr(c)
	})
	g.OnData(func(c *Conn, data []byte) { _, _ = c.Write(data) })
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for i := 0; i < 10; i++ {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		std, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		nbc, err := NBConn(std)
		if err != nil {
			t.Fatal(err)
		}
		st := &state{}
		st.id = i + 1 // written here, read by the poller
		nbc.SetSession(st)
		if _, err := g.AddConn(nbc); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if id := <-seen; id != i+1 {
			t.Fatalf("the poller saw state %d, want %d", id, i+1)
		}
		// The echo: the poller is done with this connection's data
		// before the next connection's state is written.
		if _, err := io.ReadFull(client, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
}
