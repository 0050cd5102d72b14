package relay

import (
	"context"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// NIP-62 requests to vanish. The store applies vanish semantics to every
// kind-62 event it is given (it deletes the author's events up to the
// request's created_at and refuses them afterwards), so the relay lets
// through only the requests addressed to it: a "relay" tag naming this
// relay (see matchesOwnURL) or "ALL_RELAYS". After the commit the relay
// also deletes the NIP-59 gift wraps addressed to the author (kind 1059
// with a "p" tag naming it, created_at up to the request's), on one
// background goroutine fed by a small queue.

// vanishQueue is how many committed requests to vanish may wait for their
// gift-wrap cleanup; beyond it the cleanup of a request is skipped and
// logged (the author's own events are deleted by the store regardless).
const vanishQueue = 64

// vanishBatch is how many gift wraps one Delete call removes.
const vanishBatch = 512

// checkVanish accepts a request to vanish addressed to this relay (nil)
// and refuses others with "invalid:". Requests to vanish skip the rest of
// the write policy: NIP-62 applies whatever the user's status.
func (r *Relay) checkVanish(ev *nostr.Event) *nostr.Rejection {
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "relay" && (t[1] == "ALL_RELAYS" || r.matchesOwnURL(t[1])) {
			return nil
		}
	}
	return nostr.Reject(nostr.PrefixInvalid, "request to vanish is for another relay")
}

// vanished is called by the dispatcher when a request to vanish was
// stored. It never blocks.
func (r *Relay) vanished(ev *nostr.Event) {
	select {
	case r.vanishQ <- ev:
	default:
		r.log.Warn("request to vanish: gift-wrap cleanup queue full, skipped", "pubkey", ev.PubKey.Hex())
	}
}

// vanishWorker deletes the gift wraps addressed to vanished authors until
// the relay shuts down.
func (r *Relay) vanishWorker() {
	defer r.wg.Done()
	for {
		select {
		case <-r.ctx.Done():
			return
		case ev := <-r.vanishQ:
			n, err := r.deleteGiftWraps(r.ctx, ev)
			if err != nil && r.ctx.Err() != nil {
				return // shutting down: the rest is skipped
			}
			if err != nil {
				r.stats.DBErrors.Add(1)
				r.log.Warn("request to vanish: gift-wrap cleanup failed", "pubkey", ev.PubKey.Hex(), "err", err)
				continue
			}
			if n > 0 {
				r.log.Info("request to vanish: gift wraps deleted", "pubkey", ev.PubKey.Hex(), "count", n)
			}
		}
	}
}

// deleteGiftWraps deletes the kind-1059 events p-tagging ev's author with
// created_at up to ev's.
func (r *Relay) deleteGiftWraps(ctx context.Context, ev *nostr.Event) (int, error) {
	f := nostr.Filter{
		Kinds:    []int{nostr.KindGiftWrap},
		Tags:     []nostr.TagFilter{{Name: 'p', Values: []string{ev.PubKey.Hex()}}},
		Until:    ev.CreatedAt,
		HasUntil: true,
		Present:  nostr.PresentKinds,
	}
	it, err := r.store.Query(ctx, []nostr.Filter{f})
	if err != nil {
		return 0, err
	}
	var ids []nostr.ID
	for it.Next() {
		ids = append(ids, it.Record().ID)
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return 0, err
	}
	total := 0
	for len(ids) > 0 {
		b := ids[:min(len(ids), vanishBatch)]
		ids = ids[len(b):]
		n, err := r.store.Delete(ctx, b)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
