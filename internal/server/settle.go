package server

import (
	"sync"
	"time"
)

// settler clears the read deadline of upgraded connections a second time,
// after nbio is surely done setting it.
//
// nbio (v1.6.8) registers an accepted connection with its poller and only
// then arms the HTTP read deadline (HeaderTimeout). If the poller reads
// the upgrade request and the handler upgrades the connection (which
// clears the deadline) before the accept goroutine reaches that line, the
// deadline is armed again on a WebSocket and the connection is dropped
// HeaderTimeout later ("read timeout"; seen for a few connections in ten
// thousand). Each upgraded transport is therefore settled again between
// one and two ticks after its upgrade, well before HeaderTimeout.
type settler struct {
	mu       sync.Mutex
	current  []*transport
	previous []*transport
	stop     chan struct{}
	done     chan struct{}
}

func newSettler(headerTimeout time.Duration) *settler {
	st := &settler{stop: make(chan struct{}), done: make(chan struct{})}
	tick := min(time.Second, headerTimeout/4)
	go st.run(max(tick, 10*time.Millisecond))
	return st
}

func (st *settler) add(t *transport) {
	st.mu.Lock()
	st.current = append(st.current, t)
	st.mu.Unlock()
}

func (st *settler) run(tick time.Duration) {
	defer close(st.done)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		select {
		case <-st.stop:
			return
		case <-tk.C:
		}
		// current starts afresh: reusing due's array for it would let add
		// append into the slots this loop is still reading.
		st.mu.Lock()
		due := st.previous
		st.previous, st.current = st.current, nil
		st.mu.Unlock()
		for _, t := range due {
			if !t.closing.Load() {
				_ = t.nbc.SetReadDeadline(time.Time{})
			}
		}
	}
}

func (st *settler) close() {
	close(st.stop)
	<-st.done
}
