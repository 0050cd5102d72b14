package relay_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// heldIn lists the events the store in dir holds unverified (the relay
// must not be running).
func heldIn(t *testing.T, dir string) []*nostr.Event {
	t.Helper()
	st, err := pebble.Open(pebble.Options{Path: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("open the store after the kill: %v", err)
	}
	defer st.Close()
	var out []*nostr.Event
	if err := st.Unverified(context.Background(), func(ev *nostr.Event) error { out = append(out, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOptimisticKill9 kills `petrel serve` (verify_mode optimistic, one
// verifier, so that held events pile up) with SIGKILL while events it has
// answered OK:true are still held unverified, valid and forged ones, as
// the store shows after the kill. Restarted (in sync mode: the check of
// what an earlier run held does not depend on the mode), the relay checks
// them at start: every acknowledged valid event becomes servable, no
// forged one ever is, and nothing stays held.
func TestOptimisticKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs petrel: not in -short")
	}
	bin := buildPetrel(t)
	env := []string{"PETREL_RELAY_VERIFY_MODE=optimistic", "PETREL_RELAY_VERIFY_WORKERS=1"}
	const conns, per, window = 4, 2500, 128
	for attempt := 1; attempt <= 5; attempt++ {
		data := t.TempDir()
		p := startPetrel(t, bin, data, env...)
		plans := make([][]*nostr.Event, conns)
		forged := map[nostr.ID]bool{}
		for c := range plans {
			k := relaytest.NewKey(fmt.Sprintf("kill9 %d %d", attempt, c))
			now := time.Now().Unix()
			for i := 0; i < per; i++ {
				ev := k.Event(1, fmt.Sprintf("kill9 %d", i), nostr.Tags{{"t", "kill9"}}, now-int64(i))
				if i%8 == 7 {
					f := forge(relaytest.NewKey(fmt.Sprintf("kill9 forger %d %d %d", attempt, c, i)).Event(1, "forged", nostr.Tags{{"t", "kill9"}}, now))
					forged[f.ID] = true
					ev = f
				}
				plans[c] = append(plans[c], ev)
			}
		}
		var mu sync.Mutex
		acked := map[nostr.ID]bool{}
		var oks atomic.Int64
		var wg sync.WaitGroup
		for c := range plans {
			cl, err := relaytest.DialWith(t, p.url, relaytest.DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sent, out := 0, 0
				for sent < len(plans[c]) || out > 0 {
					if sent < len(plans[c]) && out < window {
						if cl.WriteMessage(websocket.TextMessage, []byte(`["EVENT",`+string(plans[c][sent].Raw)+`]`)) != nil {
							return
						}
						sent++
						out++
						continue
					}
					m, err := cl.ReadWithin(relaytest.DefaultTimeout)
					if err != nil {
						return // killed
					}
					if m.Type != "OK" {
						continue
					}
					out--
					if m.OK {
						mu.Lock()
						acked[m.EventID] = true
						mu.Unlock()
						oks.Add(1)
					}
				}
			}()
		}
		// Kill once a good part is answered and events are held.
		deadline := time.Now().Add(relaytest.DefaultTimeout)
		for time.Now().Before(deadline) {
			if oks.Load() >= conns*per/3 {
				if n, _ := p.stats(t)["held_pending"].(float64); n > 0 {
					break
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
		p.kill()
		wg.Wait()
		held := heldIn(t, data)
		var heldValid, heldForged int
		for _, ev := range held {
			if forged[ev.ID] {
				heldForged++
			} else {
				heldValid++
			}
		}
		mu.Lock()
		t.Logf("attempt %d: killed with %d OK:true, %d held (%d forged)", attempt, len(acked), len(held), heldForged)
		mu.Unlock()
		if heldValid == 0 || heldForged == 0 {
			continue // the checks kept up: no test of the restart yet
		}

		p2 := startPetrel(t, bin, data)
		waitFor(t, "held events checked at start", func() bool {
			st := p2.stats(t)
			rec, _ := st["events_held_recovered"].(float64)
			pend, _ := st["held_pending"].(float64)
			return int(rec) == len(held) && pend == 0
		})
		st := p2.stats(t)
		if bad, _ := st["events_held_invalid"].(float64); int(bad) != heldForged {
			t.Fatalf("events_held_invalid %v after the restart, want %d", bad, heldForged)
		}
		q := relaytest.Dial(t, p2.url)
		var ackedValid, allForged []*nostr.Event
		for _, plan := range plans {
			for _, ev := range plan {
				if forged[ev.ID] {
					allForged = append(allForged, ev)
				} else if acked[ev.ID] {
					ackedValid = append(ackedValid, ev)
				}
			}
		}
		for i := 0; i < len(ackedValid); i += 500 {
			chunk := ackedValid[i:min(i+500, len(ackedValid))]
			have := idSet(q.Req(fmt.Sprintf("v%d", i), `{"ids":`+idsJSON(chunk)+`}`))
			for _, ev := range chunk {
				if !have[ev.ID] {
					t.Fatalf("event %.12s was answered OK:true but is not served after kill -9 and restart", ev.ID.Hex())
				}
			}
		}
		for i := 0; i < len(allForged); i += 500 {
			chunk := allForged[i:min(i+500, len(allForged))]
			f := `{"ids":` + idsJSON(chunk) + `}`
			if got := q.Req(fmt.Sprintf("f%d", i), f); len(got) != 0 {
				t.Fatalf("%d forged events served after the restart", len(got))
			}
			if n := count(t, q, fmt.Sprintf("c%d", i), f).Count; n != 0 {
				t.Fatalf("COUNT of forged events = %d after the restart", n)
			}
		}
		// Stopped gracefully: the releases and rejections are committed
		// without a sync (store.Unverified), so a SIGKILL here could
		// take the last of them back, to be checked again at the next
		// start; a graceful stop flushes them.
		p2.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p2.done:
		case <-time.After(relaytest.DefaultTimeout):
			t.Fatal("petrel serve did not stop on SIGTERM")
		}
		if left := heldIn(t, data); len(left) != 0 {
			t.Fatalf("%d events still held after the restart checked them", len(left))
		}
		t.Logf("after restart: %d acknowledged valid events served, %d held checked (%d forged rejected)", len(ackedValid), len(held), heldForged)
		return
	}
	t.Fatal("no attempt caught valid and forged events held at the kill")
}
