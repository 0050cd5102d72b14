package client

// Answering NIP-42: what the client commands, `petrel sync` and `petrel
// stream` share when a relay refuses a request or an event with
// "auth-required:".

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

var (
	// ErrAuthRequired is matched (errors.Is) by a relay's "auth-required:"
	// refusal: a *ClosedError with that prefix, and an *AuthRequiredError.
	ErrAuthRequired = errors.New("client: the relay requires NIP-42 authentication")
	// ErrAuthRefused is wrapped by Authenticate when the relay answers the
	// AUTH with OK false.
	ErrAuthRefused = errors.New("the relay refused our AUTH")
)

// AuthRequiredError is a relay's "auth-required:" answer to a request or
// an event, for callers that do not keep the *ClosedError (a negentropy
// session's NEG-ERR, an EVENT's OK false). It matches ErrAuthRequired.
type AuthRequiredError struct {
	// URL is the relay's.
	URL string
	// Request is what the relay refused: "REQ", "NEG-OPEN", "EVENT", ...
	Request string
	// Message is the relay's, "auth-required: ...".
	Message string
	// Authenticated says the connection had authenticated already: the
	// key it authenticated with is not enough.
	Authenticated bool
}

// Error names the relay, what it refused and its message.
func (e *AuthRequiredError) Error() string {
	after := ""
	if e.Authenticated {
		after = " (after we authenticated)"
	}
	return fmt.Sprintf("%s requires NIP-42 authentication: it answered %s with %q%s", e.URL, e.Request, e.Message, after)
}

// Is reports whether target is ErrAuthRequired.
func (e *AuthRequiredError) Is(target error) bool { return target == ErrAuthRequired }

// Is reports whether target is ErrAuthRequired and the relay closed the
// subscription with "auth-required:" (it is ErrRefused in any case,
// through Unwrap).
func (e *ClosedError) Is(target error) bool {
	return target == ErrAuthRequired && e.Prefix() == "auth-required"
}

// Authenticate answers the relay's last NIP-42 challenge on c with an
// AUTH event signed by sk, and waits at most timeout (or until ctx ends)
// for the relay's OK. An OK false is an error wrapping ErrAuthRefused;
// without a challenge on c it returns ErrNoChallenge. Call it after an
// "auth-required:" refusal (a relay sends its challenge before that
// answer), then send the refused request or event again.
func Authenticate(ctx context.Context, c *Conn, sk *nostr.SecretKey, timeout time.Duration) error {
	ev, err := c.AuthEvent()
	if err != nil {
		return err
	}
	nostr.SignEvent(ev, *sk)
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ok, err := c.Auth(actx, ev)
	if err != nil {
		return fmt.Errorf("AUTH: %w", err)
	}
	if !ok.OK {
		return fmt.Errorf("%w: %s", ErrAuthRefused, ok.Message)
	}
	return nil
}
