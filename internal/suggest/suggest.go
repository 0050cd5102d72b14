// Package suggest names the known word a mistyped one probably meant
// ("did you mean ...?"), for filter keys and configuration keys.
package suggest

// Closest returns the word of known nearest to s by edit distance, if it
// is at most max edits away, or "" (the first of equally near ones).
func Closest(s string, known []string, max int) string {
	best, bestD := "", max+1
	for _, k := range known {
		if d := Distance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// Distance is the Levenshtein distance of two short strings (bytes).
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
