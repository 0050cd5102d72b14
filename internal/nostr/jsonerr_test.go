package nostr

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestJSONTypeError: a decoding error of an event-shaped object is told
// by its JSON field and types, not by encoding/json's Go names.
func TestJSONTypeError(t *testing.T) {
	type obj struct {
		Kind    *int     `json:"kind"`
		Created int64    `json:"created_at"`
		Content *string  `json:"content"`
		Tags    Tags     `json:"tags"`
		Score   float64  `json:"score"`
		On      bool     `json:"on"`
		List    []string `json:"list"`
	}
	f := func(in, want string) {
		t.Helper()
		var o obj
		err := JSONTypeError(json.Unmarshal([]byte(in), &o))
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v\nwant %s", in, err, want)
		}
	}
	f(`{"kind":"1"}`, `"kind" must be a whole number, not a JSON string`)
	f(`{"created_at":1.5}`, `"created_at" must be a whole number, not a JSON number 1.5`)
	f(`{"content":5}`, `"content" must be a string, not a JSON number`)
	f(`{"tags":[["a",{}]]}`, `"tags" must be an array of arrays of strings, not a JSON object`)
	f(`{"score":"x"}`, `"score" must be a number, not a JSON string`)
	f(`{"on":1}`, `"on" must be a boolean, not a JSON number`)
	f(`{"list":{}}`, `"list" must be an array, not a JSON object`)
	f(`[1]`, `want an object, not a JSON array`)
	// Other errors pass through.
	syntax := json.Unmarshal([]byte(`{`), new(obj))
	if got := JSONTypeError(syntax); !errors.Is(got, syntax) {
		t.Errorf("a syntax error: %v", got)
	}
	if JSONTypeError(nil) != nil {
		t.Error("nil is not an error")
	}
}
