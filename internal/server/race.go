//go:build race

package server

import (
	"runtime"
	"unsafe"

	"github.com/lesismal/nbio"
)

// raceHandoff tells the race detector about the hand-off of each accepted
// connection from nbhttp's accept goroutine to the epoll goroutine that
// serves it. nbhttp accepts on a goroutine with a standard net.Listener,
// builds the connection's state (its net.Conn wrapper, addresses, parser)
// there, then registers the descriptor with epoll; the poller goroutine
// picks it up from epoll_wait. The kernel orders the two, but the race
// detector sees no synchronization and reports every first read of that
// state (for example RemoteAddr in nbhttp's request parser) as a data race,
// so `go test -race` of anything that serves a connection fails.
//
// nbio calls the engine-level OnOpen on the accept goroutine after all of
// that state is built and just before the descriptor is registered, and
// OnReadBufferAlloc on the poller goroutine before every read: a release in
// the first and an acquire in the second are exactly the happens-before
// edge the kernel provides. This file is compiled only with -race; normal
// builds install neither hook.
func raceHandoff(e *nbio.Engine) {
	e.OnOpen(func(c *nbio.Conn) { runtime.RaceRelease(unsafe.Pointer(c)) })
	e.OnReadBufferAlloc(func(c *nbio.Conn) *[]byte {
		runtime.RaceAcquire(unsafe.Pointer(c))
		return e.PollerBufferPtr(c)
	})
}
