package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
)

func init() { commands["fetch"] = fetchCmd }

func fetchCmd() *cobra.Command {
	var f reqFlags
	var extra []string
	cmd := &cobra.Command{
		Use:   "fetch CODE... [RELAY...] [--relay URL...]",
		Short: "Fetch what NIP-19 codes point to (nevent, naddr, nprofile; note, npub) from their relay hints",
		Long: `Fetch resolves each code with the relays inside it plus any --relay:
an nevent or note to its event, an naddr to the newest version of its
addressable event, an nprofile or npub to the author's profile (kind 0).
An argument that starts with ws:// or wss:// is a relay to ask, as
with --relay. Events are printed one JSON per line, once each; a code
no relay answers is reported on stderr and makes the exit status 1.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sk, err := f.conn.AuthKey()
			if err != nil {
				return err
			}
			ctx, cancel := Interruptible(cmd.Context())
			defer cancel()
			stderr := cmd.ErrOrStderr()
			sink := newEventSink(cmd.OutOrStdout(), stderr, false, f.verify)
			defer sink.close()
			codes, relays := splitRelayArgs(args)
			relays = append(relays, extra...) // and --relay
			if len(codes) == 0 {
				return errors.New("give a code to fetch (nevent, naddr, nprofile, note or npub)")
			}
			missing := 0
			for i, code := range codes {
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted: %d of %d codes not asked", len(codes)-i, len(codes))
				}
				filter, hints, err := pointerFilter(strings.TrimPrefix(code, "nostr:"))
				if err != nil {
					return err
				}
				urls, err := relayURLs(append(hints, relays...))
				if err != nil {
					return fmt.Errorf("%s: %w", code, err)
				}
				if len(urls) == 0 {
					return fmt.Errorf("%s: no relay to ask: the code has no hints; add --relay", code)
				}
				before := len(sink.seen)
				err = eachRelay(urls, stderr, func(url string) error {
					return reqRelay(ctx, url, filter, &f, sk, sink)
				})
				if len(sink.seen) == before {
					missing++
					if err == nil || errors.Is(err, errPartial) {
						fmt.Fprintf(stderr, "%s: not found on %s\n", code, strings.Join(urls, ", "))
					} else {
						fmt.Fprintf(stderr, "%s: %v\n", code, err)
					}
				}
			}
			if ctx.Err() != nil {
				return errors.New("interrupted")
			}
			if missing > 0 {
				return fmt.Errorf("%d of %d codes not found", missing, len(codes))
			}
			return nil
		},
	}
	f.conn.register(cmd)
	listArrayVarP(cmd.Flags(), &extra, "relay", "r", "another relay to ask (repeatable)")
	cmd.Flags().BoolVar(&f.verify, "verify", false, "check every event's id and signature, dropping bad ones")
	return cmd
}

// splitRelayArgs tells fetch's arguments apart: those that start with
// ws:// or wss:// (either case) are relays, the others codes (a NIP-19
// code never has a colon but after "nostr").
func splitRelayArgs(args []string) (codes, relays []string) {
	for _, a := range args {
		l := strings.ToLower(a)
		if strings.HasPrefix(l, "ws://") || strings.HasPrefix(l, "wss://") {
			relays = append(relays, a)
		} else {
			codes = append(codes, a)
		}
	}
	return codes, relays
}

// pointerFilter returns the filter that finds what code points to, and
// its relay hints.
func pointerFilter(code string) (nostr.Filter, []string, error) {
	e, err := nip19.Decode(code)
	if err != nil {
		return nostr.Filter{}, nil, fmt.Errorf("%s: %s", nip19.Shown(code), reason(err))
	}
	var f nostr.Filter
	switch e.Prefix {
	case nip19.PrefixNote:
		f.IDs = []nostr.ID{e.ID}
		return f, nil, nil
	case nip19.PrefixEvent:
		f.IDs = []nostr.ID{e.Event.ID}
		if e.Event.HasAuthor {
			f.Authors = []nostr.PubKey{e.Event.Author}
		}
		return f, e.Event.Relays, nil
	case nip19.PrefixPubKey:
		f.Authors, f.Kinds = []nostr.PubKey{e.PubKey}, []int{nostr.KindProfile}
		f.Limit, f.HasLimit = 1, true
		return f, nil, nil
	case nip19.PrefixProfile:
		f.Authors, f.Kinds = []nostr.PubKey{e.Profile.PubKey}, []int{nostr.KindProfile}
		f.Limit, f.HasLimit = 1, true
		return f, e.Profile.Relays, nil
	case nip19.PrefixAddress:
		a := e.Address
		if a.Kind > nostr.MaxKind {
			return f, nil, fmt.Errorf("%s: kind %d is not an event kind", code, a.Kind)
		}
		f.Authors, f.Kinds = []nostr.PubKey{a.PubKey}, []int{int(a.Kind)}
		f.Tags = []nostr.TagFilter{{Name: 'd', Values: []string{a.Identifier}}}
		f.Limit, f.HasLimit = 1, true
		return f, a.Relays, nil
	}
	if e.Prefix == nip19.PrefixSecretKey {
		return f, nil, errors.New("an nsec was given: it points to nothing to fetch (and is a secret)")
	}
	return f, nil, fmt.Errorf("%s: an %s points to nothing to fetch", code, e.Prefix)
}
