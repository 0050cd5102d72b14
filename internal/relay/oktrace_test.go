package relay_test

import (
	"errors"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// An OK trace records every EVENT whose OK the dispatcher queued, with
// its stage times in order; EVENTs refused before the store are not in
// it, and one trace runs at a time.
func TestOKTrace(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	rl := r.Relay
	alice := relaytest.NewKey("oktrace-alice")
	c := relaytest.Dial(t, r.URL)
	if _, _, err := rl.StopOKTrace(); !errors.Is(err, relay.ErrOKTraceIdle) {
		t.Fatalf("stop with none running: %v", err)
	}
	c.MustPublish(alice.Note("before the trace"))
	if err := rl.StartOKTrace(0); err != nil {
		t.Fatal(err)
	}
	if err := rl.StartOKTrace(0); !errors.Is(err, relay.ErrOKTraceRunning) {
		t.Fatalf("second start: %v", err)
	}
	var stored []*nostr.Event
	for _, s := range []string{"one", "two", "three"} {
		ev := alice.Note(s)
		c.MustPublish(ev)
		stored = append(stored, ev)
	}
	eph := alice.Event(20001, "ephemeral", nil, 0)
	c.MustPublish(eph)
	bad := *alice.Note("bad signature")
	bad.Sig[10] ^= 1
	bad.Raw = nostr.Serialize(&bad)
	if m := c.Publish(&bad); m.OK {
		t.Fatalf("bad signature accepted: %+v", m)
	}
	recs, dropped, err := rl.StopOKTrace()
	if err != nil || dropped != 0 {
		t.Fatalf("stop: %v, %d dropped", err, dropped)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records, want 3 stored and 1 ephemeral: %+v", len(recs), recs)
	}
	for i, ev := range stored {
		rec := recs[i]
		if rec.ID != ev.ID {
			t.Errorf("record %d is %s, want %s", i, rec.ID.Hex(), ev.ID.Hex())
		}
		if rec.Received == 0 || rec.Verified < rec.Received || rec.Committed < rec.Verified || rec.Answered < rec.Committed {
			t.Errorf("record %d: times out of order: %+v", i, rec)
		}
	}
	if rec := recs[3]; rec.ID != eph.ID || rec.Received == 0 || rec.Verified != 0 || rec.Committed != 0 || rec.Answered < rec.Received {
		t.Errorf("ephemeral record: %+v", rec)
	}
	// Stopped: nothing more is recorded, and the next trace starts empty.
	c.MustPublish(alice.Note("after the trace"))
	if err := rl.StartOKTrace(0); err != nil {
		t.Fatal(err)
	}
	if recs, _, err := rl.StopOKTrace(); err != nil || len(recs) != 0 {
		t.Fatalf("a fresh trace holds %d records (%v)", len(recs), err)
	}
}

// A trace keeps at most its maximum: at it every EVENT is recorded, past
// it the rest are counted as dropped and the relay answers them as ever.
func TestOKTraceMax(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	rl := r.Relay
	alice := relaytest.NewKey("oktrace-max")
	c := relaytest.Dial(t, r.URL)
	for _, n := range []int{2, 3} {
		if err := rl.StartOKTrace(2); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			c.MustPublish(alice.Event(1, "max", nil, int64(1_700_000_000+10*n+i)))
		}
		recs, dropped, err := rl.StopOKTrace()
		if err != nil || len(recs) != 2 || dropped != int64(n-2) {
			t.Fatalf("%d events: %d records, %d dropped, %v; want 2 and %d", n, len(recs), dropped, err, n-2)
		}
	}
}

// A trace nobody stops ends by itself and lets its records go.
func TestOKTraceEndsByItself(t *testing.T) {
	defer relay.SetOKTraceLimit(50 * time.Millisecond)()
	r := relaytest.Start(t, relaytest.Options{})
	rl := r.Relay
	c := relaytest.Dial(t, r.URL)
	if err := rl.StartOKTrace(0); err != nil {
		t.Fatal(err)
	}
	c.MustPublish(relaytest.NewKey("oktrace-limit").Note("traced, then let go"))
	deadline := time.Now().Add(10 * time.Second)
	for rl.OKTraceOn() {
		if time.Now().After(deadline) {
			t.Fatal("the trace did not end by itself")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := rl.StopOKTrace(); !errors.Is(err, relay.ErrOKTraceIdle) {
		t.Fatalf("stop after the limit: %v", err)
	}
	if err := rl.StartOKTrace(0); err != nil {
		t.Fatalf("start after the limit: %v", err)
	}
	if _, _, err := rl.StopOKTrace(); err != nil {
		t.Fatal(err)
	}
}
