package postgres

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// Several Stores on one schema, as the nodes of a cluster.

// TestOpenConcurrent: nodes starting at once on an empty schema all open
// it, and each migration is applied once.
func TestOpenConcurrent(t *testing.T) {
	needDB(t)
	schema := freshSchema(t)
	const nodes = 6
	stores := make([]*Store, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(context.Background(), Options{URL: testURL(), Schema: schema, Logger: quiet, MaxConns: 2})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: Open: %v", i, err)
		}
		defer stores[i].Close()
	}
	var n, max int
	if err := stores[0].pool.QueryRow(context.Background(), "SELECT count(*), max(version) FROM schema_version").Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != SchemaVersion() || max != SchemaVersion() {
		t.Fatalf("schema_version has %d rows up to %d, want %d", n, max, SchemaVersion())
	}
	// Every node works on the shared schema.
	rng := rand.New(rand.NewPCG(1, 1))
	for i, s := range stores {
		ev := storetest.NewEvent(rng, storetest.Key(i), 1, storetest.BaseTime, nil, "hello")
		res, err := s.Save(context.Background(), []*nostr.Event{ev})
		if err != nil || res[0].Outcome != store.Stored {
			t.Fatalf("node %d: Save = %v, %v", i, res, err)
		}
	}
	if c, err := stores[nodes-1].Count(context.Background(), []nostr.Filter{{}}); err != nil || c != nodes {
		t.Fatalf("Count = %d, %v; want %d", c, err, nodes)
	}
}

// TestOpenNewerSchema: a schema migrated by a newer build is refused.
func TestOpenNewerSchema(t *testing.T) {
	s := openTest(t, Options{})
	schema := s.opts.Schema
	if _, err := s.pool.Exec(context.Background(), "INSERT INTO schema_version (version, name) VALUES ($1, 'future')", SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(context.Background(), Options{URL: testURL(), Schema: schema, Logger: quiet})
	if err == nil || !errorsIs(err, ErrSchema) {
		t.Fatalf("Open of a newer schema: %v, want ErrSchema", err)
	}
}

// TestNodesRaceAddresses: two nodes (separate pools) saving many
// versions of the same replaceable and addressable addresses at once
// keep exactly the winner of each address by the NIP-01 rule (highest
// created_at, then lowest id), and never a loser.
func TestNodesRaceAddresses(t *testing.T) {
	a := openTest(t, Options{})
	b := openTest(t, Options{Schema: a.opts.Schema})
	ctx := context.Background()
	type address struct {
		author, kind int
		d            string
	}
	var addrs []address
	for author := 0; author < 3; author++ {
		addrs = append(addrs, address{author, 0, ""}, address{author, 10002, ""}, address{author, 30023, "x"}, address{author, 30023, "y"})
	}
	rng := rand.New(rand.NewPCG(7, 7))
	const versions = 40
	var all []*nostr.Event
	for _, ad := range addrs {
		for v := 0; v < versions; v++ {
			var tags nostr.Tags
			if ad.d != "" {
				tags = nostr.Tags{{"d", ad.d}}
			}
			// Few distinct created_at values: many ties, decided by id.
			all = append(all, storetest.NewEvent(rng, storetest.Key(ad.author), ad.kind, storetest.BaseTime+int64(rng.IntN(6)), tags, "v"))
		}
	}
	// Each node gets every version, in its own random order, in small
	// batches from several goroutines, plus some through Submit.
	var mu sync.Mutex
	stored := map[nostr.ID]int{}
	removed := map[nostr.ID]int{}
	record := func(ev *nostr.Event, r store.SaveResult) {
		mu.Lock()
		defer mu.Unlock()
		switch r.Outcome {
		case store.Stored:
			stored[ev.ID]++
			for _, id := range r.Removed {
				removed[id]++
			}
		case store.Superseded, store.Duplicate:
		default:
			t.Errorf("outcome %v (%v) for a version", r.Outcome, r.Err)
		}
	}
	var wg sync.WaitGroup
	for n, s := range []*Store{a, b} {
		for g := 0; g < 3; g++ {
			order := slices.Clone(all)
			r := rand.New(rand.NewPCG(uint64(n), uint64(g)))
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < len(order); {
					k := min(1+r.IntN(8), len(order)-i)
					if r.IntN(3) == 0 {
						ev := order[i]
						wg.Add(1)
						if err := s.Submit(ctx, ev, func(res store.SaveResult) { record(ev, res); wg.Done() }); err != nil {
							t.Error(err)
							wg.Done()
						}
						i++
						continue
					}
					evs := order[i : i+k]
					res, err := s.Save(ctx, evs)
					if err != nil {
						t.Error(err)
						return
					}
					for j := range evs {
						record(evs[j], res[j])
					}
					i += k
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// The winner of each address, by the rule.
	winner := map[nostr.Address]*nostr.Event{}
	for _, ev := range all {
		ad, _ := ev.Address()
		if w := winner[ad]; w == nil || storetest.Newer(ev, w) {
			winner[ad] = ev
		}
	}
	for _, s := range []*Store{a, b} {
		it, err := s.Query(ctx, []nostr.Filter{{}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[nostr.Address]nostr.ID{}
		for it.Next() {
			r := it.Record()
			ev, err := nostr.ParseEvent(r.Raw, nil)
			if err != nil {
				t.Fatal(err)
			}
			ad, _ := ev.Address()
			if _, dup := got[ad]; dup {
				t.Fatalf("address %v holds two versions", ad)
			}
			got[ad] = r.ID
		}
		it.Close()
		if len(got) != len(winner) {
			t.Fatalf("%d addresses stored, want %d", len(got), len(winner))
		}
		for ad, w := range winner {
			if got[ad] != w.ID {
				t.Fatalf("address %v holds %s, want the winner %s", ad, got[ad].Hex()[:8], w.ID.Hex()[:8])
			}
		}
	}
	// Every version stored once at most, and every stored version but
	// the winners removed exactly once.
	for id, n := range stored {
		if n != 1 {
			t.Fatalf("version %x stored %d times", id[:4], n)
		}
	}
	for ad, w := range winner {
		if stored[w.ID] != 1 || removed[w.ID] != 0 {
			t.Fatalf("winner of %v: stored %d, removed %d", ad, stored[w.ID], removed[w.ID])
		}
	}
	for id := range stored {
		isWinner := false
		for _, w := range winner {
			isWinner = isWinner || w.ID == id
		}
		if !isWinner && removed[id] != 1 {
			t.Fatalf("loser %x stored and removed %d times", id[:4], removed[id])
		}
	}
}

// TestNodesRaceDeletions: one node saves events while another saves
// their authors' deletions of them (and requests to vanish): whatever
// the interleaving, no deleted event stays stored, and none can come
// back.
func TestNodesRaceDeletions(t *testing.T) {
	a := openTest(t, Options{})
	b := openTest(t, Options{Schema: a.opts.Schema})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 9))
	var targets, deletions []*nostr.Event
	for i := 0; i < 300; i++ {
		ev := storetest.NewEvent(rng, storetest.Key(i%10), 1, storetest.BaseTime+int64(i), nil, "target")
		targets = append(targets, ev)
		deletions = append(deletions, storetest.NewEvent(rng, storetest.Key(i%10), 5, storetest.BaseTime+1000, nostr.Tags{{"e", ev.ID.Hex()}}, ""))
	}
	// Author 20 vanishes while its events and gift wraps addressed to it
	// arrive on the other node.
	var vanishing []*nostr.Event
	for i := 0; i < 100; i++ {
		vanishing = append(vanishing, storetest.NewEvent(rng, storetest.Key(20), 1, storetest.BaseTime+int64(i), nil, "mine"),
			storetest.NewEvent(rng, storetest.Key(30+i%5), 1059, storetest.BaseTime+int64(i), nostr.Tags{{"p", storetest.Key(20).Hex()}}, "wrap"))
	}
	vanish := storetest.NewEvent(rng, storetest.Key(20), 62, storetest.BaseTime+500, nil, "")
	var wg sync.WaitGroup
	save := func(s *Store, evs []*nostr.Event, step int) {
		defer wg.Done()
		for i := 0; i < len(evs); i += step {
			if _, err := s.Save(ctx, evs[i:min(i+step, len(evs))]); err != nil {
				t.Error(err)
				return
			}
		}
	}
	wg.Add(4)
	go save(a, targets, 3)
	go save(b, deletions, 2)
	go save(a, vanishing, 4)
	go save(b, append(vanishing[:60:60], vanish), 5)
	wg.Wait()
	for _, s := range []*Store{a, b} {
		if n, err := s.Count(ctx, []nostr.Filter{{Kinds: []int{1, 1059}}}); err != nil || n != 0 {
			t.Fatalf("%d deleted or vanished events still stored (%v)", n, err)
		}
		res, err := s.Save(ctx, append(slices.Clone(targets[:20]), vanishing[:20]...))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Outcome != store.Deleted {
				t.Fatalf("saving deleted event %d again: %v", i, r.Outcome)
			}
		}
	}
}
