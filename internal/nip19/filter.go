package nip19

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// HexFilter returns the JSON filter data (one filter object, or an array
// of them) with the bech32 forms a person may paste rewritten to what
// NIP-01 filters hold: npub and nprofile to hex in "authors" and "#p";
// note and nevent to hex in "ids" and "#e"; naddr to its
// "kind:pubkey:identifier" coordinate in "#a". Hex values, other keys and
// every other value are kept as they are (numbers keep their text), and
// so are keys given twice: the filter parser still sees, and refuses,
// what it would have refused. A value of those lists that is bech32 of
// the wrong kind, or bad bech32, is an error naming it. data that is not
// JSON comes back unchanged, for the filter parser to refuse.
func HexFilter(data []byte) ([]byte, error) {
	if !bytes.Contains(data, []byte("1")) { // every bech32 string has a '1'
		return data, nil
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var out bytes.Buffer
	if err := rewriteValue(d, &out, ""); err != nil {
		if errors.Is(err, errNotJSON) {
			return data, nil
		}
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return data, nil // trailing data: let the parser say so
	}
	return out.Bytes(), nil
}

var errNotJSON = errors.New("not JSON")

// rewriteValue copies one JSON value from d to out; key is the filter key
// the value belongs to ("" outside a filter's lists).
func rewriteValue(d *json.Decoder, out *bytes.Buffer, key string) error {
	tok, err := d.Token()
	if err != nil {
		return errNotJSON
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			out.WriteByte('[')
			for i := 0; d.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := rewriteValue(d, out, key); err != nil {
					return err
				}
			}
			if _, err := d.Token(); err != nil {
				return errNotJSON
			}
			out.WriteByte(']')
		case '{':
			out.WriteByte('{')
			for i := 0; d.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				kt, err := d.Token()
				k, ok := kt.(string)
				if err != nil || !ok {
					return errNotJSON
				}
				writeJSONString(out, k)
				out.WriteByte(':')
				if err := rewriteValue(d, out, k); err != nil {
					return err
				}
			}
			if _, err := d.Token(); err != nil {
				return errNotJSON
			}
			out.WriteByte('}')
		default:
			return errNotJSON
		}
	case string:
		v, err := rewriteString(key, t)
		if err != nil {
			return err
		}
		writeJSONString(out, v)
	case json.Number:
		out.WriteString(t.String())
	case bool:
		fmt.Fprint(out, t)
	case nil:
		out.WriteString("null")
	}
	return nil
}

// rewriteString converts one value of a filter list.
func rewriteString(key, v string) (string, error) {
	if isHex64(v) || !strings.Contains(v, "1") {
		return v, nil
	}
	switch key {
	case "authors", "#p":
		pk, err := ParsePubKey(v)
		if err != nil {
			return "", fmt.Errorf("%q: %w", key, err)
		}
		return pk.Hex(), nil
	case "ids", "#e":
		id, err := ParseID(v)
		if err != nil {
			return "", fmt.Errorf("%q: %w", key, err)
		}
		return id.Hex(), nil
	case "#a":
		if !strings.HasPrefix(strings.ToLower(v), PrefixAddress+"1") {
			return v, nil
		}
		e, err := Decode(v)
		if err != nil {
			return "", fmt.Errorf("%q: %w", key, err)
		}
		return e.Address.Coordinate(), nil
	}
	return v, nil
}

// writeJSONString writes s as a JSON string (encoding/json's escaping,
// without HTML escapes).
func writeJSONString(out *bytes.Buffer, s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
