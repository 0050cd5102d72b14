package server

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// deadlineConn counts the read deadlines cleared on it.
type deadlineConn struct {
	net.Conn
	cleared atomic.Int32
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	if t.IsZero() {
		c.cleared.Add(1)
	}
	return nil
}

// TestSettlerSettlesEveryTransport adds transports from several
// goroutines while the settler ticks: every one must be settled (none
// lost to a slot the tick was still reading), closing ones left alone.
func TestSettlerSettlesEveryTransport(t *testing.T) {
	st := newSettler(0) // the shortest tick, 10ms
	defer st.close()
	const workers, each = 4, 300
	conns := make([][]*deadlineConn, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c := &deadlineConn{}
				tr := &transport{nbc: c}
				if i%10 == 9 {
					tr.closing.Store(true)
				}
				conns[w] = append(conns[w], c)
				st.add(tr)
				if i%20 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pending := 0
		for w := range conns {
			for i, c := range conns[w] {
				n := c.cleared.Load()
				switch {
				case i%10 == 9 && n != 0:
					t.Fatalf("a closing transport was settled")
				case i%10 != 9 && n > 1:
					t.Fatalf("transport settled %d times", n)
				case i%10 != 9 && n == 0:
					pending++
				}
			}
		}
		if pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d transports never settled", pending, workers*each*9/10)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
