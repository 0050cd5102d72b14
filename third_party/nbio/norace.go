// Petrel patch (see PATCHES.md): this file is not in nbio v1.6.8.

//go:build !race && (linux || darwin || netbsd || freebsd || openbsd || dragonfly)
// +build !race
// +build linux darwin netbsd freebsd openbsd dragonfly

package nbio

// raceRelease does nothing without the race detector (see race.go).
func raceRelease(*Conn) {}

// raceAcquire does nothing without the race detector (see race.go).
func raceAcquire(*Conn) {}
