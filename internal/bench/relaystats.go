package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// relayCommits reads store_commits, the embedded store's synced group
// commits, from a petrel relay's /stats (on the WebSocket URL's host),
// so a ladder step can say how many events shared each commit's fsync.
// False for another relay, a petrel whose store has no such figure
// (PostgreSQL), or a /stats that cannot be read.
func relayCommits(ctx context.Context, wsURL string) (int64, bool) {
	u, err := url.Parse(wsURL)
	if err != nil {
		return 0, false
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return 0, false
	}
	u.Path, u.RawQuery, u.Fragment = "/stats", "", ""
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, false
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer res.Body.Close()
	var st struct {
		Backend string `json:"store_backend"`
		Commits *int64 `json:"store_commits"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&st) != nil || st.Commits == nil || st.Backend != "pebble" {
		return 0, false
	}
	return *st.Commits, true
}
