package nostr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// JSONTypeError tells an encoding/json decoding error of an event-shaped
// object (a template, a rumor) in the JSON's terms: `"kind" must be a
// whole number, not a JSON string`, or `want an object, not a JSON
// array`, rather than encoding/json's Go struct, field and type names.
// Other errors are returned as they are.
func JSONTypeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	field, _, _ := strings.Cut(te.Field, ".")
	if field == "" {
		return fmt.Errorf("want an object, not a JSON %s", te.Value)
	}
	want := jsonWant(te.Type)
	if field == "tags" {
		want = "an array of arrays of strings"
	}
	return fmt.Errorf("%q must be %s, not a JSON %s", field, want, te.Value)
}

// jsonWant names the JSON that decodes into t, with its article.
func jsonWant(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
