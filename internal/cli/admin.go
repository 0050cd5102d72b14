package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nip98"
)

func init() { commands["admin"] = adminCmd }

// nip86ContentType is the media type of NIP-86 requests.
const nip86ContentType = "application/nostr+json+rpc"

func adminCmd() *cobra.Command {
	var sec secretFlag
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "admin URL METHOD [PARAM...]",
		Short: "Call a relay's NIP-86 management API, signed with NIP-98 (--sec: an admin's key)",
		Long: `Admin sends {"method": METHOD, "params": [PARAM...]} to the relay's
NIP-86 API, authorized with a NIP-98 header signed by --sec, and prints
the result as JSON. A PARAM that is JSON (a number, true, "quoted",
[...]) is sent as it is, anything else as a string; for methods on
pubkeys or events an npub/nprofile or note/nevent is sent as hex.

  petrel admin wss://relay.example banpubkey npub1... "spam"
  petrel admin wss://relay.example listbannedpubkeys
  petrel admin wss://relay.example supportedmethods

An error from the relay is printed on stderr with exit status 1.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			sk, err := sec.key()
			if err != nil {
				return err
			}
			ws, err := parseRelayOrHTTP(args[0])
			if err != nil {
				return err
			}
			u, err := client.HTTPURL(ws)
			if err != nil {
				return err
			}
			method := args[1]
			params := make([]json.RawMessage, 0, len(args)-2)
			for i, a := range args[2:] {
				p, err := adminParam(method, i, a)
				if err != nil {
					return err
				}
				params = append(params, p)
			}
			body, err := json.Marshal(struct {
				Method string            `json:"method"`
				Params []json.RawMessage `json:"params"`
			}{method, params})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", nip86ContentType)
			req.Header.Set("Authorization", nip98.Header(sk, http.MethodPost, u, body, time.Now()))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("%s: %w", u, connectError(err, timeout))
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			if err != nil {
				return err
			}
			var answer struct {
				Result json.RawMessage `json:"result"`
				Error  string          `json:"error"`
			}
			if err := json.Unmarshal(raw, &answer); err != nil {
				return fmt.Errorf("%s: HTTP %d, not a NIP-86 answer: %.200s", u, resp.StatusCode, raw)
			}
			if answer.Error != "" {
				return fmt.Errorf("%s: %s", method, answer.Error)
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", answer.Result)
			return err
		},
	}
	sec.register(cmd)
	timeoutVar(cmd.Flags(), &timeout, 10*time.Second, "how long to wait for the relay")
	return cmd
}

// adminParam encodes one parameter: the first parameter of a method on
// a pubkey or an event (banpubkey, allowevent...) must be one, as hex or
// bech32, and is sent as hex (anything else is refused here, so that an
// nsec pasted by mistake never leaves the machine); JSON is sent as it
// is; anything else as a string.
func adminParam(method string, i int, a string) (json.RawMessage, error) {
	if i == 0 {
		switch {
		case strings.HasSuffix(method, "pubkey"):
			pk, err := nip19.ParsePubKey(a)
			if err != nil {
				return nil, inputErr(method, err)
			}
			a = pk.Hex()
		case strings.HasSuffix(method, "event"):
			id, err := nip19.ParseID(a)
			if err != nil {
				return nil, inputErr(method, err)
			}
			a = id.Hex()
		}
	}
	if json.Valid([]byte(a)) && !isBareWord(a) {
		return json.RawMessage(a), nil
	}
	b, _ := json.Marshal(a)
	return b, nil
}

// isBareWord reports whether a is valid JSON only by accident of being a
// number-like string that is meant as text: kept simple, hex keys and ids
// (64 hex digits) are always strings.
func isBareWord(a string) bool { return len(a) == 64 }
