package nostr

// recoverEventID finds the id of an event object the parser refused before
// it had read the id (a malformed field came first): NIP-01 clients wait
// for an OK naming their event, so a refusal that can name it must be an
// OK, not a NOTICE. d starts at the object's '{'. The walk is lenient: it
// reads the object's top-level keys and skips each value whatever it holds
// (strings with any escapes, nested arrays and objects of any depth by
// counting brackets, numbers and literals as raw tokens), and accepts only
// a top-level "id" key (unescaped) whose value is 64 lowercase hex
// characters: the first such key names the event. It reads each byte at
// most a few times and allocates nothing.
func recoverEventID(d []byte) (ID, bool) {
	var id ID
	i := skipWS(d, 0)
	if i >= len(d) || d[i] != '{' {
		return id, false
	}
	i++
	for {
		i = skipWS(d, i)
		if i >= len(d) || d[i] != '"' {
			return id, false // '}' (no id) or not an object
		}
		ks := i + 1
		ke, ok := skipString(d, i)
		if !ok {
			return id, false
		}
		key := d[ks : ke-1]
		i = skipWS(d, ke)
		if i >= len(d) || d[i] != ':' {
			return id, false
		}
		i = skipWS(d, i+1)
		if string(key) == "id" && i < len(d) && d[i] == '"' {
			end, ok := skipString(d, i)
			if ok && end-i == 66 && isLowerHex(d[i+1:end-1]) {
				if v, ok := ParseHex32(string(d[i+1 : end-1])); ok {
					return ID(v), true
				}
			}
			return id, false // the id itself is malformed
		}
		if i, ok = skipAny(d, i); !ok {
			return id, false
		}
		i = skipWS(d, i)
		if i >= len(d) || d[i] != ',' {
			return id, false
		}
		i++
	}
}

func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at d[i] ('"').
func skipString(d []byte, i int) (int, bool) {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// skipAny returns the index just past the value starting at d[i]: a string,
// an array or object (brackets counted, not recursed, so any depth is
// fine), or a raw token up to the next ',', '}' or ']'.
func skipAny(d []byte, i int) (int, bool) {
	if i >= len(d) {
		return 0, false
	}
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '[', '{':
		depth := 0
		for ; i < len(d); i++ {
			switch d[i] {
			case '"':
				end, ok := skipString(d, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '[', '{':
				depth++
			case ']', '}':
				if depth--; depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	start := i
	for i < len(d) && d[i] != ',' && d[i] != '}' && d[i] != ']' {
		i++
	}
	return i, i > start
}

func isLowerHex(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
