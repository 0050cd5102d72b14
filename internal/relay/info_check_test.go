package relay_test

import (
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/relay"
)

// TestInfoCheckLinks: NIP-11's icon, banner and policy links are http(s)
// URLs (a relative path or a bare host would be a broken link in every
// client); unset is fine; each bad one is named, on one line.
func TestInfoCheckLinks(t *testing.T) {
	good := relay.Info{Icon: "https://relay.example/icon.png", Banner: "http://relay.example/b.png",
		PostingPolicy: "https://relay.example/p", PrivacyPolicy: "https://relay.example/privacy", TermsOfService: "https://relay.example/tos"}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	if err := (relay.Info{}).Check(); err != nil {
		t.Fatal(err)
	}
	bad := relay.Info{Icon: "icon.png", PostingPolicy: "relay.example/policy", TermsOfService: "https://", PubKey: "zz"}
	err := bad.Check()
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("%v", err)
	}
	for _, want := range []string{`icon: "icon.png": want an http:// or https:// URL`, `posting_policy: "relay.example/policy"`, `terms_of_service: "https://"`, "pubkey: not a public key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
	for _, field := range []string{"banner", "privacy_policy"} {
		if strings.Contains(err.Error(), field) {
			t.Errorf("%v names %s, which is unset", err, field)
		}
	}
}

// TestInfoCheckCountriesLanguages: NIP-11's relay_countries are ISO
// 3166-1 codes (EU and * too) and its language_tags BCP 47 tags (* too);
// a typo is named, and the document shows each in its canonical form.
func TestInfoCheckCountriesLanguages(t *testing.T) {
	good := relay.Info{RelayCountries: []string{"US", "de", "EU", "*", "GBR"}, LanguageTags: []string{"en", "pt-BR", "en_us", "zh-Hant", "*"}}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	bad := relay.Info{RelayCountries: []string{"US", "XX", "usa!"}, LanguageTags: []string{"en", "english", "zz"}}
	err := bad.Check()
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("%v", err)
	}
	for _, want := range []string{
		`relay_countries: "XX": want an ISO 3166-1 country code (US, DE), EU or *`,
		`relay_countries: "usa!"`,
		`language_tags: "english": want an IETF language tag (en, pt-BR) or *`,
		`language_tags: "zz"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
	for _, fine := range []string{`"US"`, `"en"`} {
		if strings.Contains(err.Error(), fine) {
			t.Errorf("%v names %s, which is right", err, fine)
		}
	}
}
