package sync

import (
	"context"
	"errors"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nip19"
)

// authRefusal returns the error of the relay on c answering request
// ("REQ", "NEG-OPEN", "EVENT") with the "auth-required:" message msg.
func (s *syncer) authRefusal(c *client.Conn, request, msg string) error {
	return &client.AuthRequiredError{URL: c.URL(), Request: request, Message: msg, Authenticated: s.authenticated(c)}
}

// authenticated reports whether c has answered AUTH.
func (s *syncer) authenticated(c *client.Conn) bool {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	return s.authed[c]
}

// authenticate answers c's NIP-42 challenge with Options.AuthKey after
// the relay refused something with "auth-required:" (refusal, matching
// client.ErrAuthRequired). It returns nil when the refused request or
// event is to be sent again: the first time on c. Otherwise it returns
// refusal (no key; or c has authenticated already, so the key is not
// enough), or why the AUTH failed (a *relayError).
func (s *syncer) authenticate(ctx context.Context, c *client.Conn, refusal error) error {
	if s.o.AuthKey == nil {
		return refusal
	}
	s.authMu.Lock()
	defer s.authMu.Unlock()
	if s.authed[c] {
		return refusal
	}
	if err := client.Authenticate(ctx, c, s.o.AuthKey, s.o.Timeout); err != nil {
		return &relayError{url: c.URL(), err: err}
	}
	if s.authed == nil {
		s.authed = make(map[*client.Conn]bool)
	}
	s.authed[c] = true
	s.o.Logger.Info("authenticated (NIP-42)", "relay", c.URL(), "pubkey", nip19.EncodePubKey(s.o.AuthKey.PubKey()))
	return nil
}

// isAuthRequired reports whether err is an "auth-required:" refusal.
func isAuthRequired(err error) bool { return errors.Is(err, client.ErrAuthRequired) }

// relayError is an error prefixed with the URL of the relay it is about.
type relayError struct {
	url string
	err error
}

func (e *relayError) Error() string { return e.url + ": " + e.err.Error() }
func (e *relayError) Unwrap() error { return e.err }

// namesRelay reports whether err says which relay it is about already: a
// *relayError or a *client.AuthRequiredError.
func namesRelay(err error) bool {
	var re *relayError
	var ae *client.AuthRequiredError
	return errors.As(err, &re) || errors.As(err, &ae)
}
