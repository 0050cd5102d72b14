package store

// Weighed is a write request queued for a store's single writer: Weight
// returns how many events (or ids) it carries and about how many bytes.
type Weighed interface {
	Weight() (events, bytes int)
}

// NextBatch is a writer's group commit: it waits for the next request on
// queue and takes, without waiting, whatever is queued behind it while the
// batch holds fewer than maxEvents events and maxBytes bytes (so the first
// request goes alone however heavy, and the last one taken may pass the
// caps). The batch reuses buf's array. open is false once queue is closed:
// the batch then holds the last requests, if any.
func NextBatch[R Weighed](queue <-chan R, buf []R, maxEvents, maxBytes int) (batch []R, open bool) {
	r, ok := <-queue
	if !ok {
		return buf[:0], false
	}
	batch = append(buf[:0], r)
	n, b := r.Weight()
	for n < maxEvents && b < maxBytes {
		select {
		case r, ok := <-queue:
			if !ok {
				return batch, false
			}
			batch = append(batch, r)
			dn, db := r.Weight()
			n, b = n+dn, b+db
		default:
			return batch, true
		}
	}
	return batch, true
}
