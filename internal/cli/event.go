package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nip13"
	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
)

func init() { commands["event"] = eventCmd }

// eventFlags are the flags of petrel event.
type eventFlags struct {
	conn      connFlags
	kind      int
	content   string
	tags      []string
	es, ps    []string
	ds        []string
	createdAt string
	pow       int
}

func eventCmd() *cobra.Command {
	var f eventFlags
	cmd := &cobra.Command{
		Use:   "event [flags] [relay...]",
		Short: "Build and sign an event (or read one from stdin), print it and publish it to relays",
		Long: `Event builds an event from the flags, signs it with --sec (or
$NOSTR_SECRET_KEY), optionally mines NIP-13 proof of work (--pow N), prints
it as one JSON line and publishes it to every relay given, reporting each
relay's OK on stderr ("<relay>: OK", or the refusal).

With JSON on stdin (one event or template per line), each line is the
starting point instead: a complete event with a valid signature and no
flag changing it is published as it is; anything else takes the flags
given on top (kind, content, created_at replace; tags add) and is
signed with --sec.

Tags: -t name=value, with ';' between a tag's further elements
(-t e=<id>;wss://relay;reply); -e, -p and -d are shortcuts, and -e/-p
take note/nevent and npub/nprofile too.

With --auth, a relay answering "auth-required:" gets a NIP-42 AUTH
signed with the same key and the event again. The exit status is 1 if
any relay failed or refused.`,
		RunE: func(cmd *cobra.Command, args []string) error { return runEvent(cmd, &f, args) },
	}
	f.conn.register(cmd)
	fs := cmd.Flags()
	fs.IntVarP(&f.kind, "kind", "k", 1, "kind")
	fs.StringVarP(&f.content, "content", "c", "", "content")
	listArrayVarP(fs, &f.tags, "tag", "t", "tag name=value[;value...], or - for a NIP-70 protected event (repeatable)")
	listArrayVarP(fs, &f.es, "e", "e", "shortcut for -t e=<id> (hex, note or nevent)")
	listArrayVarP(fs, &f.ps, "p", "p", "shortcut for -t p=<pubkey> (hex, npub or nprofile)")
	listArrayVarP(fs, &f.ds, "d", "d", "shortcut for -t d=<identifier>")
	fs.StringVar(&f.createdAt, "created-at", "", "created_at: unix time, now, RFC 3339 or an age like 1h (default now)")
	fs.IntVar(&f.pow, "pow", 0, fmt.Sprintf("mine NIP-13 proof of work to this many leading zero bits (at most %d)", nip13.MaxDifficulty))
	return cmd
}

// template is an event read from stdin; every field is optional.
type template struct {
	ID        *string    `json:"id"`
	PubKey    *string    `json:"pubkey"`
	CreatedAt *int64     `json:"created_at"`
	Kind      *int       `json:"kind"`
	Tags      nostr.Tags `json:"tags"`
	Content   *string    `json:"content"`
	Sig       *string    `json:"sig"`
}

func runEvent(cmd *cobra.Command, f *eventFlags, args []string) error {
	relays, err := relayURLs(args)
	if err != nil {
		return err
	}
	var events []*nostr.Event
	if stdinPiped(cmd.InOrStdin()) {
		err := eachLine(cmd.InOrStdin(), func(line []byte) error {
			ev, err := f.fromTemplate(cmd, line)
			if err != nil {
				return fmt.Errorf("stdin line %d: %w", len(events)+1, err)
			}
			events = append(events, ev)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(events) == 0 {
		ev, err := f.build(cmd, &nostr.Event{Kind: f.kind, Tags: nostr.Tags{}})
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	out := cmd.OutOrStdout()
	for _, ev := range events {
		if _, err := fmt.Fprintf(out, "%s\n", ev.Raw); err != nil {
			return err
		}
	}
	if len(relays) == 0 {
		return nil
	}
	sk, err := f.conn.AuthKey()
	if err != nil {
		return err
	}
	ctx, cancel := Interruptible(cmd.Context())
	defer cancel()
	stderr := cmd.ErrOrStderr()
	var mu sync.Mutex
	failed := false
	err = eachRelay(relays, stderr, func(url string) error {
		results, err := publish(ctx, url, events, &f.conn, sk)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for i, m := range results {
			prefix := url
			if len(events) > 1 {
				prefix += " " + events[i].ID.Hex()
			}
			if m.OK {
				fmt.Fprintf(stderr, "%s: OK%s\n", prefix, okDetail(m.Message))
			} else {
				failed = true
				hint := ""
				if sk == nil && client.Prefix(m.Message) == "auth-required" {
					hint = "; " + authHintText
				}
				fmt.Fprintf(stderr, "%s: refused: %s%s\n", prefix, m.Message, hint)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if failed {
		if len(relays) == 1 && len(events) == 1 {
			return errors.New("the relay refused the event")
		}
		return errPartial
	}
	return nil
}

func okDetail(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

// fromTemplate turns one stdin line into a signed event.
func (f *eventFlags) fromTemplate(cmd *cobra.Command, line []byte) (*nostr.Event, error) {
	var t template
	if err := json.Unmarshal(line, &t); err != nil {
		return nil, fmt.Errorf("not a JSON event: %w", nostr.JSONTypeError(err))
	}
	changed := false
	for _, name := range []string{"kind", "content", "tag", "e", "p", "d", "created-at", "pow", "sec"} {
		changed = changed || cmd.Flags().Changed(name)
	}
	if t.Sig != nil && !changed {
		// A signed event: published as it is, if it is valid.
		ev, err := nostr.ParseEvent(line, nil)
		if err != nil {
			return nil, err
		}
		if !nostr.CheckID(ev) || !nostr.VerifyEvent(nostr.DefaultVerifier(), ev) {
			return nil, fmt.Errorf("event %s: bad id or signature (pass --sec to sign it again)", ev.ID.Hex())
		}
		return ev, nil
	}
	ev := &nostr.Event{Kind: 1, Tags: t.Tags}
	if ev.Tags == nil {
		ev.Tags = nostr.Tags{}
	}
	if t.Kind != nil {
		ev.Kind = *t.Kind
	}
	if t.Content != nil {
		ev.Content = *t.Content
	}
	if t.CreatedAt != nil {
		ev.CreatedAt = *t.CreatedAt
	}
	return f.build(cmd, ev)
}

// build applies the flags to ev, signs it (mining first with --pow) and
// returns it.
func (f *eventFlags) build(cmd *cobra.Command, ev *nostr.Event) (*nostr.Event, error) {
	sk, err := f.conn.sec.key()
	if err != nil {
		return nil, err
	}
	fl := cmd.Flags()
	if fl.Changed("kind") {
		ev.Kind = f.kind
	}
	if ev.Kind < 0 || ev.Kind > nostr.MaxKind {
		return nil, fmt.Errorf("kind %d: outside 0-%d", ev.Kind, nostr.MaxKind)
	}
	if fl.Changed("content") {
		ev.Content = f.content
	}
	now := time.Now()
	switch {
	case f.createdAt != "":
		if ev.CreatedAt, err = ParseWhen(f.createdAt, now); err != nil {
			return nil, fmt.Errorf("--created-at: %w", err)
		}
	case ev.CreatedAt == 0:
		ev.CreatedAt = now.Unix()
	}
	// A template's own created_at, in the range the codec (and so every
	// petrel relay) takes, as --created-at is.
	if ev.CreatedAt < 0 || ev.CreatedAt > nostr.MaxTimestamp {
		return nil, fmt.Errorf("created_at %d: outside 0-%d", ev.CreatedAt, int64(nostr.MaxTimestamp))
	}
	for _, t := range f.tags {
		if t == "-" {
			// NIP-70's protected event: a tag of the name alone.
			ev.Tags = append(ev.Tags, nostr.Tag{"-"})
			continue
		}
		name, rest, ok := strings.Cut(t, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--tag %s: want name=value[;value...] (or -t - for NIP-70)", nip19.Shown(t))
		}
		tag := append(nostr.Tag{name}, strings.Split(rest, ";")...)
		if len(name) == 1 {
			if tag[1], err = tagValue(name[0], tag[1]); err != nil {
				// The value is shown by the error, unless it may be a secret.
				return nil, inputErr("--tag "+name, err)
			}
		}
		ev.Tags = append(ev.Tags, tag)
	}
	for _, e := range f.es {
		id, err := nip19.ParseID(e)
		if err != nil {
			return nil, inputErr("-e", err)
		}
		ev.Tags = append(ev.Tags, nostr.Tag{"e", id.Hex()})
	}
	for _, p := range f.ps {
		pk, err := nip19.ParsePubKey(p)
		if err != nil {
			return nil, inputErr("-p", err)
		}
		ev.Tags = append(ev.Tags, nostr.Tag{"p", pk.Hex()})
	}
	for _, d := range f.ds {
		ev.Tags = append(ev.Tags, nostr.Tag{"d", d})
	}
	ev.PubKey = sk.PubKey()
	if f.pow < 0 || f.pow > nip13.MaxDifficulty {
		return nil, fmt.Errorf("--pow %d: want 0 to %d leading zero bits", f.pow, nip13.MaxDifficulty)
	}
	if f.pow != 0 {
		ctx, cancel := Interruptible(cmd.Context())
		defer cancel()
		if err := nip13.Mine(ctx, ev, f.pow, runtime.NumCPU()); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil, fmt.Errorf("--pow %d: interrupted before a nonce was found", f.pow)
			}
			return nil, fmt.Errorf("--pow %d: %w", f.pow, err)
		}
	}
	nostr.SignEvent(ev, sk)
	return ev, nil
}

// publish sends events to one relay and returns its OK for each,
// answering an "auth-required:" refusal with AUTH (when sk is set) and
// sending that event again.
func publish(ctx context.Context, url string, events []*nostr.Event, conn *connFlags, sk *nostr.SecretKey) ([]*nostr.RelayMessage, error) {
	c, err := conn.dial(ctx, url)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out := make([]*nostr.RelayMessage, len(events))
	authed := false
	for i, ev := range events {
		for {
			pctx, cancel := context.WithTimeout(ctx, conn.timeout)
			m, err := c.Publish(pctx, ev)
			cancel()
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					err = fmt.Errorf("no OK for %v (raise --timeout)", conn.timeout)
				}
				return nil, err
			}
			if !m.OK && sk != nil && !authed && client.Prefix(m.Message) == "auth-required" {
				if err := client.Authenticate(ctx, c, sk, conn.timeout); err != nil {
					return nil, err
				}
				authed = true
				continue
			}
			out[i] = m
			break
		}
	}
	return out, nil
}
