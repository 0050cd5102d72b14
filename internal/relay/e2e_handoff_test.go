package relay_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestHandoffManyPublishersAndSubscribers drives the stored-to-live
// hand-off (store.Snapshot, sub.sawCommit) from every side at once:
// several publishers pipeline events while subscribers open REQs at
// staggered moments, half of them after a first subscription they close
// at its EOSE (index churn while events flow). Each subscriber must see each matching event
// exactly once, stored or live, and every event OK'd before its REQ was
// sent in the stored part.
func TestHandoffManyPublishersAndSubscribers(t *testing.T) {
	t.Parallel()
	const pubs, each, subs, rounds = 4, 100, 8, 2
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxLimit: pubs * each}})
	for round := 0; round < rounds; round++ {
		keys := make([]relaytest.Key, pubs)
		var authors []string
		evs := make([][]*nostr.Event, pubs)
		all := map[nostr.ID]bool{}
		for p := range keys {
			keys[p] = relaytest.NewKey(fmt.Sprintf("handoff-%d-%d", round, p))
			authors = append(authors, `"`+keys[p].PK.Hex()+`"`)
			evs[p] = notes(keys[p], each, "handoff")
			for _, ev := range evs[p] {
				all[ev.ID] = true
			}
		}
		filter := `{"authors":[` + strings.Join(authors, ",") + `],"limit":` + fmt.Sprint(pubs*each) + `}`

		var okMu sync.Mutex
		okd := map[nostr.ID]bool{} // OK'd so far
		okCount := 0
		progress := make(chan struct{}, pubs*each)

		type result struct {
			before map[nostr.ID]bool // OK'd before the (last) REQ was sent
			stored map[nostr.ID]int
			live   map[nostr.ID]int
			err    error
		}
		results := make([]result, subs)
		var swg sync.WaitGroup
		clients := make([]*relaytest.Client, subs)
		starts := make([]chan struct{}, subs)
		subscribed := make([]chan struct{}, subs) // closed at the EOSE of "s"
		for i := range clients {
			clients[i] = relaytest.Dial(t, r.URL)
			starts[i] = make(chan struct{})
			subscribed[i] = make(chan struct{})
			swg.Add(1)
			go func(i int) {
				defer swg.Done()
				res := &results[i]
				c := clients[i]
				<-starts[i]
				req := func() {
					okMu.Lock()
					res.before = make(map[nostr.ID]bool, len(okd))
					for id := range okd {
						res.before[id] = true
					}
					okMu.Unlock()
					res.stored, res.live = map[nostr.ID]int{}, map[nostr.ID]int{}
					c.SendRaw(`["REQ","s",` + filter + `]`)
				}
				if i%2 == 1 {
					c.SendRaw(`["REQ","first",` + filter + `]`)
				} else {
					req()
				}
				eose := false
				for {
					m, err := c.ReadWithin(relaytest.DefaultTimeout)
					if err != nil {
						res.err = err
						return
					}
					switch {
					case m.Type == "EVENT" && m.SubID == "s" && !eose:
						res.stored[m.Event.ID]++
					case m.Type == "EVENT" && m.SubID == "s":
						res.live[m.Event.ID]++
					case m.Type == "EOSE" && m.SubID == "s":
						eose = true
						close(subscribed[i])
					case m.Type == "EVENT" && m.SubID == "first":
					case m.Type == "EOSE" && m.SubID == "first":
						c.SendRaw(`["CLOSE","first"]`)
						req()
					case m.Type == "EOSE" && m.SubID == "end":
						if !eose {
							res.err = fmt.Errorf("barrier EOSE before the subscription's EOSE")
						}
						return
					default:
						res.err = fmt.Errorf("unexpected %s", describe(m))
						return
					}
				}
			}(i)
		}

		// Subscriber i subscribes once i*total/subs events are OK'd.
		total := pubs * each
		go func() {
			started := 0
			for n := 0; started < subs; n++ {
				for started < subs && n >= started*total/subs {
					close(starts[started])
					started++
				}
				if started < subs {
					<-progress
				}
			}
		}()

		var pwg sync.WaitGroup
		for p := 0; p < pubs; p++ {
			pwg.Add(1)
			go func(p int) {
				defer pwg.Done()
				c := relaytest.Dial(t, r.URL)
				outstanding, next := 0, 0
				for next < each || outstanding > 0 {
					if next < each && outstanding < 8 {
						c.SendRaw(`["EVENT",` + string(evs[p][next].Raw) + `]`)
						next++
						outstanding++
						continue
					}
					m, err := c.ReadWithin(relaytest.DefaultTimeout)
					if err != nil {
						t.Errorf("publisher %d: %v", p, err)
						return
					}
					if m.Type != "OK" || !m.OK {
						t.Errorf("publisher %d: %s", p, describe(m))
						return
					}
					outstanding--
					okMu.Lock()
					okd[m.EventID] = true
					okCount++
					okMu.Unlock()
					progress <- struct{}{}
				}
			}(p)
		}
		pwg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		// Every fan-out is queued now: the barrier comes after it (and
		// after each subscriber's stored part, which another query worker
		// could otherwise still be sending).
		for i, c := range clients {
			select {
			case <-subscribed[i]:
			case <-time.After(relaytest.DefaultTimeout):
				t.Fatalf("round %d sub %d never subscribed", round, i)
			}
			c.SendRaw(`["REQ","end",{"kinds":[]}]`)
		}
		swg.Wait()

		for i, res := range results {
			if res.err != nil {
				t.Fatalf("round %d sub %d: %v", round, i, res.err)
			}
			for id := range all {
				st, lv := res.stored[id], res.live[id]
				if st+lv != 1 {
					t.Fatalf("round %d sub %d: event %x delivered %d times (stored %d, live %d)", round, i, id[:4], st+lv, st, lv)
				}
				if res.before[id] && st != 1 {
					t.Fatalf("round %d sub %d: event %x was OK'd before the REQ but came live", round, i, id[:4])
				}
			}
			for id := range res.stored {
				if !all[id] {
					t.Fatalf("round %d sub %d: unknown event %x", round, i, id[:4])
				}
			}
			for id := range res.live {
				if !all[id] {
					t.Fatalf("round %d sub %d: unknown event %x", round, i, id[:4])
				}
			}
		}
	}
}
