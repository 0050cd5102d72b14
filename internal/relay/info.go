package relay

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/petrel-relay/petrel/internal/nip19"
)

// Info is the operator-supplied part of the NIP-11 document. NIP-86 may
// change Name, Description and Icon at run time (ChangeInfo), and petrel
// serve's reload all of it (ReloadInfo).
type Info struct {
	// Name is the relay's name. Default "petrel".
	Name string `toml:"name"`
	// Description is a few sentences about the relay.
	Description string `toml:"description"`
	// PubKey is the operator's public key (hex, npub or nprofile; the
	// NIP-11 document shows it as hex).
	PubKey string `toml:"pubkey"`
	// Contact is an alternative contact (URI).
	Contact string `toml:"contact"`
	// Icon is an http(s) URL of a square image.
	Icon string `toml:"icon"`
	// Banner is an http(s) URL of a wide image.
	Banner string `toml:"banner"`
	// PostingPolicy is an http(s) URL of the relay's posting policy.
	PostingPolicy string `toml:"posting_policy"`
	// PrivacyPolicy is an http(s) URL of the relay's privacy policy.
	PrivacyPolicy string `toml:"privacy_policy"`
	// TermsOfService is an http(s) URL of the relay's terms of service.
	TermsOfService string `toml:"terms_of_service"`
	// RelayCountries lists ISO 3166 country codes whose laws apply.
	RelayCountries []string `toml:"relay_countries"`
	// LanguageTags lists IETF language tags of the relay's content.
	LanguageTags []string `toml:"language_tags"`
	// Tags lists topic tags describing the relay.
	Tags []string `toml:"tags"`
}

// Check reports a pubkey that is not one (hex, npub or nprofile), and a
// link (icon, banner, the policies) that is not an http(s) URL.
func (i Info) Check() error {
	var problems []string
	if strings.TrimSpace(i.PubKey) != "" {
		if _, err := nip19.ParsePubKey(i.PubKey); err != nil {
			// nip19's error quotes the value, but never an nsec.
			problems = append(problems, "pubkey: "+nip19.Reason(err))
		}
	}
	for _, l := range []struct{ key, v string }{
		{"icon", i.Icon}, {"banner", i.Banner}, {"posting_policy", i.PostingPolicy},
		{"privacy_policy", i.PrivacyPolicy}, {"terms_of_service", i.TermsOfService},
	} {
		if l.v != "" {
			if err := WebURL(l.v); err != nil {
				problems = append(problems, l.key+": "+err.Error())
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("info: %s", strings.Join(problems, "; "))
	}
	return nil
}

// WebURL checks that s is an absolute http:// or https:// URL, as NIP-11
// has its icon, banner and policy links: a relative path or a typo would
// be a broken link in every client that shows them.
func WebURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want an http:// or https:// URL", s)
	}
	return nil
}

// normalize returns i with its pubkey as NIP-11 has it: lower-case hex.
// i is checked.
func (i Info) normalize() Info {
	if pk, err := nip19.ParsePubKey(i.PubKey); err == nil {
		i.PubKey = pk.Hex()
	}
	return i
}

// Info returns the relay's current NIP-11 information.
func (r *Relay) Info() Info {
	r.infoMu.RLock()
	defer r.infoMu.RUnlock()
	info := r.info
	if info.Name == "" {
		info.Name = "petrel"
	}
	return info
}

// SetInfo replaces the relay's NIP-11 information.
func (r *Relay) SetInfo(info Info) {
	r.infoMu.Lock()
	r.info = info
	r.infoMu.Unlock()
}
