package pebble

import (
	"context"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// The relay asks HasAt for every incoming event before verifying it, and
// for a new event the answer is a pebble lookup of a missing key: mostly a
// walk down the memtables' skiplists, about a tenth of the CPU an ingested
// event costs. idBloom, a Bloom filter over the ids of every stored
// event, answers "absent" for most new ids without that lookup.
//
// No false negatives: an id the filter does not contain was not stored by
// any commit HasAt's token covers. The writer adds a batch's ids after
// the batch is committed and before the commit counter moves on, and
// HasAt reads the counter (its token) before it reads the filter. A filter
// becomes the one HasAt uses only once it holds every stored id: it is
// filled from an iterator over the I keys opened after the writer started
// adding its new ids to it (see buildSeen), so each id is in the
// iterator's view or added by the writer, or both. Removed events' ids
// stay in the filter and only cost a false positive (one lookup), as do
// ids ground to collide; the filter is never wrong the other way.
//
// The first HasAt starts the build, in the background; lookups go to
// pebble until it is done. Sizing: 16 bits per id, a power of two between
// seenMinBytes and Options.IDFilterMaxBytes, for twice the number of ids
// estimated from the I keys' disk space. Once the filter holds more ids
// than it was sized for it is rebuilt, twice as large, in the background
// (the old one answers meanwhile). At the size cap it stays and only
// grows less precise.

// idKeyDiskBytes estimates the disk space of one I key and value, for
// sizing the filter at open.
const idKeyDiskBytes = 48

// seenMinBytes is the smallest filter (for up to half a million ids;
// Options.idFilterMinBytes in tests).
const seenMinBytes = 1 << 20

// addSeen adds the ids of a committed batch's events to the filters.
// Called by the writer, after the commit and before commits moves on.
func (s *Store) addSeen(stored []storedBody) {
	// The filter being built first: buildSeen publishes it as s.seen
	// before it stops adding to it, so an id is never left out of both.
	b := s.seenBuilding.Load()
	f := s.seen.Load()
	for i := range stored {
		id := &stored[i].ev.ID
		if f != nil {
			f.add(id)
		}
		if b != nil {
			b.add(id)
		}
	}
	if f != nil && f.count.Load() > f.capacity && len(f.words)*8 < s.opts.IDFilterMaxBytes {
		s.startSeenBuild(f.count.Load())
	}
}

// startSeenBuild starts building a filter for about n ids in the
// background, unless one is being built.
func (s *Store) startSeenBuild(n int64) {
	if s.opts.IDFilterMaxBytes <= 0 || !s.seenBuild.CompareAndSwap(false, true) {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.seenBuild.Store(false)
		if err := s.buildSeen(n); err != nil {
			s.log.Error("store: building the filter of stored ids (lookups go to the database meanwhile)", "err", err)
		}
	}()
}

// estimateIDs estimates the number of stored events from the disk space
// of the I keys.
func (s *Store) estimateIDs() int64 {
	size, err := s.db.EstimateDiskUsage([]byte{pfxID}, []byte{pfxID + 1})
	if err != nil {
		return 0
	}
	return int64(size / idKeyDiskBytes)
}

// buildSeen fills a new filter for n ids (at least the number it finds)
// and makes it the one HasAt uses. It gives up when the store closes.
func (s *Store) buildSeen(n int64) error {
	for {
		start := time.Now()
		f := newIDBloom(idBloomBytes(2*n, s.opts.idFilterMinBytes, s.opts.IDFilterMaxBytes))
		// The writer adds to f every id it commits from now on; the
		// iterator, opened after, sees every id committed before.
		s.seenBuilding.Store(f)
		scanned, err := s.fillSeen(f)
		if err != nil || scanned < 0 {
			s.seenBuilding.Store(nil)
			return err
		}
		s.seen.Store(f)
		s.seenBuilding.Store(nil)
		level := slog.LevelInfo
		if scanned == 0 {
			level = slog.LevelDebug // a new store's: no news (an import into one starts it)
		}
		s.log.Log(context.Background(), level, "store: filter of stored ids ready", "ids", scanned, "bytes", len(f.words)*8, "took", time.Since(start).Round(time.Millisecond))
		if f.count.Load() <= f.capacity || len(f.words)*8 >= s.opts.IDFilterMaxBytes {
			return nil
		}
		n = f.count.Load() // more ids than estimated: again, at the right size
	}
}

// fillSeen adds every stored id to f and returns how many it added, or
// -1 if the store began closing.
func (s *Store) fillSeen(f *idBloom) (int, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxID}, UpperBound: []byte{pfxID + 1}})
	if err != nil {
		return 0, err
	}
	scanned := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 1+len(nostr.ID{}) {
			continue
		}
		f.add((*nostr.ID)(k[1:]))
		if scanned++; scanned%4096 == 0 {
			select {
			case <-s.closing:
				return -1, it.Close()
			default:
			}
		}
	}
	return scanned, it.Close()
}
