package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// MaxInfoBytes is the largest NIP-11 document FetchInfo reads.
const MaxInfoBytes = 1 << 20

// ErrInfo means the relay has no usable NIP-11 document: an HTTP status
// other than 200, a document over MaxInfoBytes, or one that is not JSON.
var ErrInfo = errors.New("client: no usable NIP-11 document")

// InfoError is a relay's answer that is not a usable NIP-11 document. It
// matches ErrInfo (errors.Is).
type InfoError struct {
	URL string // the relay's ws:// or wss:// URL
	// Reason says what was wrong with the answer, without the URL: "HTTP
	// 404 Not Found", "larger than 1048576 bytes", or the JSON decoder's
	// error.
	Reason string
	Err    error // the JSON error, if that was the reason
}

func (e *InfoError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInfo, e.URL, e.Reason)
}

// Is reports whether target is ErrInfo.
func (e *InfoError) Is(target error) bool { return target == ErrInfo }

func (e *InfoError) Unwrap() error { return e.Err }

// Info is a relay's NIP-11 document: the fields a client acts on, and the
// whole document in Raw.
type Info struct {
	Name          string           `json:"name"`
	Description   string           `json:"description"`
	PubKey        string           `json:"pubkey"`
	Contact       string           `json:"contact"`
	Software      string           `json:"software"`
	Version       string           `json:"version"`
	SupportedNIPs []int            `json:"supported_nips"`
	Limitation    nostr.Limitation `json:"limitation"`
	// Raw is the document as received.
	Raw json.RawMessage `json:"-"`
}

// Supports reports whether the document lists nip in supported_nips.
func (inf *Info) Supports(nip int) bool { return slices.Contains(inf.SupportedNIPs, nip) }

// HTTPURL returns the http:// (or https://) URL of the relay at the ws://
// (or wss://) URL wsURL.
func HTTPURL(wsURL string) (string, error) {
	if err := CheckURL(wsURL); err != nil {
		return "", err
	}
	u, _ := url.Parse(wsURL) // CheckURL parsed it
	if u.Scheme == "ws" {
		u.Scheme = "http"
	} else {
		u.Scheme = "https"
	}
	return u.String(), nil
}

// FetchInfo reads the NIP-11 document of the relay at the ws:// or
// wss:// URL wsURL with hc (nil: http.DefaultClient); ctx bounds the
// request. A relay without a usable document gives an *InfoError, which
// matches ErrInfo.
func FetchInfo(ctx context.Context, hc *http.Client, wsURL string) (Info, error) {
	var inf Info
	u, err := HTTPURL(wsURL)
	if err != nil {
		return inf, err
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return inf, fmt.Errorf("client: NIP-11 of %s: %w", wsURL, err)
	}
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := hc.Do(req)
	if err != nil {
		return inf, fmt.Errorf("client: NIP-11 of %s: %w", wsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return inf, &InfoError{URL: wsURL, Reason: fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxInfoBytes+1))
	if err != nil {
		return inf, fmt.Errorf("client: NIP-11 of %s: %w", wsURL, err)
	}
	if len(body) > MaxInfoBytes {
		return inf, &InfoError{URL: wsURL, Reason: fmt.Sprintf("larger than %d bytes", MaxInfoBytes)}
	}
	if err := json.Unmarshal(body, &inf); err != nil {
		return Info{}, &InfoError{URL: wsURL, Reason: err.Error(), Err: err}
	}
	inf.Raw = body
	return inf, nil
}
