package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
)

func init() { commands["req"] = reqCmd }

// reqFlags are the flags of petrel req.
type reqFlags struct {
	filter   filterFlagSet
	conn     connFlags
	stream   bool
	paginate bool
	verify   bool
	store    storeFlags
}

func reqCmd() *cobra.Command {
	var f reqFlags
	cmd := &cobra.Command{
		Use:   "req [filter flags] [relay...]",
		Short: "Query relays (or a local store with --store) and print the matching events, one JSON per line",
		Long: `Req sends one REQ with the filter the flags describe to every relay
given and prints each matching event once (one JSON object per line),
however many relays return it. Without --stream it stops at each relay's
EOSE; with --stream it stays open and prints live events until
interrupted (it remembers the last 262,144 ids or more, not all, to drop
another relay's copy: a stream of days stays bounded). --paginate walks back in time (until = the oldest event
seen) past the relay's page size, until --limit events, --since, or a
page with nothing new. --auth answers a NIP-42 challenge with --sec when
a relay closes the request with "auth-required:", then asks again.

Relay URLs may omit the scheme: wss:// is assumed (ws:// for loopback).
With no relay and no --store, req prints the filter as JSON.

--store DIR reads a local petrel store instead: through the control
socket of the petrel serve that holds DIR, or, when none runs, by
opening the store itself (then it needs DIR to itself, as petrel scan
does). --config names the serve's config file, so the store is opened
with the same settings.

Events are printed as the relays sent them; --verify checks each id
and signature first and drops (and reports) the bad ones. A relay that
fails is reported on its own line; the exit status is 1 if any failed.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReq(cmd, &f, args)
		},
	}
	f.filter.register(cmd)
	f.conn.register(cmd)
	f.store.register(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&f.stream, "stream", false, "stay open after EOSE and print live events")
	fs.BoolVar(&f.paginate, "paginate", false, "walk back with until past the relay's page size")
	fs.BoolVar(&f.verify, "verify", false, "check every event's id and signature, dropping bad ones")
	return cmd
}

func runReq(cmd *cobra.Command, f *reqFlags, args []string) error {
	filter, err := f.filter.filter(cmd, time.Now())
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if f.store.dir != "" {
		if len(args) > 0 {
			return errors.New("--store reads a local store: give no relay with it")
		}
		if f.stream {
			// It would stop at the end of the stored events, as without it.
			return errors.New("--stream follows a relay's live events: give the relay's URL, not --store")
		}
		sink := newEventSink(stdout, stderr, false, f.verify)
		err := f.store.query(cmd.Context(), []nostr.Filter{filter}, sink)
		if cerr := sink.close(); err == nil {
			err = cerr
		}
		return err
	}
	if len(args) == 0 {
		_, err := fmt.Fprintf(stdout, "%s\n", nostr.AppendFilter(nil, &filter))
		return err
	}
	relays, err := relayURLs(args)
	if err != nil {
		return err
	}
	sk, err := f.conn.AuthKey()
	if err != nil {
		return err
	}
	ctx, cancel := Interruptible(cmd.Context())
	defer cancel()
	sink := newEventSink(stdout, stderr, f.stream, f.verify)
	err = eachRelay(relays, stderr, func(url string) error {
		return reqRelay(ctx, url, filter, f, sk, sink)
	})
	if cerr := sink.close(); err == nil {
		err = cerr
	}
	if f.stream && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil // interrupted: the normal end of a stream
	}
	return err
}

// reqRelay runs the request (pages of it with --paginate) on one relay.
func reqRelay(ctx context.Context, url string, filter nostr.Filter, f *reqFlags, sk *nostr.SecretKey, sink *eventSink) error {
	c, err := f.conn.dial(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close()
	q := reqQuery{c: c, url: url, f: f, sk: sk, sink: sink}
	if !f.paginate {
		_, _, err := q.run(ctx, filter)
		return err
	}
	total := 0
	for {
		page := filter
		if filter.HasLimit {
			page.Limit = filter.Limit - total
		}
		before := q.returned
		got, oldest, err := q.run(ctx, page)
		if err != nil {
			return err
		}
		total += got
		switch {
		case q.returned == before, // the relay has nothing older
			filter.HasLimit && total >= filter.Limit,
			filter.HasSince && oldest <= filter.Since,
			oldest == 0:
			return nil
		case got == 0:
			// A whole page of the oldest second, all printed already:
			// step past that second.
			filter.Until, filter.HasUntil = oldest-1, true
		default:
			// Events of the oldest second may continue past the page:
			// ask again from that second (the sink drops repeats).
			filter.Until, filter.HasUntil = oldest, true
		}
	}
}

// reqQuery runs REQs on one connection.
type reqQuery struct {
	c    *client.Conn
	url  string
	f    *reqFlags
	sk   *nostr.SecretKey
	sink *eventSink
	auth bool // authenticated already
	// returned counts the events the relay sent, new or not.
	returned int
}

// run sends one REQ and reads it to EOSE (to the end with --stream). It
// returns how many new events it printed and the oldest created_at seen.
func (q *reqQuery) run(ctx context.Context, filter nostr.Filter) (n int, oldest int64, err error) {
	oldest = nostr.MaxTimestamp
	for {
		n, oldest, err = q.once(ctx, filter, n, oldest)
		if !errors.Is(err, client.ErrAuthRequired) || q.sk == nil || q.auth {
			return n, oldest, AuthHint(tellClosed(err), q.sk)
		}
		if err := client.Authenticate(ctx, q.c, q.sk, q.f.conn.timeout); err != nil {
			return n, oldest, err
		}
		q.auth = true
	}
}

func (q *reqQuery) once(ctx context.Context, filter nostr.Filter, n int, oldest int64) (int, int64, error) {
	sub, err := q.c.Req(subID, filter)
	if err != nil {
		return n, oldest, err
	}
	defer sub.Close()
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if !q.f.stream {
			wctx, cancel = context.WithTimeout(ctx, q.f.conn.timeout)
		}
		m, err := sub.Next(wctx)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				err = fmt.Errorf("no answer for %v (raise --timeout)", q.f.conn.timeout)
			}
			return n, oldest, err
		}
		switch m.Type {
		case nostr.LabelEvent:
			q.returned++
			fresh, err := q.sink.put(m.Event, m.RawEvent, q.url)
			if err != nil {
				return n, oldest, err
			}
			if fresh {
				n++
			}
			oldest = min(oldest, m.Event.CreatedAt)
		case nostr.LabelEOSE:
			if !q.f.stream {
				return n, oldest, nil
			}
		case nostr.LabelClosed:
			sub.Unsubscribe()
			return n, oldest, &client.ClosedError{SubID: subID, Message: m.Message}
		}
	}
}
