//go:build linux

package nostr

import (
	"strings"
	"syscall"
	"testing"
)

// TestSizeBounds: each parse function takes an input of exactly the size
// ceiling (it is refused for what it holds, not for its size) and refuses
// one a byte larger with its size Bound. The inputs are 2 GiB of zero
// pages mapped read-only without reserving memory: the parser reads at
// most their first bytes, so this costs address space, not RAM.
func TestSizeBounds(t *testing.T) {
	mem, err := syscall.Mmap(-1, 0, maxInput+1, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		t.Skipf("cannot map %d bytes of address space: %v", maxInput+1, err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	parsers := map[Bound]func([]byte) error{
		BoundEventBytes:   func(b []byte) error { _, err := ParseEvent(b, nil); return err },
		BoundFilterBytes:  func(b []byte) error { _, err := ParseFilter(b, nil); return err },
		BoundMessageBytes: func(b []byte) error { _, err := ParseClientMessage(b, nil); return err },
	}
	relay := func(b []byte) error { _, err := ParseRelayMessage(b); return err }
	f := func(b Bound, parse func([]byte) error) {
		t.Helper()
		err := parse(mem[:maxInput])
		if err == nil {
			t.Fatalf("%v: zero bytes accepted", b)
		}
		if pe := parseErr(t, err); pe.Bound != BoundNone {
			t.Errorf("%v: input at the ceiling refused for its size: %v", b, err)
		}
		if pe := parseErr(t, parse(mem)); pe.Bound != b {
			t.Errorf("%v: input past the ceiling refused with Bound %v: %v", b, pe.Bound, pe)
		}
	}
	for _, b := range Bounds() {
		if parse, ok := parsers[b]; ok {
			f(b, parse)
		} else if !strings.HasPrefix(b.String(), "Max") {
			t.Errorf("%v: no parser for this size bound", b)
		}
	}
	f(BoundMessageBytes, relay)
}
