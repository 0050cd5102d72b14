package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// TestSlowConsumerMemoryReturned is the slow-consumer episode of issue 16
// at test scale: subscribers that never read fill their out-queues from
// one publisher, the relay releases memory while the queues are full (so
// its baseline includes them), then every subscriber disconnects and
// nothing else happens. The heap and RSS must come back near where they
// were before the episode, on a quiet relay, well before the runtime's
// own two-minute forced collection (which was all that freed them). The
// deadline detects memory that is never returned; it is not a timing.
func TestSlowConsumerMemoryReturned(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	const (
		subscribers = 48
		queueBytes  = 2 << 20
		content     = 16 << 10
	)
	dir := t.TempDir()
	bin := petrelBin(t)
	p := startServeProc(t, bin, []string{
		"PETREL_RUNTIME_MEMORY_RELEASE_INTERVAL=200ms",
		fmt.Sprintf("PETREL_RELAY_OUT_QUEUE_BYTES=%d", queueBytes),
		"PETREL_RELAY_DRAIN_TIMEOUT=10m", // the subscribers close, not the relay
		"PETREL_LOG_LEVEL=debug",
	}, "--data", dir+"/data", "--listen", "127.0.0.1:0")

	pub := relaytest.Dial(t, p.URL)
	defer pub.Close()
	key := relaytest.NewKey("slow-consumer")
	body := strings.Repeat("x", content)
	pub.MustPublish(key.Note(body + "warm-up"))
	time.Sleep(time.Second) // a few release checks: the relay settles
	base := p.Stats(t).Process
	if base.Goroutines <= 0 || base.OpenFiles <= 0 || base.RSSBytes <= 0 || base.HeapObjectsBytes == 0 {
		t.Fatalf("/stats process figures missing: %+v", base)
	}

	subs := make([]*relaytest.Client, subscribers)
	for i := range subs {
		c, err := relaytest.DialWith(t, p.URL, relaytest.DialOptions{NoRead: true, ReadBuffer: 4096})
		if err != nil {
			t.Fatal(err)
		}
		c.SendRaw(`["REQ","live",{"kinds":[1],"limit":0}]`)
		subs[i] = c
	}
	// Enough events to fill every queue past its cap; the publisher
	// reads its OKs, so every event has been fanned out when it is done.
	events := 2 * queueBytes / content
	for i := 0; i < events; i++ {
		pub.MustPublish(key.Note(fmt.Sprintf("%s %d", body, i)))
	}
	var full server.Stats
	want := int64(subscribers) * queueBytes / 2
	for deadline := time.Now().Add(30 * time.Second); ; {
		full = p.Stats(t)
		if full.OutQueueBytes >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("out_queue_bytes %d after publishing %d events to %d subscribers, want at least %d", full.OutQueueBytes, events, subscribers, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Quiet with the queues full: the relay releases what the burst
	// left and keeps the queues (they are live).
	time.Sleep(2 * time.Second)
	full = p.Stats(t)
	if full.OutQueueBytes < want {
		t.Fatalf("out_queue_bytes fell to %d with nobody reading", full.OutQueueBytes)
	}
	grown := full.Process.HeapObjectsBytes - base.HeapObjectsBytes
	t.Logf("before: heap %d MiB, RSS %d MiB; queues full: %d MiB queued, heap %d MiB, RSS %d MiB",
		base.HeapResidentBytes>>20, base.RSSBytes>>20, full.OutQueueBytes>>20, full.Process.HeapResidentBytes>>20, full.Process.RSSBytes>>20)
	if int64(grown) < want {
		t.Fatalf("heap grew by %d with %d bytes queued: the scenario did not hold the memory it should", grown, full.OutQueueBytes)
	}

	for _, c := range subs {
		c.Close()
	}
	// Nothing more happens. Within seconds the memory must be back
	// within a quarter of what the episode took.
	heapBound := base.HeapResidentBytes + (full.Process.HeapResidentBytes-base.HeapResidentBytes)/4
	rssBound := base.RSSBytes + (full.Process.RSSBytes-base.RSSBytes)/4
	var after server.Stats
	for deadline := time.Now().Add(30 * time.Second); ; {
		after = p.Stats(t)
		if after.ConnectionsActive == 1 && after.OutQueueBytes == 0 && after.Process.HeapResidentBytes <= heapBound && after.Process.RSSBytes <= rssBound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after the slow subscribers closed: %d connections, %d queued, heap %d MiB (bound %d), RSS %d MiB (bound %d), %d GC cycles since they closed\nlog:\n%s",
				after.ConnectionsActive, after.OutQueueBytes, after.Process.HeapResidentBytes>>20, heapBound>>20,
				after.Process.RSSBytes>>20, rssBound>>20, after.Process.GCCycles-full.Process.GCCycles, tail(p.Log(), 4096))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("after close: heap %d MiB, RSS %d MiB, %d queued", after.Process.HeapResidentBytes>>20, after.Process.RSSBytes>>20, after.OutQueueBytes)

	// The relay still works.
	pub.MustPublish(key.Note("after"))
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
