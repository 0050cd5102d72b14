package nbio

import (
	"net"
	"testing"
	"time"
)

// TestDrainedJobListDropped: once a connection's jobs have run, it holds
// no job list (an idle connection kept the drained slice for reuse, 8
// bytes or more each).
func TestDrainedJobListDropped(t *testing.T) {
	g := NewEngine(Config{NPoller: 1})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	std, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.AddConn(std)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		done := make(chan struct{})
		for i := 0; i < 3; i++ { // queued behind one another
			last := i == 2
			if !c.Execute(func() {
				if last {
					close(done)
				}
			}) {
				t.Fatal("Execute refused a job on an open connection")
			}
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the jobs did not run")
		}
		// The list is dropped right after the last job returns.
		for deadline := time.Now().Add(10 * time.Second); c.ExecuteLen() != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the job list did not drain")
			}
		}
		c.mux.Lock()
		kept := cap(c.jobList)
		c.mux.Unlock()
		if kept != 0 {
			t.Fatalf("round %d: the drained connection keeps a job list of capacity %d", round, kept)
		}
	}
}
