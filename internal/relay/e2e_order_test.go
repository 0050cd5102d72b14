package relay_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestPipelinedOrderKept: events one connection pipelines (sends without
// waiting for OKs) are committed, and answered, in the order they were
// sent, although verification runs in parallel: an older replaceable or
// addressable version followed by a newer one both get OK true, in order
// (never "duplicate: a newer version ..." for the first), and a note
// followed by its deletion request is stored and then deleted (never
// "blocked: deleted" for the note). Other connections publish meanwhile,
// so the verify queue holds several connections' events at once.
func TestPipelinedOrderKept(t *testing.T) {
	t.Parallel()
	r := relaytest.Start(t, relaytest.Options{})
	const writers, rounds = 4, 20

	stop := make(chan struct{})
	var load sync.WaitGroup
	var loadSent atomic.Int64
	for l := 0; l < 3; l++ {
		load.Add(1)
		go func(l int) {
			defer load.Done()
			c := relaytest.Dial(t, r.URL)
			k := relaytest.NewKey(fmt.Sprintf("order-load-%d", l))
			outstanding := 0
			for i := 0; ; i++ {
				select {
				case <-stop:
					for ; outstanding > 0; outstanding-- {
						c.ExpectType("OK")
					}
					return
				default:
				}
				if outstanding < 16 {
					c.SendRaw(`["EVENT",` + string(k.Event(1, fmt.Sprint("load ", i), nil, time.Now().Unix()-int64(i%1000)).Raw) + `]`)
					outstanding++
					loadSent.Add(1)
					continue
				}
				c.ExpectType("OK")
				outstanding--
			}
		}(l)
	}

	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := relaytest.Dial(t, r.URL)
			k := relaytest.NewKey(fmt.Sprintf("order-writer-%d", w))
			base := time.Now().Unix() - 10000
			for round := 0; round < rounds; round++ {
				ts := base + int64(10*round)
				note := k.Event(1, fmt.Sprint("to delete ", round), nil, ts)
				seqs := [][]*nostr.Event{
					// replaceable: older version first
					{k.Event(0, fmt.Sprintf(`{"name":"v%d-1"}`, round), nil, ts), k.Event(0, fmt.Sprintf(`{"name":"v%d-2"}`, round), nil, ts+1)},
					// addressable: older version first
					{k.Event(30078, "a1", nostr.Tags{{"d", "app"}}, ts), k.Event(30078, "a2", nostr.Tags{{"d", "app"}}, ts+1)},
					// a note, then its deletion request
					{note, k.Event(5, "", nostr.Tags{{"e", note.ID.Hex()}}, ts+2)},
				}
				for _, evs := range seqs {
					for _, ev := range evs {
						c.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
					}
					for i, ev := range evs {
						m, err := c.ReadWithin(relaytest.DefaultTimeout)
						if err != nil {
							t.Errorf("writer %d round %d: %v", w, round, err)
							return
						}
						if m.Type != "OK" || m.EventID != ev.ID || !m.OK || m.Message != "" {
							t.Errorf("writer %d round %d kind %d event %d of %d: got %s, want OK true for it", w, round, ev.Kind, i+1, len(evs), describe(m))
							return
						}
					}
				}
				if got := c.Req("q", `{"ids":["`+note.ID.Hex()+`"]}`); len(got) != 0 {
					t.Errorf("writer %d round %d: the deleted note is still served", w, round)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	load.Wait()
	if loadSent.Load() == 0 {
		t.Fatal("no load was published")
	}
}
