// Package tomlcheck checks a TOML file decoded by BurntSushi/toml against
// the Go value it was decoded into, for what the decoder lets through: a
// key the value has no field for (a typo, or a key in the wrong section),
// and a duration written as a bare number, which the decoder takes as
// nanoseconds (`timer_slack = 50` would be 50ns, `max_event_wait = 500`
// half a microsecond).
package tomlcheck

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/petrel-relay/petrel/internal/suggest"
)

// Decode decodes the TOML text data into v (a pointer) and checks it
// (check). A value of the wrong type is told in words (`line 2:
// relay.max_limit: want a whole number, not a string`) rather than in the
// decoder's Go types.
func Decode(data string, v any) error {
	md, err := toml.Decode(data, v)
	if err != nil {
		return typeError(reflect.TypeOf(v), err)
	}
	var raw map[string]any
	if _, err := toml.Decode(data, &raw); err != nil {
		return err
	}
	return check(md, reflect.TypeOf(v), raw)
}

// The decoder's text for a value of the wrong type (BurntSushi/toml
// v1.6's MetaData.badtype); other errors are kept as they are.
var badType = regexp.MustCompile(`^toml: line (\d+) \(last key "(.*)"\): incompatible types: TOML value has type (.+); destination has type (.+)$`)

func typeError(root reflect.Type, err error) error {
	m := badType.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	line, key, got, want := m[1], m[2], m[3], m[4]
	if t, ok := resolve(root, strings.Split(key, ".")); ok && t == durationType {
		return fmt.Errorf("line %s: %s: %s", line, key, durationWant)
	}
	return fmt.Errorf("line %s: %s: want %s, not %s", line, key, words(want), words(got))
}

// words names a TOML value's or a destination's type as the decoder
// prints it (Go's %T of the value; a kind for the destination).
func words(t string) string {
	switch t {
	case "string":
		return "a string"
	case "int64", "integer":
		return "a whole number"
	case "float64", "float":
		return "a number"
	case "bool":
		return "true or false"
	case "[]any", "slice", "array":
		return "an array"
	case "map[string]any", "map", "struct":
		return "a table"
	case "time.Time", "toml.LocalDate", "toml.LocalTime", "toml.LocalDatetime":
		return "a date or time"
	}
	return t
}

const durationWant = `a duration is a string with its unit, like "500ms", "10s" or "5m" (a bare number would be nanoseconds)`

// check returns an error naming each key of the file that the type root
// (of the pointer the file was decoded into) has no field for, with the
// key it probably meant, and each duration given as a positive number
// instead of a string with its unit (0 and negative numbers mean the
// same either way: off, or never); nil if there is none. raw is the file
// decoded without a type. The error is one line.
func check(md toml.MetaData, root reflect.Type, raw map[string]any) error {
	var problems []string
	if und := md.Undecoded(); len(und) > 0 {
		unknown := map[string]bool{}
		for _, k := range und {
			unknown[k.String()] = true
		}
		var keys []string
		for _, k := range und {
			if len(k) > 1 && unknown[k[:len(k)-1].String()] {
				continue // in an unknown table, which is named
			}
			s := k.String()
			if best := suggestKey(root, k); best != "" {
				s += " (did you mean " + best + "?)"
			}
			keys = append(keys, s)
		}
		problems = append(problems, "unknown keys: "+strings.Join(keys, ", "))
	}
	for _, k := range md.Keys() {
		if md.Type(k...) != "Integer" {
			continue
		}
		if t, ok := resolve(root, k); !ok || t != durationType {
			continue
		}
		for _, n := range lookup(raw, k) {
			if n, ok := n.(int64); ok && n > 0 {
				problems = append(problems, fmt.Sprintf("%s = %d: %s", k, n, durationWant))
				break
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(problems, "; "))
}

var durationType = reflect.TypeOf(time.Duration(0))

// elem is t without pointers and slices (an array of tables, an optional
// value).
func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	return t
}

// field returns the field of struct type t whose TOML name is name.
func field(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		if tomlName(t.Field(i)) == name {
			return t.Field(i).Type, true
		}
	}
	return nil, false
}

func tomlName(f reflect.StructField) string {
	tag := strings.Split(f.Tag.Get("toml"), ",")[0]
	if tag == "-" || !f.IsExported() {
		return ""
	}
	if tag == "" {
		return f.Name
	}
	return tag
}

// resolve returns the Go type key decodes into under root, if it has one.
func resolve(root reflect.Type, key toml.Key) (reflect.Type, bool) {
	t := elem(root)
	for _, part := range key {
		switch t.Kind() {
		case reflect.Struct:
			ft, ok := field(t, part)
			if !ok {
				return nil, false
			}
			t = ft
		case reflect.Map:
			t = t.Elem()
		default:
			return nil, false
		}
		if t != durationType {
			t = elem(t)
		}
	}
	return t, true
}

// suggestKey names the key an unknown key probably meant: the same path
// with its first unknown part replaced by the nearest field name there,
// or a key of the same name in another section.
func suggestKey(root reflect.Type, key toml.Key) string {
	t := elem(root)
	for i, part := range key {
		switch t.Kind() {
		case reflect.Map:
			t = elem(t.Elem())
			continue
		case reflect.Struct:
		default:
			return ""
		}
		if ft, ok := field(t, part); ok {
			t = elem(ft)
			continue
		}
		var names []string
		for j := 0; j < t.NumField(); j++ {
			if n := tomlName(t.Field(j)); n != "" {
				names = append(names, n)
			}
		}
		if best := suggest.Closest(part, names, 2); best != "" {
			fixed := append(toml.Key{}, key...)
			fixed[i] = best
			return fixed.String()
		}
		if i == len(key)-1 {
			if elsewhere := findLeaf(elem(root), nil, part); elsewhere != "" {
				return elsewhere
			}
		}
		return ""
	}
	return ""
}

// findLeaf returns the path of the first field named name under struct
// type t (not through maps), or "".
func findLeaf(t reflect.Type, prefix toml.Key, name string) string {
	if t.Kind() != reflect.Struct {
		return ""
	}
	for i := 0; i < t.NumField(); i++ {
		n := tomlName(t.Field(i))
		if n == "" {
			continue
		}
		path := append(prefix[:len(prefix):len(prefix)], n)
		if n == name && len(prefix) > 0 {
			return path.String()
		}
		if ft := elem(t.Field(i).Type); ft.Kind() == reflect.Struct && ft != durationType {
			if s := findLeaf(ft, path, name); s != "" {
				return s
			}
		}
	}
	return ""
}

// lookup returns the values at key in v, a file decoded without a type
// (every table's, under an array of tables).
func lookup(v any, key toml.Key) []any {
	if len(key) == 0 {
		return []any{v}
	}
	switch v := v.(type) {
	case map[string]any:
		return lookup(v[key[0]], key[1:])
	case []map[string]any:
		var out []any
		for _, t := range v {
			out = append(out, lookup(t, key)...)
		}
		return out
	}
	return nil
}
