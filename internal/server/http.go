package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
)

const softwareURL = "https://github.com/petrel-relay/petrel"

// nip11 is the NIP-11 relay information document.
type nip11 struct {
	Name           string           `json:"name"`
	Description    string           `json:"description,omitempty"`
	PubKey         string           `json:"pubkey,omitempty"`
	Contact        string           `json:"contact,omitempty"`
	SupportedNIPs  []int            `json:"supported_nips"`
	Software       string           `json:"software"`
	Version        string           `json:"version"`
	Icon           string           `json:"icon,omitempty"`
	Banner         string           `json:"banner,omitempty"`
	Limitation     nostr.Limitation `json:"limitation"`
	RelayCountries []string         `json:"relay_countries,omitempty"`
	LanguageTags   []string         `json:"language_tags,omitempty"`
	Tags           []string         `json:"tags,omitempty"`
	PostingPolicy  string           `json:"posting_policy,omitempty"`
	PrivacyPolicy  string           `json:"privacy_policy,omitempty"`
	TermsOfService string           `json:"terms_of_service,omitempty"`
}

func setCORS(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Headers", "*")
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
}

func (s *Server) nip11Doc() nip11 {
	info := s.relay.Info()
	nips := s.relay.SupportedNIPs()
	if s.admins > 0 {
		nips = append(nips, 86) // served here, not by the relay
		slices.Sort(nips)
	}
	return nip11{
		Name:           info.Name,
		Description:    info.Description,
		PubKey:         info.PubKey,
		Contact:        info.Contact,
		SupportedNIPs:  nips,
		Software:       softwareURL,
		Version:        s.version,
		Icon:           info.Icon,
		Banner:         info.Banner,
		Limitation:     s.relay.Limitation(),
		RelayCountries: info.RelayCountries,
		LanguageTags:   info.LanguageTags,
		Tags:           info.Tags,
		PostingPolicy:  info.PostingPolicy,
		PrivacyPolicy:  info.PrivacyPolicy,
		TermsOfService: info.TermsOfService,
	}
}

func (s *Server) serveNIP11(w http.ResponseWriter, r *http.Request) {
	setCORS(w)
	w.Header().Set("Content-Type", "application/nostr+json")
	body, _ := json.MarshalIndent(s.nip11Doc(), "", "  ")
	w.Write(append(body, '\n'))
}

func (s *Server) serveLanding(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(landingPage(s.nip11Doc())) // pages.go
}

// Stats is the /stats document: the relay's counters plus the edge's.
type Stats struct {
	relay.Snapshot
	SlotsActive int `json:"connection_slots_active"`
	// SlotsReserve counts the connections of SlotsActive admitted past
	// server.max_connections, in the HTTP reserve (server.http_reserve).
	SlotsReserve int `json:"connection_slots_http_reserve"`
	// SlotsRemoteAddresses counts the client addresses other nodes of a
	// cluster told this one they hold many connections for (a sixteenth
	// of max_connections_per_ip or more), counted against the cap here.
	SlotsRemoteAddresses int `json:"connection_slots_remote_addresses"`
	// ProxyHeaderMissing counts WebSocket upgrades from a trusted proxy
	// without a usable client address (server.real_ip_header): counted
	// under the proxy's own address.
	ProxyHeaderMissing int64 `json:"proxy_header_missing"`
	// ProxyProtocol counts the PROXY headers read and the connections
	// refused for theirs (server.proxy_protocol).
	ProxyProtocol ProxyProtocolStats `json:"proxy_protocol"`
	// ConfigReloads counts petrel serve's configuration reloads (SIGHUP).
	ConfigReloads ReloadStats `json:"config_reloads"`
	// Process: the process's memory, goroutines and open files.
	Process ProcessStats `json:"process"`
	Version string       `json:"version"`
}

// ReloadStats counts the configuration reloads: applied (wholly, or with
// some keys left for the next start, as the log says) and refused (a
// configuration serve --check would refuse: nothing changed), and when
// the last one was and how it ended.
type ReloadStats struct {
	Applied     int64     `json:"applied"`
	Refused     int64     `json:"refused"`
	Last        time.Time `json:"last,omitzero"`
	LastRefused bool      `json:"last_refused"`
}

// reloadCounts is ReloadStats kept under a lock (reloads are rare).
type reloadCounts struct {
	mu sync.Mutex
	st ReloadStats
}

func (c *reloadCounts) snapshot() ReloadStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// NoteReload counts a configuration reload (petrel serve's SIGHUP):
// applied, or refused with nothing changed. /stats shows it under
// config_reloads; /metrics as petrel_config_reloads_total{result} and
// petrel_config_last_reload_successful.
func (s *Server) NoteReload(applied bool) {
	c := &s.reloads
	c.mu.Lock()
	defer c.mu.Unlock()
	if applied {
		c.st.Applied++
	} else {
		c.st.Refused++
	}
	c.st.Last, c.st.LastRefused = time.Now(), !applied
}

func (s *Server) statsDoc() Stats {
	proc := readProcess()
	proc.HandlerGoroutinesIdle = s.IdleHandlers()
	return Stats{
		Snapshot:             s.relay.Stats(),
		SlotsActive:          s.slots.active(),
		SlotsReserve:         s.slots.inReserve(),
		SlotsRemoteAddresses: s.slots.remoteAddresses(),
		ProxyHeaderMissing:   s.proxyNoClient.Load(),
		ProxyProtocol:        s.proxyStats.snapshot(),
		ConfigReloads:        s.reloads.snapshot(),
		Process:              proc,
		Version:              s.version,
	}
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	setCORS(w)
	w.Header().Set("Content-Type", "application/json")
	body, _ := json.MarshalIndent(s.statsDoc(), "", "  ")
	w.Write(append(body, '\n'))
}
