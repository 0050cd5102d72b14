package postgres

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// A batch whose COMMIT failed on a lost connection may have committed.
// The writer asks the database (pg_xact_status) for up to
// Options.ResolveTimeout; past it the batch is answered Failed with
// store.ErrInDoubt, and the question goes on here, in the background:
// the events of a transaction found committed are handed to
// Options.OnLateCommit, so that they are fanned out after all.

// maxInDoubt bounds the batches waiting for an answer; past it the oldest
// is given up (logged).
const maxInDoubt = 1024

// lateBatch is an in-doubt transaction and the events it stored if it
// committed.
type lateBatch struct {
	xid    uint64
	events []*nostr.Event
	since  time.Time
}

// inDoubtList holds the batches still in doubt.
type inDoubtList struct {
	mu      sync.Mutex
	batches []lateBatch
	wake    chan struct{}
}

// deferResolve records an in-doubt batch whose attempt stored the events
// marked Stored in b. Called by the writer before it answers them.
func (s *Store) deferResolve(d *inDoubt, b *batch) {
	var evs []*nostr.Event
	for _, it := range b.items {
		if it.res.Outcome == store.Stored {
			evs = append(evs, it.ev)
		}
	}
	if len(evs) == 0 {
		return
	}
	l := &s.late
	l.mu.Lock()
	if len(l.batches) >= maxInDoubt {
		s.log.Error("store: too many commits in doubt; giving one up: its events, if stored, will not be fanned out",
			"xid", l.batches[0].xid, "events", len(l.batches[0].events))
		l.batches = l.batches[1:]
	}
	l.batches = append(l.batches, lateBatch{xid: d.xid, events: evs, since: time.Now()})
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// resolveLoop asks the database about the batches in doubt every second
// until Close.
func (s *Store) resolveLoop() {
	defer s.bg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-tick.C:
		case <-s.late.wake:
		}
		s.resolvePending()
	}
}

// resolvePending asks about every batch in doubt once.
func (s *Store) resolvePending() {
	l := &s.late
	l.mu.Lock()
	pending := append([]lateBatch(nil), l.batches...)
	l.mu.Unlock()
	for _, lb := range pending {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.QueryTimeout)
		var status *string
		err := s.note(s.pool.QueryRow(ctx, "SELECT pg_xact_status($1::text::xid8)", strconv.FormatUint(lb.xid, 10)).Scan(&status))
		cancel()
		if err != nil {
			return // still unreachable: next time
		}
		if status != nil && *status == "in progress" {
			continue
		}
		l.mu.Lock()
		for i := range l.batches {
			if l.batches[i].xid == lb.xid {
				l.batches = append(l.batches[:i], l.batches[i+1:]...)
				break
			}
		}
		l.mu.Unlock()
		if status == nil || *status != "committed" {
			s.log.Info("store: a commit in doubt did not take effect", "xid", lb.xid, "events", len(lb.events))
			continue
		}
		s.lateCommitted.Add(int64(len(lb.events)))
		s.log.Warn("store: a commit in doubt took effect: its events were answered Failed but are stored",
			"xid", lb.xid, "events", len(lb.events), "after", time.Since(lb.since).Round(time.Millisecond))
		if s.opts.OnLateCommit != nil {
			for _, ev := range lb.events {
				s.opts.OnLateCommit(ev, lb.xid)
			}
		}
	}
}
