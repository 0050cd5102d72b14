package policy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// Keys under which Lists persists the dynamic layer of each list, one JSON
// document per key:
//
//	{"version":1,"entries":[{"key":"<value>","reason":"...","at":<unix seconds>}, ...]}
//
// where the value is a lowercase hex pubkey or event id, a decimal kind, or
// an address or CIDR prefix.
const (
	KeyBannedPubKeys   = "policy/banned_pubkeys"
	KeyAllowedPubKeys  = "policy/allowed_pubkeys"
	KeyBannedEvents    = "policy/banned_events"
	KeyAllowedEvents   = "policy/allowed_events"
	KeyAllowedKinds    = "policy/allowed_kinds"
	KeyDisallowedKinds = "policy/disallowed_kinds"
	KeyBlockedIPs      = "policy/blocked_ips"
)

// Sentinel errors.
var (
	// ErrStatic is returned by a change that would remove a value the
	// configuration file puts on a list: an unban, unallow or unblock of
	// it, or an allowance of a pubkey or kind the file bans or disallows.
	// (A ban or disallowance of what the file allows succeeds instead, and
	// wins over the file's entry.)
	ErrStatic = errors.New("policy: set in the configuration file")
	// ErrInvalid reports a malformed pubkey, id, kind or address.
	ErrInvalid = errors.New("policy: invalid value")
	// ErrCorrupt reports a persisted list that cannot be decoded.
	ErrCorrupt = errors.New("policy: corrupt persisted list")
)

// fileVersion is the version of the persisted documents.
const fileVersion = 1

// entry is what a list holds for one value.
type entry struct {
	reason string
	at     int64 // unix seconds when added; 0 for static entries
}

// set is one list: the static layer from the configuration and the dynamic
// layer from NIP-86. A published set is never modified.
type set[K comparable] struct {
	static  map[K]entry
	dynamic map[K]entry
}

func newSet[K comparable]() *set[K] {
	return &set[K]{static: map[K]entry{}, dynamic: map[K]entry{}}
}

func (s *set[K]) has(k K) bool {
	if _, ok := s.static[k]; ok {
		return true
	}
	_, ok := s.dynamic[k]
	return ok
}

func (s *set[K]) empty() bool { return len(s.static) == 0 && len(s.dynamic) == 0 }

// kindSet is a set of kinds with a bitmap of both layers for lookups.
type kindSet struct {
	*set[int]
	bits *[(nostr.MaxKind + 1) / 64]uint64
}

func newKindSet(s *set[int]) *kindSet {
	ks := &kindSet{set: s, bits: new([(nostr.MaxKind + 1) / 64]uint64)}
	for _, layer := range []map[int]entry{s.static, s.dynamic} {
		for k := range layer {
			ks.bits[k>>6] |= 1 << (k & 63)
		}
	}
	return ks
}

func (ks *kindSet) has(k int) bool {
	return uint(k) <= nostr.MaxKind && ks.bits[k>>6]&(1<<(k&63)) != 0
}

// ipSet is a set of prefixes (a single address is a full-length prefix)
// with, for lookups, both layers merged under a compact key and the
// distinct prefix lengths present per family.
type ipSet struct {
	*set[netip.Prefix]
	merged       map[pfxKey]struct{}
	lens4, lens6 []int // ascending
}

// pfxKey is a masked prefix: the address's 16-byte form (IPv4 mapped) and
// the prefix length in that family.
type pfxKey struct {
	a    [16]byte
	bits uint8
}

func newIPSet(s *set[netip.Prefix]) *ipSet {
	is := &ipSet{set: s, merged: make(map[pfxKey]struct{}, len(s.static)+len(s.dynamic))}
	for _, layer := range []map[netip.Prefix]entry{s.static, s.dynamic} {
		for p := range layer {
			is.merged[pfxKey{p.Addr().As16(), uint8(p.Bits())}] = struct{}{}
			if p.Addr().Is4() {
				is.lens4 = append(is.lens4, p.Bits())
			} else {
				is.lens6 = append(is.lens6, p.Bits())
			}
		}
	}
	slices.Sort(is.lens4)
	is.lens4 = slices.Compact(is.lens4)
	slices.Sort(is.lens6)
	is.lens6 = slices.Compact(is.lens6)
	return is
}

// find returns the most specific prefix on the list containing ip.
func (is *ipSet) find(ip netip.Addr) (netip.Prefix, bool) {
	ip = ip.Unmap().WithZone("")
	lens := is.lens6
	if ip.Is4() {
		lens = is.lens4
	}
	if len(lens) == 0 {
		return netip.Prefix{}, false
	}
	a := ip.As16()
	base := 0
	if ip.Is4() {
		base = 96 // As16 maps IPv4 into the last 32 bits
	}
	for i := len(lens) - 1; i >= 0; i-- {
		k := pfxKey{a: maskBits(a, base+lens[i]), bits: uint8(lens[i])}
		if _, ok := is.merged[k]; ok {
			p, _ := ip.Prefix(lens[i])
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// maskBits clears every bit of a after the first n.
func maskBits(a [16]byte, n int) [16]byte {
	for i := n / 8; i < 16; i++ {
		if keep := n - 8*i; keep > 0 {
			a[i] &= byte(0xff << (8 - keep))
		} else {
			a[i] = 0
		}
	}
	return a
}

// snapshot is the state of all lists at one moment. Published snapshots
// are immutable.
type snapshot struct {
	bannedPK, allowedPK           *set[nostr.PubKey]
	bannedEv, allowedEv           *set[nostr.ID]
	allowedKinds, disallowedKinds *kindSet
	blocked                       *ipSet
}

// Lists holds the relay's write lists. Its check methods are cheap and
// lock-free and may be called from any goroutine; its change methods
// persist the change before they return and are serialized among
// themselves.
type Lists struct {
	p    Persister
	mu   sync.Mutex // serializes changes
	snap atomic.Pointer[snapshot]
	now  func() time.Time
}

// NewLists builds the lists from the static configuration (cfg's
// BannedPubKeys, AllowedPubKeys, AllowedKinds, DisallowedKinds, BlockedIPs)
// and the dynamic layer loaded from p. A nil p keeps run-time changes in
// memory only. It fails if the configuration has a malformed value, or if a
// persisted list cannot be read or decoded (ErrCorrupt): a ban list is never
// silently dropped.
func NewLists(ctx context.Context, cfg Config, p Persister) (*Lists, error) {
	s, err := newStatic(cfg)
	if err != nil {
		return nil, err
	}
	if p == nil {
		p = &MemPersister{}
	}
	l := &Lists{p: p, now: time.Now}
	l.snap.Store(s)
	if _, err := l.refresh(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// SetStatic replaces the configuration's layer of every list by cfg's
// (BannedPubKeys, AllowedPubKeys, AllowedKinds, DisallowedKinds,
// BlockedIPs: petrel serve's reload), keeping the NIP-86 layer as it is.
// Nothing is persisted: the configuration's layer never is. It fails,
// changing nothing, if cfg has a malformed value.
func (l *Lists) SetStatic(cfg Config) error {
	ns, err := newStatic(cfg)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snap.Store(layered(ns, l.snap.Load()))
	return nil
}

// Refresh reads the NIP-86 layer of every list from the persister again
// and reports whether it differs from what the lists held: with a store
// several nodes share, what the other nodes changed (petrel serve runs it
// every few seconds there, and when another node hints at a change). A
// read that fails changes nothing. (A change method needs no refresh
// first: it edits its list as persisted.)
func (l *Lists) Refresh(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refresh(ctx)
}

// refresh is Refresh with l.mu held.
func (l *Lists) refresh(ctx context.Context) (bool, error) {
	dy := &snapshot{}
	var errs []error
	for _, li := range allLists {
		errs = append(errs, li.load(ctx, l.p, dy))
	}
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	old := l.snap.Load()
	same := true
	for _, li := range allLists {
		same = same && li.sameDynamic(old, dy)
	}
	if same {
		return false, nil
	}
	l.snap.Store(layered(old, dy))
	return true, nil
}

// layered returns the snapshot of st's configuration layer and dy's
// NIP-86 layer, its lookup structures built.
func layered(st, dy *snapshot) *snapshot {
	s := &snapshot{}
	for _, li := range allLists {
		li.layer(s, st, dy)
	}
	return s
}

// newStatic builds a snapshot holding the configuration's lists, with
// empty dynamic layers.
func newStatic(cfg Config) (*snapshot, error) {
	s := &snapshot{
		bannedPK: newSet[nostr.PubKey](), allowedPK: newSet[nostr.PubKey](),
		bannedEv: newSet[nostr.ID](), allowedEv: newSet[nostr.ID](),
	}
	static := entry{reason: "configuration file"}
	var errs []error
	for _, v := range cfg.BannedPubKeys {
		pk, err := parsePubKey(v)
		if err != nil {
			errs = append(errs, &listError{"banned_pubkeys", err})
			continue
		}
		s.bannedPK.static[pk] = static
	}
	for _, v := range cfg.AllowedPubKeys {
		pk, err := parsePubKey(v)
		if err != nil {
			errs = append(errs, &listError{"allowed_pubkeys", err})
			continue
		}
		s.allowedPK.static[pk] = static
	}
	kinds := func(name string, list []int) *set[int] {
		ks := newSet[int]()
		for _, k := range list {
			if err := checkKind(k); err != nil {
				errs = append(errs, &listError{name, err})
				continue
			}
			ks.static[k] = static
		}
		return ks
	}
	s.allowedKinds = newKindSet(kinds("allowed_kinds", cfg.AllowedKinds))
	s.disallowedKinds = newKindSet(kinds("disallowed_kinds", cfg.DisallowedKinds))
	ips := newSet[netip.Prefix]()
	for _, v := range cfg.BlockedIPs {
		p, err := parseIPBlock(v)
		if err != nil {
			errs = append(errs, &listError{"blocked_ips", err})
			continue
		}
		ips.static[p] = static
	}
	s.blocked = newIPSet(ips)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policy: configuration: %w", err)
	}
	return s, nil
}

// Decisions. The returned Rejections are shared: callers must not modify
// them.
var (
	rejEventBanned   = nostr.Reject(nostr.PrefixBlocked, "this event is banned from this relay")
	rejPubKeyBanned  = nostr.Reject(nostr.PrefixBlocked, "this pubkey is banned from this relay")
	rejPubKeyAllowed = nostr.Reject(nostr.PrefixBlocked, "this pubkey is not allowed to publish on this relay")
	rejIPBlocked     = nostr.Reject(nostr.PrefixBlocked, "your address is blocked by this relay")
)

// CheckEvent returns the lists' decision on ev, or nil to let it through:
// an event on the allowed-events list passes; otherwise a banned event,
// a banned pubkey, a pubkey missing from a non-empty allow list, a
// disallowed kind or a kind missing from a non-empty allowed-kinds list is
// refused with "blocked:". It reads ev.ID, ev.PubKey and ev.Kind only
// (the id should already be checked). It takes no lock and allocates only
// when it refuses a kind.
func (l *Lists) CheckEvent(ev *nostr.Event) *nostr.Rejection {
	s := l.snap.Load()
	if s.allowedEv.has(ev.ID) {
		return nil
	}
	if s.bannedEv.has(ev.ID) {
		return rejEventBanned
	}
	if s.bannedPK.has(ev.PubKey) {
		return rejPubKeyBanned
	}
	if !s.allowedPK.empty() && !s.allowedPK.has(ev.PubKey) {
		return rejPubKeyAllowed
	}
	if s.disallowedKinds.has(ev.Kind) || (!s.allowedKinds.empty() && !s.allowedKinds.has(ev.Kind)) {
		return nostr.Reject(nostr.PrefixBlocked, "events of kind "+strconv.Itoa(ev.Kind)+" are not accepted on this relay")
	}
	return nil
}

// CheckIP returns "blocked:" if ip (an IPv4-mapped IPv6 address counts as
// IPv4) is on the blocked list or inside a blocked prefix, else nil. An
// invalid (zero) address is not blocked. It takes no lock and does not
// allocate.
func (l *Lists) CheckIP(ip netip.Addr) *nostr.Rejection {
	if !ip.IsValid() {
		return nil
	}
	if _, ok := l.snap.Load().blocked.find(ip); ok {
		return rejIPBlocked
	}
	return nil
}

// errUnchanged is what an edit returns to Update when the list as
// persisted already is as asked: nothing is saved.
var errUnchanged = errors.New("policy: unchanged")

// change is one edit of one list.
type change func(ctx context.Context, l *Lists) error

// list is where one list is persisted and kept in a snapshot.
type list[K comparable] struct {
	key    string
	parse  func(string) (K, error)
	format func(K) string
	get    func(*snapshot) *set[K]
	put    func(*snapshot, *set[K])
}

var (
	bannedPubKeys = list[nostr.PubKey]{KeyBannedPubKeys, parsePubKey, fmtPubKey,
		func(s *snapshot) *set[nostr.PubKey] { return s.bannedPK }, func(s *snapshot, v *set[nostr.PubKey]) { s.bannedPK = v }}
	allowedPubKeys = list[nostr.PubKey]{KeyAllowedPubKeys, parsePubKey, fmtPubKey,
		func(s *snapshot) *set[nostr.PubKey] { return s.allowedPK }, func(s *snapshot, v *set[nostr.PubKey]) { s.allowedPK = v }}
	bannedEvents = list[nostr.ID]{KeyBannedEvents, parseID, fmtID,
		func(s *snapshot) *set[nostr.ID] { return s.bannedEv }, func(s *snapshot, v *set[nostr.ID]) { s.bannedEv = v }}
	allowedEvents = list[nostr.ID]{KeyAllowedEvents, parseID, fmtID,
		func(s *snapshot) *set[nostr.ID] { return s.allowedEv }, func(s *snapshot, v *set[nostr.ID]) { s.allowedEv = v }}
	allowedKinds = list[int]{KeyAllowedKinds, parseKindKey, fmtKind,
		func(s *snapshot) *set[int] { return s.allowedKinds.set }, func(s *snapshot, v *set[int]) { s.allowedKinds = newKindSet(v) }}
	disallowedKinds = list[int]{KeyDisallowedKinds, parseKindKey, fmtKind,
		func(s *snapshot) *set[int] { return s.disallowedKinds.set }, func(s *snapshot, v *set[int]) { s.disallowedKinds = newKindSet(v) }}
	blockedIPs = list[netip.Prefix]{KeyBlockedIPs, parseIPBlock, formatIPBlock,
		func(s *snapshot) *set[netip.Prefix] { return s.blocked.set }, func(s *snapshot, v *set[netip.Prefix]) { s.blocked = newIPSet(v) }}
)

// anyList is a list whatever the type of its values, for the work done
// on every list.
type anyList interface {
	// load sets the list's NIP-86 layer in dy (a snapshot being
	// built) to the persisted one.
	load(ctx context.Context, p Persister, dy *snapshot) error
	// layer sets the list in dst to st's configuration layer and dy's
	// NIP-86 layer.
	layer(dst, st, dy *snapshot)
	// sameDynamic reports whether a and b hold the same NIP-86 layer.
	sameDynamic(a, b *snapshot) bool
}

// allLists are the seven lists.
var allLists = []anyList{bannedPubKeys, allowedPubKeys, bannedEvents, allowedEvents, allowedKinds, disallowedKinds, blockedIPs}

func (li list[K]) load(ctx context.Context, p Persister, dy *snapshot) error {
	m := make(map[K]entry)
	data, err := p.Load(ctx, li.key)
	switch {
	case isNotFound(err):
	case err != nil:
		return fmt.Errorf("policy: load %s: %w", li.key, err)
	default:
		if m, err = decodeSet(data, li.parse); err != nil {
			return fmt.Errorf("policy: load %s: %w", li.key, err)
		}
	}
	li.put(dy, &set[K]{dynamic: m})
	return nil
}

func (li list[K]) layer(dst, st, dy *snapshot) {
	li.put(dst, &set[K]{static: li.get(st).static, dynamic: li.get(dy).dynamic})
}

func (li list[K]) sameDynamic(a, b *snapshot) bool {
	return maps.Equal(li.get(a).dynamic, li.get(b).dynamic)
}

// add is the change that puts k on li's NIP-86 layer (replacing its
// entry if it has one), whether or not the configuration file has it
// too: the administrator's decision stays if the file's entry goes.
func (li list[K]) add(k K, e entry) change {
	return li.edit(func(m map[K]entry) bool { m[k] = e; return true })
}

// remove is the change that takes k off li's NIP-86 layer. The
// configuration file's entry, if any, stays.
func (li list[K]) remove(k K) change {
	return li.edit(func(m map[K]entry) bool {
		_, ok := m[k]
		delete(m, k)
		return ok
	})
}

// edit is the change that applies op to li's NIP-86 layer as persisted
// (op reports whether it changed it; if not, nothing is saved) and
// publishes the result, which carries what other nodes sharing the
// store changed in that list too.
func (li list[K]) edit(op func(map[K]entry) bool) change {
	return func(ctx context.Context, l *Lists) error {
		var dyn map[K]entry
		err := Update(ctx, l.p, li.key, func(old []byte, found bool) ([]byte, error) {
			m := make(map[K]entry)
			if found {
				var err error
				if m, err = decodeSet(old, li.parse); err != nil {
					return nil, err
				}
			}
			dyn = m
			if !op(m) {
				return nil, errUnchanged
			}
			return encodeSet(m, li.format), nil
		})
		if err != nil && !errors.Is(err, errUnchanged) {
			return fmt.Errorf("policy: save %s: %w", li.key, err)
		}
		next := *l.snap.Load()
		li.put(&next, &set[K]{static: li.get(&next).static, dynamic: dyn})
		l.snap.Store(&next)
		return nil
	}
}

func (l *Lists) stamp(reason string) entry { return entry{reason: reason, at: l.now().Unix()} }

func fmtPubKey(pk nostr.PubKey) string { return pk.Hex() }
func fmtID(id nostr.ID) string         { return id.Hex() }
func fmtKind(k int) string             { return strconv.Itoa(k) }

// do makes the changes in order, each to its list as persisted (read,
// edited and saved as one step: see Update) and published as soon as it
// is durable, so memory never runs ahead of what is saved. Callers order
// changes so that every intermediate state (what a crash between two
// saves leaves) is the stricter one or the target one. Changes through
// one Lists are made one at a time; through several on one shared store
// (the nodes of a cluster) none undoes another's.
func (l *Lists) do(ctx context.Context, changes ...change) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range changes {
		if err := c(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

// BanPubKey adds pk to the banned list and removes it from the allowed
// list (NIP-86 banpubkey). If the configuration file allows pk, that entry
// stays, but the ban wins: CheckEvent looks at bans first.
func (l *Lists) BanPubKey(ctx context.Context, pk nostr.PubKey, reason string) error {
	return l.do(ctx, bannedPubKeys.add(pk, l.stamp(reason)), allowedPubKeys.remove(pk))
}

// UnbanPubKey removes pk from the banned list (NIP-86 unbanpubkey). It
// fails with ErrStatic if the configuration file bans pk.
func (l *Lists) UnbanPubKey(ctx context.Context, pk nostr.PubKey) error {
	if inFile(l, bannedPubKeys.get, pk) {
		return fmt.Errorf("%w: pubkey %s is on banned_pubkeys", ErrStatic, pk.Hex())
	}
	return l.do(ctx, bannedPubKeys.remove(pk))
}

// AllowPubKey adds pk to the allowed list and removes it from the banned
// list (NIP-86 allowpubkey). While the allowed list is not empty, only the
// pubkeys on it may publish. It fails with ErrStatic if the configuration
// file bans pk.
func (l *Lists) AllowPubKey(ctx context.Context, pk nostr.PubKey, reason string) error {
	if inFile(l, bannedPubKeys.get, pk) {
		return fmt.Errorf("%w: pubkey %s is on banned_pubkeys", ErrStatic, pk.Hex())
	}
	return l.do(ctx, allowedPubKeys.add(pk, l.stamp(reason)), bannedPubKeys.remove(pk))
}

// UnallowPubKey removes pk from the allowed list (NIP-86 unallowpubkey).
// It fails with ErrStatic if the configuration file allows pk.
func (l *Lists) UnallowPubKey(ctx context.Context, pk nostr.PubKey) error {
	if inFile(l, allowedPubKeys.get, pk) {
		return fmt.Errorf("%w: pubkey %s is on allowed_pubkeys", ErrStatic, pk.Hex())
	}
	return l.do(ctx, allowedPubKeys.remove(pk))
}

// BanEvent adds id to the banned events and removes it from the allowed
// events (NIP-86 banevent). Removing an already stored copy is the
// caller's job.
func (l *Lists) BanEvent(ctx context.Context, id nostr.ID, reason string) error {
	// The allowance goes first: an allowed event passes even if banned.
	return l.do(ctx, allowedEvents.remove(id), bannedEvents.add(id, l.stamp(reason)))
}

// UnbanEvent removes id from the banned events (NIP-86 unbanevent).
func (l *Lists) UnbanEvent(ctx context.Context, id nostr.ID) error {
	return l.do(ctx, bannedEvents.remove(id))
}

// AllowEvent adds id to the allowed events and removes it from the banned
// events (NIP-86 allowevent). An allowed event passes every list check of
// CheckEvent (pubkey and kind lists included): it is the operator's
// explicit decision on that one event. Rate limits and plugins still apply.
func (l *Lists) AllowEvent(ctx context.Context, id nostr.ID, reason string) error {
	return l.do(ctx, allowedEvents.add(id, l.stamp(reason)), bannedEvents.remove(id))
}

// UnallowEvent removes id from the allowed events (NIP-86 unallowevent).
func (l *Lists) UnallowEvent(ctx context.Context, id nostr.ID) error {
	return l.do(ctx, allowedEvents.remove(id))
}

// AllowKind adds kind to the allowed kinds and removes it from the
// disallowed kinds (NIP-86 allowkind). While the allowed kinds are not
// empty, other kinds are refused. It fails with ErrInvalid for a kind
// outside 0-65535 and with ErrStatic if the configuration file disallows
// kind.
func (l *Lists) AllowKind(ctx context.Context, kind int) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	if inFile(l, disallowedKinds.get, kind) {
		return fmt.Errorf("%w: kind %d is on disallowed_kinds", ErrStatic, kind)
	}
	return l.do(ctx, allowedKinds.add(kind, l.stamp("")), disallowedKinds.remove(kind))
}

// DisallowKind adds kind to the disallowed kinds and removes it from the
// allowed kinds (NIP-86 disallowkind). If the configuration file allows
// kind, that entry stays, but the disallowance wins. It fails with
// ErrInvalid for a kind outside 0-65535.
func (l *Lists) DisallowKind(ctx context.Context, kind int) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	return l.do(ctx, disallowedKinds.add(kind, l.stamp("")), allowedKinds.remove(kind))
}

// BlockIP adds an address ("203.0.113.7") or a CIDR prefix
// ("203.0.113.0/24") to the blocked list (NIP-86 blockip). Host bits of a
// prefix are cleared; an IPv4-mapped IPv6 value is stored as IPv4. It
// fails with ErrInvalid for anything else. Connections already open from
// the address are not closed here.
func (l *Lists) BlockIP(ctx context.Context, ip, reason string) error {
	p, err := parseIPBlock(ip)
	if err != nil {
		return err
	}
	return l.do(ctx, blockedIPs.add(p, l.stamp(reason)))
}

// UnblockIP removes an address or prefix from the blocked list (NIP-86
// unblockip). It removes exactly that entry: unblocking one address inside
// a blocked prefix changes nothing. It fails with ErrStatic if the
// configuration file blocks it.
func (l *Lists) UnblockIP(ctx context.Context, ip string) error {
	p, err := parseIPBlock(ip)
	if err != nil {
		return err
	}
	if inFile(l, blockedIPs.get, p) {
		return fmt.Errorf("%w: %s is on blocked_ips", ErrStatic, formatIPBlock(p))
	}
	return l.do(ctx, blockedIPs.remove(p))
}

// inFile reports whether the configuration file puts k on the list get
// returns. (A reload may change the file's layer between this check and
// the change; the change then is made as if it had come first.)
func inFile[K comparable](l *Lists, get func(*snapshot) *set[K], k K) bool {
	_, ok := get(l.snap.Load()).static[k]
	return ok
}

// PubKeyEntry is one pubkey on a list.
type PubKeyEntry struct {
	PubKey nostr.PubKey
	Reason string
	Static bool // from the configuration file
}

// EventEntry is one event id on a list.
type EventEntry struct {
	ID     nostr.ID
	Reason string
}

// IPEntry is one address or prefix on the blocked list.
type IPEntry struct {
	Prefix netip.Prefix // a single address has its full length
	Reason string
	Static bool // from the configuration file
}

// String returns the address for a single address, else the CIDR prefix.
func (e IPEntry) String() string { return formatIPBlock(e.Prefix) }

// BannedPubKeys returns the banned pubkeys, sorted. The caller owns the
// slice.
func (l *Lists) BannedPubKeys() []PubKeyEntry { return pkEntries(l.snap.Load().bannedPK) }

// AllowedPubKeys returns the allowed pubkeys, sorted.
func (l *Lists) AllowedPubKeys() []PubKeyEntry { return pkEntries(l.snap.Load().allowedPK) }

// BannedEvents returns the banned event ids, sorted.
func (l *Lists) BannedEvents() []EventEntry { return evEntries(l.snap.Load().bannedEv) }

// AllowedEvents returns the allowed event ids, sorted.
func (l *Lists) AllowedEvents() []EventEntry { return evEntries(l.snap.Load().allowedEv) }

// AllowedKinds returns the allowed kinds, ascending.
func (l *Lists) AllowedKinds() []int { return kindList(l.snap.Load().allowedKinds.set) }

// DisallowedKinds returns the disallowed kinds, ascending.
func (l *Lists) DisallowedKinds() []int { return kindList(l.snap.Load().disallowedKinds.set) }

// BlockedIPs returns the blocked addresses and prefixes, sorted.
func (l *Lists) BlockedIPs() []IPEntry {
	s := l.snap.Load().blocked
	out := make([]IPEntry, 0, len(s.static)+len(s.dynamic))
	for p, e := range s.static {
		out = append(out, IPEntry{Prefix: p, Reason: e.reason, Static: true})
	}
	for p, e := range s.dynamic {
		if _, dup := s.static[p]; !dup {
			out = append(out, IPEntry{Prefix: p, Reason: e.reason})
		}
	}
	slices.SortFunc(out, func(a, b IPEntry) int {
		return cmp.Or(a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
	})
	return out
}

func pkEntries(s *set[nostr.PubKey]) []PubKeyEntry {
	out := make([]PubKeyEntry, 0, len(s.static)+len(s.dynamic))
	for k, e := range s.static {
		out = append(out, PubKeyEntry{PubKey: k, Reason: e.reason, Static: true})
	}
	for k, e := range s.dynamic {
		if _, dup := s.static[k]; !dup {
			out = append(out, PubKeyEntry{PubKey: k, Reason: e.reason})
		}
	}
	slices.SortFunc(out, func(a, b PubKeyEntry) int { return strings.Compare(string(a.PubKey[:]), string(b.PubKey[:])) })
	return out
}

func evEntries(s *set[nostr.ID]) []EventEntry {
	out := make([]EventEntry, 0, len(s.dynamic))
	for k, e := range s.dynamic {
		out = append(out, EventEntry{ID: k, Reason: e.reason})
	}
	slices.SortFunc(out, func(a, b EventEntry) int { return strings.Compare(string(a.ID[:]), string(b.ID[:])) })
	return out
}

func kindList(s *set[int]) []int {
	out := make([]int, 0, len(s.static)+len(s.dynamic))
	for k := range s.static {
		out = append(out, k)
	}
	for k := range s.dynamic {
		if _, dup := s.static[k]; !dup {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Persisted form.

type fileDoc struct {
	Version int         `json:"version"`
	Entries []fileEntry `json:"entries"`
}

type fileEntry struct {
	Key    string `json:"key"`
	Reason string `json:"reason,omitempty"`
	At     int64  `json:"at,omitempty"`
}

// encodeSet returns the persisted document of a NIP-86 layer, entries
// sorted by key.
func encodeSet[K comparable](m map[K]entry, format func(K) string) []byte {
	doc := fileDoc{Version: fileVersion, Entries: make([]fileEntry, 0, len(m))}
	for k, e := range m {
		doc.Entries = append(doc.Entries, fileEntry{Key: format(k), Reason: e.reason, At: e.at})
	}
	slices.SortFunc(doc.Entries, func(a, b fileEntry) int { return strings.Compare(a.Key, b.Key) })
	b, err := json.Marshal(doc)
	if err != nil {
		panic("BUG: policy: encode list: " + err.Error())
	}
	return b
}

// decodeSet parses a persisted document into a dynamic layer.
func decodeSet[K comparable](data []byte, parse func(string) (K, error)) (map[K]entry, error) {
	var doc fileDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if doc.Version != fileVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, doc.Version, fileVersion)
	}
	m := make(map[K]entry, len(doc.Entries))
	for _, e := range doc.Entries {
		k, err := parse(e.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		m[k] = entry{reason: e.Reason, at: e.At}
	}
	return m, nil
}

// listError names the configuration list a bad value is on, and tells the
// value's error without its "policy: invalid value: " (newStatic's error
// says "policy: configuration: " once).
type listError struct {
	list string
	err  error
}

func (e *listError) Error() string {
	return e.list + ": " + strings.TrimPrefix(e.err.Error(), ErrInvalid.Error()+": ")
}

func (e *listError) Unwrap() error { return e.err }

// Value parsers. Hex is accepted in either case, and the NIP-19 forms
// people paste (npub or nprofile, note or nevent) too (internal/nip19).

func parsePubKey(s string) (nostr.PubKey, error) {
	pk, err := nip19.ParsePubKey(s)
	if err != nil {
		return pk, fmt.Errorf("%w: %s", ErrInvalid, nip19.Reason(err))
	}
	return pk, nil
}

func parseID(s string) (nostr.ID, error) {
	id, err := nip19.ParseID(s)
	if err != nil {
		return id, fmt.Errorf("%w: %s", ErrInvalid, nip19.Reason(err))
	}
	return id, nil
}

func checkKind(k int) error {
	if k < 0 || k > nostr.MaxKind {
		return fmt.Errorf("%w: kind %d is outside 0-%d", ErrInvalid, k, nostr.MaxKind)
	}
	return nil
}

func parseKindKey(s string) (int, error) {
	k, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: kind %q", ErrInvalid, s)
	}
	return k, checkKind(k)
}

// parseIPBlock parses an address or a CIDR prefix into a canonical prefix:
// host bits cleared, IPv4-mapped IPv6 turned into IPv4, zone dropped, a
// single address as a full-length prefix.
func parseIPBlock(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%w: address prefix %q: %v", ErrInvalid, s, err)
		}
		a, bits := p.Addr(), p.Bits()
		if a.Is4In6() {
			if bits < 96 {
				return netip.Prefix{}, fmt.Errorf("%w: address prefix %q: IPv4-mapped prefix shorter than /96", ErrInvalid, s)
			}
			a, bits = a.Unmap(), bits-96
		}
		return netip.PrefixFrom(a, bits).Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w: address %q: %v", ErrInvalid, s, err)
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// formatIPBlock is parseIPBlock's inverse.
func formatIPBlock(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}
