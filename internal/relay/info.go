package relay

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/petrel-relay/petrel/internal/nip19"
	"golang.org/x/text/language"
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
	// RelayCountries lists ISO 3166-1 country codes whose laws apply
	// ("EU" for the European Union, "*" for all); the document shows
	// each in its two-letter upper-case form.
	RelayCountries []string `toml:"relay_countries"`
	// LanguageTags lists IETF (BCP 47) language tags of the relay's
	// content ("*" for any); the document shows each in its canonical
	// form ("en_us" as "en-US").
	LanguageTags []string `toml:"language_tags"`
	// Tags lists topic tags describing the relay.
	Tags []string `toml:"tags"`
}

// Check reports a pubkey that is not one (hex, npub or nprofile), a link
// (icon, banner, the policies) that is not an http(s) URL, a country
// that is not an ISO 3166-1 code and a language tag that is not BCP 47.
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
	for _, c := range i.RelayCountries {
		if _, err := country(c); err != nil {
			problems = append(problems, "relay_countries: "+err.Error())
		}
	}
	for _, l := range i.LanguageTags {
		if _, err := languageTag(l); err != nil {
			problems = append(problems, "language_tags: "+err.Error())
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

// country returns c as a NIP-11 relay country: "*", or an ISO 3166-1
// code (alpha-2, or alpha-3 or numeric for one) in its alpha-2 form, or
// "EU".
func country(c string) (string, error) {
	if c == "*" {
		return c, nil
	}
	r, err := language.ParseRegion(c)
	if err != nil || !(r.IsCountry() || r.String() == "EU") {
		return "", fmt.Errorf("%q: want an ISO 3166-1 country code (US, DE), EU or *", c)
	}
	return r.String(), nil
}

// languageTag returns l as a NIP-11 language tag: "*", or a BCP 47 tag
// of known subtags in its canonical form.
func languageTag(l string) (string, error) {
	if l == "*" {
		return l, nil
	}
	t, err := language.Parse(l)
	if err != nil {
		return "", fmt.Errorf("%q: want an IETF language tag (en, pt-BR) or *", l)
	}
	return t.String(), nil
}

// normalize returns i as NIP-11 shows it: its pubkey in lower-case hex,
// its countries and language tags in their canonical forms. i is checked.
func (i Info) normalize() Info {
	if pk, err := nip19.ParsePubKey(i.PubKey); err == nil {
		i.PubKey = pk.Hex()
	}
	canon := func(vs []string, f func(string) (string, error)) []string {
		if vs == nil {
			return nil
		}
		out := make([]string, len(vs))
		for k, v := range vs {
			if out[k], _ = f(v); out[k] == "" {
				out[k] = v
			}
		}
		return out
	}
	i.RelayCountries = canon(i.RelayCountries, country)
	i.LanguageTags = canon(i.LanguageTags, languageTag)
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
