// Petrel patch (see PATCHES.md): this file is not in nbio v1.6.8.

//go:build race && (linux || darwin || netbsd || freebsd || openbsd || dragonfly)
// +build race
// +build linux darwin netbsd freebsd openbsd dragonfly

package nbio

import (
	"runtime"
	"unsafe"
)

// raceRelease and raceAcquire tell the race detector about the hand-off
// of a connection from the goroutine that registers it with a poller to
// the poller goroutine that serves it. The goroutine that accepts or dials
// a connection builds its state (addresses, session, handlers) and then
// registers the descriptor; the poller picks the connection up from
// epoll_wait or kevent. The kernel orders the two, but the race detector
// sees no synchronization and reports the poller's (and its handlers')
// first reads of that state as data races. A release at registration and
// an acquire wherever the poller takes the connection for an event are
// that order. Without -race both are empty (norace.go).
//
//go:norace
func raceRelease(c *Conn) { runtime.RaceRelease(unsafe.Pointer(c)) }

//go:norace
func raceAcquire(c *Conn) { runtime.RaceAcquire(unsafe.Pointer(c)) }
