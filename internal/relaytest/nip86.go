package relaytest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nip98"
)

// NIP86 calls method with params on the NIP-86 management API at base
// (the http://host:port of a relay, or of a proxy in front of relays),
// signed by k with NIP-98, and returns the HTTP status and the decoded
// answer.
func NIP86(t testing.TB, base string, k Key, method string, params ...any) (int, map[string]any) {
	t.Helper()
	if params == nil {
		params = []any{}
	}
	body, _ := json.Marshal(map[string]any{"method": method, "params": params})
	url := base + "/"
	return NIP86With(t, url, body, nip98.Header(k.SK, "POST", url, body, time.Now()))
}

// NIP86With posts body to url with the Authorization header auth and
// returns the HTTP status and the decoded answer.
func NIP86With(t testing.TB, url string, body []byte, auth string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/nostr+json+rpc")
	req.Header.Set("Authorization", auth)
	cl := &http.Client{Timeout: DefaultTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %d %s", body, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}
