package relay

import "sync"

// turns is a verify queue that several verifiers share and whose batches
// are handed on in the order they were queued, though they are checked in
// parallel: each verifier takes a batch together with a ticket (taking is
// one step under takeMu, so tickets follow the queue's order), checks it,
// and hands it on between waitTurn and endTurn, which let a batch through
// only when every earlier ticket has been handed on. Both of the relay's
// verify pools use it: ingest (events before they are stored) and behind
// (held events, checked after they were stored).
type turns struct {
	queue   chan verifyJob
	workers int // verifiers taking from queue: take's even share

	takeMu sync.Mutex // held while a verifier takes a batch and its ticket
	ticket uint64     // the next batch's ticket; guarded by takeMu
	turnMu sync.Mutex
	turnCv sync.Cond
	turn   uint64 // the ticket whose batch is handed on next; guarded by turnMu
}

// init makes the queue with room for capacity jobs, shared by workers
// verifiers. t must not be copied afterwards.
func (t *turns) init(capacity, workers int) {
	t.queue = make(chan verifyJob, capacity)
	t.workers = max(workers, 1)
	t.turnCv.L = &t.turnMu
}

// take waits for a job, then takes what else is already queued, up to an
// even share per verifier (so that a short queue is still verified on
// every core), without waiting for more. It returns the batch's ticket,
// or false once the queue is closed and drained.
func (t *turns) take(jobs *[]verifyJob) (uint64, bool) {
	t.takeMu.Lock()
	defer t.takeMu.Unlock()
	j, open := <-t.queue
	if !open {
		return 0, false
	}
	*jobs = append((*jobs)[:0], j)
	share := min(verifyBatch, 1+len(t.queue)/t.workers)
	for len(*jobs) < share {
		select {
		case j, open := <-t.queue:
			if !open {
				share = 0
				continue
			}
			*jobs = append(*jobs, j)
		default:
			share = 0
		}
	}
	n := t.ticket
	t.ticket++
	return n, true
}

// waitTurn blocks until every batch with an earlier ticket was handed on.
func (t *turns) waitTurn(ticket uint64) {
	t.turnMu.Lock()
	for t.turn != ticket {
		t.turnCv.Wait()
	}
	t.turnMu.Unlock()
}

// endTurn lets the next batch be handed on.
func (t *turns) endTurn() {
	t.turnMu.Lock()
	t.turn++
	t.turnMu.Unlock()
	t.turnCv.Broadcast()
}
