package postgres

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
)

// TestExplain prints EXPLAIN (ANALYZE, BUFFERS) of every query shape on
// a benchmark fixture (PETREL_PG_EXPLAIN=<size>, e.g. 1000000; built as
// the benchmarks build it), the output docs/storage.md quotes, and
// checks that no limited shape scans the events table in full. It is
// skipped without PETREL_PG_EXPLAIN: on a small table PostgreSQL rightly
// prefers full scans.
func TestExplain(t *testing.T) {
	v := os.Getenv("PETREL_PG_EXPLAIN")
	if v == "" {
		t.Skip("set PETREL_PG_EXPLAIN=<fixture size> to explain the query shapes on a benchmark fixture")
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("PETREL_PG_EXPLAIN=%q: %v", v, err)
	}
	s := fixture(t, n)
	ctx := context.Background()
	now := time.Now().Unix()
	shapes := []struct {
		name string
		f    nostr.Filter
	}{
		{"ids", nostr.Filter{IDs: []nostr.ID{{1}, {2}}, Limit: 10, HasLimit: true}},
		{"created_at (global)", nostr.Filter{Limit: 100, HasLimit: true}},
		{"created_at with until", recentFilter},
		{"kinds", globalFilter},
		{"author", authorFilter},
		{"author and kind (profile)", profileFilter},
		{"authors and kinds (feed)", feedFilter},
		{"500 authors, 5 active (follows)", followsFilter(5)},
		{"500 authors, 100 active (follows)", followsFilter(100)},
		{"#p and kinds (mentions)", mentionFilter},
		{"#t (hashtag)", hashtagFilter},
		{"since and until", nostr.Filter{Since: 1_700_500_000, HasSince: true, Until: 1_700_600_000, HasUntil: true, Limit: 100, HasLimit: true}},
		{"search", nostr.Filter{Search: "bitcoin", Kinds: []int{1}, Limit: 100, HasLimit: true}},
	}
	var stats search.Stats
	if err := s.pool.QueryRow(ctx, "SELECT coalesce(sum(docs), 0)::bigint, coalesce(sum(total_len), 0)::bigint FROM search_stats").Scan(&stats.Docs, &stats.TotalLen); err != nil {
		t.Fatal(err)
	}
	for _, sh := range shapes {
		sp := s.newSpec(&sh.f, true)
		var sql string
		var a *args
		plan := "search"
		if sp.terms != nil {
			sql, a = s.searchSQL(sp, stats, now)
		} else {
			sql, a, plan = sp.plainSQL(now)
		}
		rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql, a.vals...)
		if err != nil {
			t.Fatalf("%s: %v", sh.name, err)
		}
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		out := strings.Join(lines, "\n")
		t.Logf("### %s (plan %s)\n\n```sql\n%s\n```\n\n```\n%s\n```\n", sh.name, plan, sql, out)
		if strings.Contains(out, "Seq Scan on events") {
			t.Errorf("%s: the plan scans the events table in full", sh.name)
		}
	}
}
