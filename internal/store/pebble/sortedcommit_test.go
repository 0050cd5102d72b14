package pebble

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// TestSortedCommit: the writer commits each batch in key order
// (commitSorted). The same batches committed as written must leave the
// very same keys and values: replacements, deletions, vanishes and
// removals within one batch write a key and delete it again, so the order
// of the operations on one key is what matters, and sorting must keep it.
//
// With 256 KiB memtables, batches of up to 64 notes of about 2 KiB reach
// the half a memtable that makes pebble keep the batch itself as a
// flushable one: the writer's sorted batch, reused for the next commit,
// must not disturb it.
func TestSortedCommit(t *testing.T) {
	for _, c := range []struct {
		search   bool
		memtable uint64 // 0: the default
		large    bool   // a few large batches
	}{{true, 0, false}, {false, 0, false}, {true, 256 << 10, true}} {
		t.Run(fmt.Sprintf("search=%v/memtable=%d", c.search, c.memtable), func(t *testing.T) {
			o := Options{NoSync: true, PurgeInterval: -1, DisableSearch: !c.search, MemTableSize: c.memtable}
			sorted := openTest(t, o)
			o.unsortedCommits = true
			plain := openTest(t, o)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(19, 1))
			var kept []*nostr.Event // events that may be stored, for deletions to name
			ts := int64(storetest.BaseTime)
			words := []string{"petrel", "relay", "storm", "ocean", "wing", "nest", "shore", "gale"}
			text := func() string {
				var b bytes.Buffer
				for i := 0; i < 3+rng.IntN(8); i++ {
					b.WriteString(words[rng.IntN(len(words))])
					b.WriteByte(' ')
				}
				return b.String()
			}
			for round := 0; round < 60; round++ {
				var batch []*nostr.Event
				for i := 0; i < 1+rng.IntN(16); i++ {
					ts++
					pk := storetest.Key(rng.IntN(6))
					var ev *nostr.Event
					switch k := rng.IntN(10); {
					case k < 4: // a note with tags
						tags := nostr.Tags{{"t", words[rng.IntN(len(words))]}}
						if len(kept) > 0 {
							tags = append(tags, nostr.Tag{"e", kept[rng.IntN(len(kept))].ID.String()})
						}
						if rng.IntN(4) == 0 {
							tags = append(tags, nostr.Tag{"expiration", strconv.FormatInt(ts+1_000_000, 10)})
						}
						ev = storetest.NewEvent(rng, pk, 1, ts, tags, text())
					case k < 6: // replaceable, sometimes older than the stored one
						ev = storetest.NewEvent(rng, pk, 0, ts-int64(rng.IntN(3)), nil, text())
					case k < 8: // addressable, a few d values
						ev = storetest.NewEvent(rng, pk, 30023, ts, nostr.Tags{{"d", strconv.Itoa(rng.IntN(3))}}, text())
					case k < 9 && len(kept) > 0: // a deletion of one of its author's events, or another's (ignored)
						target := kept[rng.IntN(len(kept))]
						ev = storetest.NewEvent(rng, target.PubKey, nostr.KindDeletion, ts, nostr.Tags{{"e", target.ID.String()}}, "")
					case rng.IntN(8) == 0: // a vanish request
						ev = storetest.NewEvent(rng, pk, nostr.KindRequestToVanish, ts, nostr.Tags{{"relay", "ALL_RELAYS"}}, "")
					default:
						ev = storetest.NewEvent(rng, pk, 1, ts, nil, text())
					}
					batch = append(batch, ev)
					kept = append(kept, ev)
				}
				if c.large && round%5 == 0 { // long notes, up to 128 KiB of them
					for range 1 + rng.IntN(64) {
						ts++
						ev := storetest.NewEvent(rng, storetest.Key(rng.IntN(6)), 1, ts, nil, strings.Repeat(text(), 40))
						batch = append(batch, ev)
						kept = append(kept, ev)
					}
				}
				if rng.IntN(3) == 0 { // a duplicate in the batch
					batch = append(batch, batch[rng.IntN(len(batch))])
				}
				a, err := sorted.Save(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				b, err := plain.Save(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				for i := range a {
					if a[i].Outcome != b[i].Outcome {
						t.Fatalf("round %d event %d: outcome %v sorted, %v as written", round, i, a[i].Outcome, b[i].Outcome)
					}
				}
				if round%10 == 9 && len(kept) > 0 { // removals by id, one commit
					ids := []nostr.ID{kept[rng.IntN(len(kept))].ID, kept[rng.IntN(len(kept))].ID}
					na, err := sorted.Delete(ctx, ids)
					if err != nil {
						t.Fatal(err)
					}
					nb, err := plain.Delete(ctx, ids)
					if err != nil {
						t.Fatal(err)
					}
					if na != nb {
						t.Fatalf("round %d: Delete removed %d sorted, %d as written", round, na, nb)
					}
				}
			}
			sameContents(t, sorted.db, plain.db)
			for _, s := range []*Store{sorted, plain} {
				if err := checkIntegrity(s.db); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// sameContents fails unless a and b hold the same keys with the same
// values.
func sameContents(t *testing.T, a, b *pebble.DB) {
	t.Helper()
	ia, err := a.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ia.Close()
	ib, err := b.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	n := 0
	okA, okB := ia.First(), ib.First()
	for ; okA && okB; okA, okB = ia.Next(), ib.Next() {
		if !bytes.Equal(ia.Key(), ib.Key()) || !bytes.Equal(ia.Value(), ib.Value()) {
			t.Fatalf("entry %d differs: %x = %x sorted, %x = %x as written", n, ia.Key(), ia.Value(), ib.Key(), ib.Value())
		}
		n++
	}
	if okA || okB {
		t.Fatalf("after %d equal entries: sorted has more: %v, as written has more: %v", n, okA, okB)
	}
	if n < 500 {
		t.Fatalf("only %d entries compared: the test wrote too little", n)
	}
}
