package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/store"
)

// Write policy (internal/policy) wired into the relay: the write lists,
// the rate limits and the plugin, built by New from Options.Policy, and
// the NIP-11 information that NIP-86 may change, persisted through
// Options.Persister.
//
// Where each check runs:
//   - Lists.CheckIP when a session opens (onOpen): a blocked address gets a
//     NOTICE and close 1008.
//   - The per-address EVENT rate limit and Lists.CheckEvent among the cheap
//     checks of an EVENT (policy()), before signature verification.
//   - The per-pubkey EVENT rate limit and the plugin after signature
//     verification (ingest.go): an unverified event may carry anyone's
//     pubkey, and must not drain that pubkey's bucket or reach a stateful
//     plugin in someone else's name.
//   - The per-address REQ rate limit on REQ and COUNT.

// policySet is the relay's policy, built by New (the lists, the rate
// limits and the proof of work change afterwards, lock-free for readers:
// NIP-86 and reloads): who may write what (lists, rate limits, plugin,
// proof of work) and who may read the protected kinds (auth.go).
type policySet struct {
	lists *policy.Lists
	// The rate limits (nil: off) and the proof of work, replaced whole by
	// ReloadRates; rates is what they were built from (under rateChange).
	limEventIP       atomic.Pointer[policy.RateLimits] // EVENTs per address
	limEventPK       atomic.Pointer[policy.RateLimits] // events per pubkey
	limReq           atomic.Pointer[policy.RateLimits] // REQ and COUNT per address
	limConnect       atomic.Pointer[policy.RateLimits] // connections per address (the server asks)
	minPoW           atomic.Int64
	rateChange       sync.Mutex
	rates            policy.Config
	plugin           *policy.Plugin // nil: none
	ownPlugin        bool           // plugin was started by New
	postQueue        int            // capacity of ingest.seq
	persister        policy.Persister
	restrictedWrites bool
	prot             *kindBits // protected kinds (read protection); nil: none
	protKinds        []int     // the same, sorted
	protText         string    // "4, 14 and 1059", for messages
}

// infoKey is the Persister key of the NIP-11 fields changed through
// NIP-86.
const infoKey = "relay/info"

// persistedInfo is what infoKey holds: the fields changed through
// NIP-86, each absent until it is changed (so that the configuration's
// [info] keeps the others).
type persistedInfo struct {
	Name        *string `json:"name,omitempty"`
	Description *string `json:"description,omitempty"`
	Icon        *string `json:"icon,omitempty"`
}

// decodeInfo parses what infoKey holds.
func decodeInfo(b []byte) (persistedInfo, error) {
	var pi persistedInfo
	if err := json.Unmarshal(b, &pi); err != nil {
		return pi, fmt.Errorf("relay: persisted %s: %w", infoKey, err)
	}
	return pi, nil
}

// overlay sets info's fields to those pi holds.
func (pi persistedInfo) overlay(info *Info) {
	for _, f := range []struct{ from, to *string }{{pi.Name, &info.Name}, {pi.Description, &info.Description}, {pi.Icon, &info.Icon}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
}

// rateSettings are one rate limit's settings (rate 0: off).
type rateSettings struct {
	rate           float64
	burst, maxKeys int
}

// rateLimits are the relay's rate limits: where each is kept, its
// settings in a policy.Config, and the policy.Config of it alone.
var rateLimits = []struct {
	lim func(*policySet) *atomic.Pointer[policy.RateLimits]
	of  func(policy.Config) rateSettings
	cfg func(rateSettings) policy.Config
}{
	{func(p *policySet) *atomic.Pointer[policy.RateLimits] { return &p.limEventIP },
		func(c policy.Config) rateSettings { return rateSettings{c.EventRate, c.EventBurst, c.RateMaxKeys} },
		func(s rateSettings) policy.Config {
			return policy.Config{EventRate: s.rate, EventBurst: s.burst, RateMaxKeys: s.maxKeys}
		}},
	{func(p *policySet) *atomic.Pointer[policy.RateLimits] { return &p.limEventPK },
		func(c policy.Config) rateSettings {
			return rateSettings{c.PubKeyEventRate, c.PubKeyEventBurst, c.RateMaxKeys}
		},
		func(s rateSettings) policy.Config {
			return policy.Config{PubKeyEventRate: s.rate, PubKeyEventBurst: s.burst, RateMaxKeys: s.maxKeys}
		}},
	{func(p *policySet) *atomic.Pointer[policy.RateLimits] { return &p.limReq },
		func(c policy.Config) rateSettings { return rateSettings{c.ReqRate, c.ReqBurst, c.RateMaxKeys} },
		func(s rateSettings) policy.Config {
			return policy.Config{ReqRate: s.rate, ReqBurst: s.burst, RateMaxKeys: s.maxKeys}
		}},
	{func(p *policySet) *atomic.Pointer[policy.RateLimits] { return &p.limConnect },
		func(c policy.Config) rateSettings { return rateSettings{c.ConnectRate, c.ConnectBurst, c.RateMaxKeys} },
		func(s rateSettings) policy.Config {
			return policy.Config{ConnectRate: s.rate, ConnectBurst: s.burst, RateMaxKeys: s.maxKeys}
		}},
}

// setRates builds the rate limits of pc (normalized) whose settings
// differ from those running, carrying their counters over, and sets the
// proof of work. r.pol.rateChange is held, or the relay is not running
// yet.
func (r *Relay) setRates(pc policy.Config) {
	for _, rl := range rateLimits {
		p, want := rl.lim(&r.pol), rl.of(pc)
		if p.Load() != nil && want == rl.of(r.pol.rates) {
			continue
		}
		var next *policy.RateLimits
		if want.rate > 0 {
			next = policy.NewRateLimits(rl.cfg(want))
			next.CarryStats(p.Load())
			if r.rateShare != nil {
				next.Share()
			}
		}
		p.Store(next)
	}
	r.pol.minPoW.Store(int64(pc.MinPoWDifficulty))
	r.pol.rates = pc
}

// rateShareInterval is how often a node of a cluster sends what its
// rate limits took to the others (RateSharer): the delay, and so the
// most a client spread over several nodes gets past a limit besides
// one burst a node, is about what the rate refills in it.
const rateShareInterval = 100 * time.Millisecond

// maxRateShare is the most a message of the rate limits' spending holds
// (about 3,000 keys): well under NATS's default payload limit of 1 MB.
const maxRateShare = 64 << 10

// rateShareSize is the most a message of the rate limits' spending
// holds on a bus that takes messages of up to limit bytes (0: unknown):
// maxRateShare, or less when the NATS server's max_payload is smaller,
// so that the spending goes in several messages rather than in one NATS
// refuses.
func rateShareSize(limit int) int {
	if limit > 0 {
		return min(limit, maxRateShare)
	}
	return maxRateShare
}

// shareRates sends what the rate limits took to the other nodes every
// rateShareInterval until the relay closes; nothing when they took
// nothing.
func (r *Relay) shareRates() {
	defer r.wg.Done()
	t := time.NewTicker(rateShareInterval)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		size := rateShareSize(r.rateShare.ShareLimit())
		for _, rl := range rateLimits {
			if l := rl.lim(&r.pol).Load(); l != nil {
				for _, m := range l.Spent(size) {
					r.rateShare.ShareRates(m)
				}
			}
		}
	}
}

// debitRates takes from the rate limits what another node's took (a
// RateSharer's message).
func (r *Relay) debitRates(msg []byte) {
	for _, rl := range rateLimits {
		if l := rl.lim(&r.pol).Load(); l != nil {
			if err := l.Debit(msg); err != nil {
				r.log.Debug("relay: rate-limit share message refused", "err", err)
				return
			}
		}
	}
}

// ReloadRates applies pc's rate limits (event_rate, pubkey_event_rate,
// req_rate, their bursts, rate_max_keys) and min_pow_difficulty to the
// running relay (petrel serve's reload). A limit whose settings changed
// starts afresh, every bucket full, its counters carried over; the
// others keep their buckets. It fails, changing nothing, if pc is
// invalid, or if it turns the per-pubkey event limit on while
// verification is optimistic: that limit needs the signature checked
// first, and verify_mode optimistic is turned off for it at a start
// only.
func (r *Relay) ReloadRates(pc policy.Config) error {
	if err := pc.Validate(); err != nil {
		return err
	}
	pc = pc.Normalize()
	r.pol.rateChange.Lock()
	defer r.pol.rateChange.Unlock()
	if r.optimistic && pc.PubKeyEventRate > 0 && r.pol.limEventPK.Load() == nil {
		return errors.New("relay: policy.pubkey_event_rate needs the signature checked first: with verify_mode optimistic it applies from the next start")
	}
	r.setRates(pc)
	return nil
}

// initPolicy builds the lists, rate limits and plugin of opts, and loads
// the persisted NIP-11 changes. It runs before any goroutine starts.
func (r *Relay) initPolicy(opts Options) error {
	pc := opts.Policy
	if err := pc.Validate(); err != nil {
		return err
	}
	pc = pc.Normalize()
	r.pol.persister = opts.Persister
	if r.pol.persister == nil {
		r.pol.persister = &policy.MemPersister{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lists, err := policy.NewLists(ctx, pc, r.pol.persister)
	if err != nil {
		return err
	}
	r.pol.lists = lists
	r.setRates(pc)
	r.pol.restrictedWrites = pc.Plugin != "" || opts.Plugin != nil // lists: see Limitation
	r.pol.postQueue = pc.PluginMaxInflight
	switch {
	case opts.Plugin != nil:
		r.pol.plugin = opts.Plugin
	case pc.Plugin != "":
		p, err := policy.StartPlugin(pc, r.log)
		if err != nil {
			return err
		}
		r.pol.plugin, r.pol.ownPlugin = p, true
	}
	if err := r.overlayPersistedInfo(ctx, &r.info); err != nil {
		r.closePlugin()
		return err
	}
	return nil
}

// overlayPersistedInfo sets info's name, description and icon to those
// changed through NIP-86 (ChangeInfo), if any were.
func (r *Relay) overlayPersistedInfo(ctx context.Context, info *Info) error {
	b, err := r.pol.persister.Load(ctx, infoKey)
	switch {
	case err == nil:
		pi, err := decodeInfo(b)
		if err != nil {
			return err
		}
		pi.overlay(info)
	case errors.Is(err, policy.ErrNotFound) || errors.Is(err, store.ErrNotFound):
	default:
		return fmt.Errorf("relay: load %s: %w", infoKey, err)
	}
	return nil
}

// ReloadInfo makes info, the configuration's [info] read again (petrel
// serve's reload), the relay's NIP-11 information, with the name,
// description and icon changed through NIP-86 over it, as at a start.
func (r *Relay) ReloadInfo(info Info) error {
	if err := info.Check(); err != nil {
		return err
	}
	info = info.normalize()
	r.infoChange.Lock()
	defer r.infoChange.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.overlayPersistedInfo(ctx, &info); err != nil {
		return err
	}
	r.SetInfo(info)
	return nil
}

// minPolicyKick is the least time between two readings of the NIP-86
// state that hints from the bus cause: whoever can publish on the bus
// cannot make a node read the store more often than that.
const minPolicyKick = 100 * time.Millisecond

// PolicyChanged tells the other nodes of a cluster that the NIP-86 state
// was just changed through this one (the bus's PolicyHinter, if it is
// one), so that they read it again at once. The NIP-86 API calls it
// after every change it saved.
func (r *Relay) PolicyChanged() {
	if h, ok := r.bus.(PolicyHinter); ok {
		h.HintPolicy()
	}
}

// kickPolicy makes refreshPolicy read the NIP-86 state now (another
// node's hint). It does not block.
func (r *Relay) kickPolicy() {
	select {
	case r.policyKick <- struct{}{}:
	default:
	}
}

// refreshPolicy reads the NIP-86 state again every period (see
// Options.PolicyRefresh), and when another node hints at a change (at
// most every minPolicyKick), until the relay closes: the lists
// (connections a ban or block from another node concerns are closed, as
// that node closed its own) and the name, description and icon.
func (r *Relay) refreshPolicy(every time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	var lastKick time.Time
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		case <-r.policyKick:
			if wait := minPolicyKick - time.Since(lastKick); wait > 0 {
				select {
				case <-r.ctx.Done():
					return
				case <-time.After(wait):
				}
			}
			// Hints that came during the wait are answered by the
			// reading that follows: without this, one of them would
			// start another reading 100 ms after it.
			select {
			case <-r.policyKick:
			default:
			}
			lastKick = time.Now()
		}
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		changed, err := r.pol.lists.Refresh(ctx)
		if err == nil {
			err = r.refreshInfo(ctx)
		}
		cancel()
		switch {
		case err != nil && r.ctx.Err() != nil:
			return
		case err != nil && !failing:
			r.log.Warn("policy: reading the NIP-86 state other nodes may have changed failed; retrying", "err", err)
		case err == nil && failing:
			r.log.Info("policy: reading the NIP-86 state again")
		}
		failing = err != nil
		if changed {
			n := r.DisconnectBlocked()
			r.log.Info("policy: lists changed through another node", "closed_connections", n)
		}
	}
}

// refreshInfo sets the name, description and icon to those persisted
// (changed through another node's NIP-86).
func (r *Relay) refreshInfo(ctx context.Context) error {
	r.infoChange.Lock()
	defer r.infoChange.Unlock()
	info := r.Info()
	if err := r.overlayPersistedInfo(ctx, &info); err != nil {
		return err
	}
	r.SetInfo(info)
	return nil
}

// closePlugin stops the plugin if the relay started it.
func (r *Relay) closePlugin() {
	if r.pol.ownPlugin && r.pol.plugin != nil {
		r.pol.plugin.Close()
	}
}

// initProtected builds the set of protected kinds.
func (r *Relay) initProtected() {
	var kinds []int
	for _, k := range r.cfg.ProtectedKinds {
		if k >= 0 && k <= nostr.MaxKind && !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return
	}
	slices.Sort(kinds)
	r.pol.prot = new(kindBits)
	for _, k := range kinds {
		r.pol.prot[k>>6] |= 1 << (k & 63)
	}
	r.pol.protKinds = kinds
	r.pol.protText = protectedText(kinds)
}

// Lists returns the relay's write lists, for the NIP-86 management API.
// Changes made through it apply to the next event at once; call
// DisconnectBlocked after a ban or block to close open connections too.
func (r *Relay) Lists() *policy.Lists { return r.pol.lists }

// InfoField is a field of the NIP-11 information that NIP-86 changes.
type InfoField int

// The fields NIP-86 changes: changerelayname, changerelaydescription,
// changerelayicon.
const (
	InfoName InfoField = iota
	InfoDescription
	InfoIcon
)

// fields returns where f is in pi and in info.
func (f InfoField) fields(pi *persistedInfo, info *Info) (**string, *string, error) {
	switch f {
	case InfoName:
		return &pi.Name, &info.Name, nil
	case InfoDescription:
		return &pi.Description, &info.Description, nil
	case InfoIcon:
		return &pi.Icon, &info.Icon, nil
	}
	return nil, nil, fmt.Errorf("relay: no NIP-11 field %d to change", f)
}

// ChangeInfo sets one field of the relay's NIP-11 information (NIP-86's
// changerelayname, changerelaydescription, changerelayicon), persists it
// through the persister (from then on it overrides the configuration's
// [info] at start and at a reload; a field never set through NIP-86
// keeps following the configuration) and makes it the relay's. The
// change is made to the information as persisted, one at a time (and
// not during a reload), atomically where the persister is shared by
// several nodes (policy.Update), so that two changes at once both stay.
func (r *Relay) ChangeInfo(field InfoField, value string) error {
	r.infoChange.Lock()
	defer r.infoChange.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var info Info
	err := policy.Update(ctx, r.pol.persister, infoKey, func(old []byte, found bool) ([]byte, error) {
		var pi persistedInfo
		if found {
			var err error
			if pi, err = decodeInfo(old); err != nil {
				return nil, err
			}
		}
		info = r.Info()
		pi.overlay(&info)
		saved, shown, err := field.fields(&pi, &info)
		if err != nil {
			return nil, err
		}
		*saved, *shown = &value, value
		return json.Marshal(pi)
	})
	if err != nil {
		return fmt.Errorf("relay: save %s: %w", infoKey, err)
	}
	r.SetInfo(info)
	return nil
}

// DisconnectBlocked closes, with 1008, every open connection whose address
// the lists now block or that authenticated as a banned pubkey, and
// returns how many it closed. It walks every session: call it after a
// NIP-86 ban or block, not per message.
func (r *Relay) DisconnectBlocked() int {
	banned := make(map[nostr.PubKey]bool)
	for _, e := range r.pol.lists.BannedPubKeys() {
		banned[e.PubKey] = true
	}
	n := 0
	r.forEachSession(func(s *Session) {
		if rej := r.pol.lists.CheckIP(s.addr); rej != nil {
			if s.close(ClosePolicy, rej.Error()) {
				n++
			}
			return
		}
		if info := s.auth.load(); info.authed() && len(banned) > 0 {
			for _, pk := range info.pubkeys {
				if banned[pk] {
					if s.close(ClosePolicy, "blocked: this pubkey is banned from this relay") {
						n++
					}
					return
				}
			}
		}
	})
	r.stats.ConnectionsBlocked.Add(int64(n))
	return n
}

// RateLimitStats are the counters of one rate limit in /stats.
type RateLimitStats struct {
	Limited int64 `json:"limited"` // requests refused with "rate-limited:"
	Evicted int64 `json:"evicted"` // partly drained buckets forgotten (table full)
	Keys    int   `json:"keys"`    // addresses or pubkeys tracked now
	// Remote counts the tokens the other nodes of a cluster took from
	// these limits' buckets (their clients' requests, shared over the bus).
	Remote int64 `json:"remote_taken"`
}

// PolicyStats are the write-policy counters in /stats.
type PolicyStats struct {
	EventRateIP     RateLimitStats      `json:"event_rate_ip"`
	EventRatePubKey RateLimitStats      `json:"event_rate_pubkey"`
	ReqRateIP       RateLimitStats      `json:"req_rate_ip"`
	ConnectRateIP   RateLimitStats      `json:"connect_rate_ip"`
	Plugin          *policy.PluginStats `json:"plugin,omitempty"`
}

func rateStats(l policy.LimitStats) RateLimitStats {
	return RateLimitStats{Limited: l.Limited, Evicted: l.Evicted, Keys: l.Keys, Remote: l.Remote}
}

// PolicyStats returns the rate-limit and plugin counters.
func (r *Relay) PolicyStats() PolicyStats {
	var ps PolicyStats
	if l := r.pol.limEventIP.Load(); l != nil {
		ps.EventRateIP = rateStats(l.Stats().EventIP)
	}
	if l := r.pol.limEventPK.Load(); l != nil {
		ps.EventRatePubKey = rateStats(l.Stats().EventPubKey)
	}
	if l := r.pol.limReq.Load(); l != nil {
		ps.ReqRateIP = rateStats(l.Stats().ReqIP)
	}
	if l := r.pol.limConnect.Load(); l != nil {
		ps.ConnectRateIP = rateStats(l.Stats().ConnectIP)
	}
	if r.pol.plugin != nil {
		st := r.pol.plugin.Stats()
		ps.Plugin = &st
	}
	return ps
}

// AllowConnect applies policy.connect_rate to a connection from client
// address ip (the server asks at accept, or for the client a trusted
// proxy names): nil, or the "rate-limited:" rejection, counted under the
// connect_rate_ip limit and connections_rejected. An invalid ip is not
// limited.
func (r *Relay) AllowConnect(ip netip.Addr) *nostr.Rejection {
	l := r.pol.limConnect.Load()
	if l == nil {
		return nil
	}
	rej := l.AllowConnect(ip)
	if rej != nil {
		r.stats.ConnectionsRejected.Add(1)
		r.stats.LimitTrips[limConnectRateIP].Add(1)
	}
	return rej
}

// allowReq applies the per-address REQ rate limit to a REQ or COUNT.
func (s *Session) allowReq() *nostr.Rejection {
	r := s.r
	l := r.pol.limReq.Load()
	if l == nil {
		return nil
	}
	if rej := l.AllowReq(s.addr); rej != nil {
		r.stats.LimitTrips[limReqRateIP].Add(1)
		return rej
	}
	return nil
}

// refuseReq answers a REQ or COUNT with CLOSED and counts the refusal.
func (s *Session) refuseReq(subID string, rej *nostr.Rejection) {
	s.r.stats.ReqRefused[reasonIndex(rej.Prefix)].Add(1)
	s.closedMsg(subID, rej.Error())
}

// parseAddr parses a session's address for the policy checks; an
// unparseable one is the zero Addr (never blocked or rate limited).
func parseAddr(ip string) netip.Addr {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}
