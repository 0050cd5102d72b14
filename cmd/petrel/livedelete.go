package main

// petrel delete beside a running petrel serve: the relay holds the pebble
// store, so delete asks it through the control socket (POST /delete) to
// list the matches and remove them through its own writer, as it does a
// NIP-86 banevent. Asking on the terminal takes two requests: the first
// lists the matches and holds the list under a token, the second deletes
// exactly that list, so the count confirmed is the set deleted even while
// events arrive.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// deleteRequest is the body of POST /delete on the control socket.
type deleteRequest struct {
	Filters []json.RawMessage `json:"filters,omitempty"`
	// DryRun only counts the matches.
	DryRun bool `json:"dry_run,omitempty"`
	// Hold lists the matches and keeps the list for a second request
	// (with Token) instead of deleting them.
	Hold bool `json:"hold,omitempty"`
	// Token deletes the list a Hold request kept; with Release, it only
	// drops the list (the deletion was declined).
	Token   string `json:"token,omitempty"`
	Release bool   `json:"release,omitempty"`
	// Batch is the number of events a store commit deletes.
	Batch int `json:"batch,omitempty"`
}

// deleteLine is one line of POST /delete's answer (NDJSON): after the
// listing {matched, token} for Hold or {matched} for a dry run; while
// deleting {matched, deleted} after each batch; at the end the same with
// done, seconds, and error if the deletion stopped.
type deleteLine struct {
	Matched int     `json:"matched"`
	Deleted int     `json:"deleted"`
	Token   string  `json:"token,omitempty"`
	Done    bool    `json:"done,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// holdTTL is how long a held list waits for its confirmation.
const holdTTL = 10 * time.Minute

// deleteHolds keeps the one list of matches waiting for confirmation (a
// new listing replaces it).
type deleteHolds struct {
	mu      sync.Mutex
	token   string
	items   []store.Item
	expires time.Time
}

func (h *deleteHolds) put(items []store.Item) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h.mu.Lock()
	defer h.mu.Unlock()
	h.token, h.items, h.expires = hex.EncodeToString(b[:]), items, time.Now().Add(holdTTL)
	return h.token
}

// take returns the list held under token and forgets it.
func (h *deleteHolds) take(token string) ([]store.Item, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if token == "" || token != h.token || time.Now().After(h.expires) {
		return nil, false
	}
	items := h.items
	h.token, h.items = "", nil
	return items, true
}

// serveDelete answers POST /delete: lists the matches of the filters (or
// takes a held list) and deletes them, streaming a line after each batch.
// A client that goes away stops the deletion between batches.
func (c *controlServer) serveDelete(w http.ResponseWriter, r *http.Request, st store.Store) {
	var req deleteRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, cli.MaxQueryBody)).Decode(&req); err != nil || (req.Token == "" && len(req.Filters) == 0) {
		controlReply(w, http.StatusBadRequest, cli.ControlError{Error: `want {"filters": [filter, ...]} or {"token": T}`})
		return
	}
	ctx := r.Context()
	var items []store.Item
	if req.Token != "" {
		var ok bool
		if items, ok = c.holds.take(req.Token); !ok {
			controlReply(w, http.StatusConflict, cli.ControlError{Error: "the list of matches confirmed is gone (more than 10 minutes, or another delete listed since): run delete again"})
			return
		}
		if req.Release {
			controlReply(w, http.StatusOK, deleteLine{Matched: len(items), Done: true})
			return
		}
	} else {
		filters, err := parseControlFilters(req.Filters)
		if err != nil {
			controlReply(w, http.StatusBadRequest, cli.ControlError{Error: err.Error()})
			return
		}
		if items, err = matchingItems(ctx, st, filters); err != nil {
			controlReply(w, http.StatusInternalServerError, cli.ControlError{Error: err.Error()})
			return
		}
		if req.DryRun || req.Hold || len(items) == 0 {
			line := deleteLine{Matched: len(items), Done: !req.Hold || len(items) == 0}
			if req.Hold && len(items) > 0 {
				line.Token = c.holds.put(items)
			}
			controlReply(w, http.StatusOK, line)
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	send := func(l deleteLine) {
		_ = enc.Encode(l)
		if flusher != nil {
			flusher.Flush()
		}
	}
	res, err := deleteItems(ctx, st, items, req.Batch, func(done, total int) {
		send(deleteLine{Matched: total, Deleted: done})
	})
	last := deleteLine{Matched: res.Matched, Deleted: res.Deleted, Done: true, Seconds: res.Seconds}
	if err != nil {
		last.Error = c.stopReason(err, fmt.Sprintf(stoppingPrefix+"it stopped after deleting %d of %d events: run petrel delete again once the relay is back", res.Deleted, res.Matched)).Error()
	}
	c.log.Info("events deleted (petrel delete)", "matched", res.Matched, "deleted", res.Deleted, "err", err)
	send(last)
}

// errDeleteStopped is the answer of a relay that stopped (or closed the
// connection) before saying the deletion was done.
var errDeleteStopped = errors.New("the running relay stopped answering before the deletion was done: count the matches again (petrel delete --dry-run)")

// askDelete sends req to the petrel serve holding dir and reads its answer;
// progress gets each batch's line. served is false when no relay answers.
func askDelete(ctx context.Context, dir string, req deleteRequest, progress func(deleteLine)) (last deleteLine, served bool, err error) {
	body, _ := json.Marshal(req)
	resp, served, err := cli.PostControl(ctx, dir, "delete", body)
	if !served || err != nil {
		return last, served, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l deleteLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return last, true, fmt.Errorf("the running relay's answer: %w", err)
		}
		last = l
		if l.Done || l.Token != "" {
			break
		}
		if progress != nil {
			progress(l)
		}
	}
	if err := ctx.Err(); err != nil {
		return last, true, fmt.Errorf("interrupted after deleting %d events: %w", last.Deleted, err)
	}
	if !last.Done && last.Token == "" {
		if err := sc.Err(); err != nil {
			return last, true, fmt.Errorf("%w (%v)", errDeleteStopped, err)
		}
		return last, true, errDeleteStopped
	}
	if last.Error != "" {
		return last, true, errors.New(last.Error)
	}
	return last, true, nil
}

// deleteThroughServe is petrel delete's run when a relay holds the store
// in dir: the same listing, confirmation, progress and result as a run on
// the store itself. served is false when no relay answers after all.
func deleteThroughServe(ctx context.Context, dir string, filters []nostr.Filter, o deleteOptions) (res deleteResult, served bool, err error) {
	start := time.Now()
	res.DryRun = o.DryRun
	req := deleteRequest{DryRun: o.DryRun, Hold: o.Confirm != nil && !o.DryRun, Batch: o.Batch}
	for i := range filters {
		req.Filters = append(req.Filters, nostr.AppendFilter(nil, &filters[i]))
	}
	progress := func(l deleteLine) {
		res.Matched, res.Deleted = l.Matched, l.Deleted
		if o.Progress != nil {
			o.Progress(l.Deleted, l.Matched)
		}
	}
	last, served, err := askDelete(ctx, dir, req, progress)
	if !served {
		return res, false, err
	}
	res.Matched, res.Deleted = last.Matched, last.Deleted
	if err != nil || req.DryRun || res.Matched == 0 {
		res.Seconds = time.Since(start).Seconds()
		return res, true, err
	}
	if req.Hold {
		ok, err := o.Confirm(res.Matched)
		if err != nil || !ok {
			// The relay need not keep the list for the confirmation's
			// time.
			_, _, _ = askDelete(ctx, dir, deleteRequest{Token: last.Token, Release: true}, nil)
			if err == nil {
				err = errNotConfirmed
			}
			return res, true, err
		}
		last, _, err = askDelete(ctx, dir, deleteRequest{Token: last.Token}, progress)
		res.Matched, res.Deleted = last.Matched, last.Deleted
	}
	res.Seconds = time.Since(start).Seconds()
	return res, true, err
}
