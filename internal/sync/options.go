package sync

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Sentinel errors.
var (
	// ErrUnsupported means the remote does not speak NIP-77: it answered
	// NEG-OPEN with NOTICE or CLOSED, with an unsupported protocol version,
	// or not at all within Options.OpenTimeout.
	ErrUnsupported = errors.New("sync: the remote relay does not support NIP-77 negentropy")
	// ErrRefused means the remote answered NEG-OPEN with NEG-ERR (for
	// example "blocked: this query is too big").
	ErrRefused = errors.New("sync: the remote relay refused negentropy for this filter")
	// ErrOptions means the options are inconsistent.
	ErrOptions = errors.New("sync: invalid options")
)

// Direction says which way events move.
type Direction uint8

const (
	// Down copies what the remote has and the local side lacks.
	Down Direction = 1 << iota
	// Up copies what the local side has and the remote lacks.
	Up
	// Both is Down and Up.
	Both = Down | Up
)

// ParseDirection parses "down", "up" or "both".
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "down":
		return Down, nil
	case "up":
		return Up, nil
	case "both":
		return Both, nil
	}
	return 0, fmt.Errorf("%w: direction %q: want down, up or both", ErrOptions, s)
}

// String returns "down", "up" or "both".
func (d Direction) String() string {
	switch d {
	case Down:
		return "down"
	case Up:
		return "up"
	case Both:
		return "both"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

// Progress receives progress reports. Run calls it from its own
// goroutine only.
type Progress interface {
	// Phase starts a phase (reconcile, list, download, upload, paging) of
	// total steps; total is -1 when unknown.
	Phase(name string, total int64)
	// Add reports n more steps done in the current phase.
	Add(n int64)
	// Done ends the current phase.
	Done()
}

// Options configure Run. Remote and one of Store or From are required;
// every other zero field takes the default named in its comment.
type Options struct {
	// Remote is the ws:// or wss:// URL of the relay to sync with.
	Remote string
	// Store is the local side: events are read from it and saved to it.
	Store store.Store
	// From is the URL of a relay to use as the local side instead of
	// Store.
	From string

	// Filter selects the events to sync. Default: all events ({}).
	// Its limit is ignored.
	Filter nostr.Filter
	// Direction says which way events move. Default Down.
	Direction Direction

	// Batch is the number of events per local save (one durable commit).
	// Default (0) 500; negative is refused.
	Batch int
	// IDsPerReq is the number of ids asked for in one REQ, lowered to the
	// remote's NIP-11 max_limit and to what fits its max_message_length.
	// Default 500.
	IDsPerReq int
	// Window is the number of uploaded events awaiting their OK. Default
	// (0) 64; negative is refused.
	Window int
	// FrameLimit caps the negentropy messages this side sends (before
	// hex), lowered to what fits the remote's max_message_length. Default
	// 60000 bytes.
	FrameLimit int
	// OpenTimeout is how long to wait for the answer to NEG-OPEN before
	// deciding that the remote does not speak NIP-77. Default 10s.
	OpenTimeout time.Duration
	// Timeout bounds every other wait for the remote (a negentropy round,
	// a REQ's EOSE, an OK). Default 60s.
	Timeout time.Duration
	// MaxRetries is how often an upload refused with "rate-limited:" is
	// retried before it counts as refused. Default 8.
	MaxRetries int

	// FallbackPaging pages through the remote's events with REQ when it
	// does not speak NIP-77, downloading what the local store lacks. It
	// needs Store and Direction Down.
	FallbackPaging bool

	// AuthKey, if set, answers a relay's NIP-42 challenge when it refuses
	// a request (NEG-OPEN, REQ) or an uploaded event with
	// "auth-required:"; the request or event is then sent once more. The
	// same key serves both relays (Remote and From). Without it such a
	// refusal ends Run with an error matching client.ErrAuthRequired,
	// except that of an upload of a NIP-70 protected event, which is
	// counted as refused.
	AuthKey *nostr.SecretKey

	// Verifier checks downloaded signatures. Default
	// nostr.DefaultVerifier().
	Verifier nostr.Verifier
	// Claim, if set, is asked about every id before it is moved (dir is
	// Down or Up); false leaves the id out (counted in Transfer.Skipped).
	// `petrel stream` uses it so that an event its live feed has already
	// forwarded is not sent again by the catch-up. It is called from
	// Run's goroutine.
	Claim func(dir Direction, id nostr.ID) bool
	// Progress receives progress reports; nil: none.
	Progress Progress
	// Logger receives warnings (paging gaps, unexpected messages). Default:
	// a logger that discards.
	Logger *slog.Logger
}

func (o *Options) normalize() error {
	if o.Remote == "" {
		return fmt.Errorf("%w: no remote relay", ErrOptions)
	}
	if err := client.CheckURL(o.Remote); err != nil {
		return fmt.Errorf("%w: remote: %w", ErrOptions, err)
	}
	if o.From != "" {
		if err := client.CheckURL(o.From); err != nil {
			return fmt.Errorf("%w: from: %w", ErrOptions, err)
		}
	}
	if (o.Store == nil) == (o.From == "") {
		return fmt.Errorf("%w: give exactly one of a local store and a --from relay", ErrOptions)
	}
	if o.Direction == 0 {
		o.Direction = Down
	}
	if o.Direction&^Both != 0 {
		return fmt.Errorf("%w: direction %d", ErrOptions, o.Direction)
	}
	if o.FallbackPaging && o.Store == nil {
		return fmt.Errorf("%w: the fallback paging needs a local store", ErrOptions)
	}
	if o.Filter.Search != "" {
		return fmt.Errorf("%w: a search filter cannot be synced", ErrOptions)
	}
	// Zero takes the default; a negative count (petrel sync --batch -1)
	// is a mistake that would otherwise pass for the default too.
	if o.Batch < 0 {
		return fmt.Errorf("%w: batch %d: must not be negative", ErrOptions, o.Batch)
	}
	if o.Window < 0 {
		return fmt.Errorf("%w: window %d: must not be negative", ErrOptions, o.Window)
	}
	o.Filter.HasLimit, o.Filter.Limit = false, 0
	o.defaults()
	return nil
}

// defaults sets the zero fields that have a default.
func (o *Options) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Batch, 500)
	def(&o.IDsPerReq, 500)
	def(&o.Window, 64)
	def(&o.FrameLimit, 60000)
	def(&o.MaxRetries, 8)
	if o.FrameLimit < 4096 {
		o.FrameLimit = 4096
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = 10 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Verifier == nil {
		o.Verifier = nostr.DefaultVerifier()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Transfer counts the events moved one way.
type Transfer struct {
	// Wanted is the number of ids to move.
	Wanted int `json:"wanted"`
	// Moved counts events the target took (stored, or OK true).
	Moved int `json:"moved"`
	// Duplicate counts events the target already had.
	Duplicate int `json:"duplicate"`
	// Missing counts ids the source did not return (deleted or expired
	// meanwhile, or withheld).
	Missing int `json:"missing"`
	// Skipped counts ids Options.Claim left out; they are not in
	// Wanted.
	Skipped int `json:"skipped,omitempty"`
	// Invalid counts downloaded events whose id or signature is wrong, or
	// that were not asked for. They are never saved.
	Invalid int `json:"invalid"`
	// Refused counts events the target refused, by reason: the NIP-01
	// prefix of the OK message ("blocked", "rate-limited" after the
	// retries, ...), "timeout" for no OK, or the store's outcome
	// ("superseded", "deleted", "error").
	Refused map[string]int `json:"refused,omitempty"`
}

func (t *Transfer) refuse(reason string) {
	if t.Refused == nil {
		t.Refused = make(map[string]int)
	}
	t.Refused[reason]++
}

// RefusedTotal returns the sum of Refused.
func (t *Transfer) RefusedTotal() int {
	n := 0
	for _, v := range t.Refused {
		n += v
	}
	return n
}

// Result modes.
const (
	// ModeNegentropy: the local store reconciled with the remote.
	ModeNegentropy = "negentropy"
	// ModeBridge: two relays reconciled with each other, a negentropy
	// session with each (Options.From).
	ModeBridge = "bridge"
	// ModePaging: the remote paged through with REQ
	// (Options.FallbackPaging).
	ModePaging = "paging"
)

// Result says what Run did.
type Result struct {
	// Mode is ModeNegentropy, ModeBridge or ModePaging.
	Mode string `json:"mode"`
	// LocalItems is the number of local events matching the filter;
	// RemoteItems the remote's when known. Neither is known in bridge
	// mode, where no side's set is ever listed.
	LocalItems  int `json:"local_items"`
	RemoteItems int `json:"remote_items,omitempty"`
	// Have is the number of ids the local side has and the remote lacks;
	// Need the number the remote has and the local side lacks. Paging
	// reports as Need the events it found missing locally.
	Have int `json:"have"`
	Need int `json:"need"`
	// Rounds is the number of negentropy round trips (or pages).
	Rounds int `json:"rounds"`
	// Down and Up count the transfers.
	Down Transfer `json:"down"`
	Up   Transfer `json:"up"`
	// PagingGaps counts the seconds paging could not get through because
	// more events than a page share that created_at; some of their events
	// may have been skipped. (Its JSON name is from when paging was
	// called scanning.)
	PagingGaps int `json:"scan_gaps,omitempty"`
	// ReconcileSent and ReconcileReceived are the WebSocket payload bytes
	// of the negentropy (or listing) exchange; Sent and Received of the
	// whole run, over every connection.
	ReconcileSent     int64 `json:"reconcile_bytes_sent"`
	ReconcileReceived int64 `json:"reconcile_bytes_received"`
	Sent              int64 `json:"bytes_sent"`
	Received          int64 `json:"bytes_received"`
	// Elapsed is the run's wall time; ReconcileTime the reconciliation's.
	Elapsed       time.Duration `json:"elapsed_ns"`
	ReconcileTime time.Duration `json:"reconcile_ns"`
}

// String is the one-line summary `petrel sync` prints.
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", r.Mode)
	if r.Mode != ModeBridge {
		fmt.Fprintf(&b, "local %d, ", r.LocalItems)
		if r.RemoteItems > 0 {
			fmt.Fprintf(&b, "remote %d, ", r.RemoteItems)
		}
	}
	fmt.Fprintf(&b, "have %d, need %d, %d rounds", r.Have, r.Need, r.Rounds)
	if r.PagingGaps > 0 {
		fmt.Fprintf(&b, " (%d gaps)", r.PagingGaps)
	}
	tr := func(name string, t *Transfer) {
		if t.Wanted == 0 && t.Moved == 0 {
			return
		}
		fmt.Fprintf(&b, "; %s %d/%d", name, t.Moved, t.Wanted)
		var extra []string
		if t.Duplicate > 0 {
			extra = append(extra, fmt.Sprintf("duplicate %d", t.Duplicate))
		}
		if t.Missing > 0 {
			extra = append(extra, fmt.Sprintf("missing %d", t.Missing))
		}
		if t.Skipped > 0 {
			extra = append(extra, fmt.Sprintf("skipped %d", t.Skipped))
		}
		if t.Invalid > 0 {
			extra = append(extra, fmt.Sprintf("invalid %d", t.Invalid))
		}
		for _, k := range slices.Sorted(maps.Keys(t.Refused)) {
			extra = append(extra, fmt.Sprintf("refused %s %d", k, t.Refused[k]))
		}
		if len(extra) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(extra, ", "))
		}
	}
	tr("downloaded", &r.Down)
	tr("uploaded", &r.Up)
	fmt.Fprintf(&b, "; sent %s, received %s (reconcile %s/%s); %s",
		byteSize(r.Sent), byteSize(r.Received), byteSize(r.ReconcileSent), byteSize(r.ReconcileReceived),
		r.Elapsed.Round(time.Millisecond))
	return b.String()
}

func byteSize(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
