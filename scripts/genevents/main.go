// Command genevents writes n signed kind-1 events as JSONL on stdout, by
// a fixed set of authors (keys derived from "genevents <i>"), one second
// apart, newest last: the fixture of scripts/bench-cli.sh.
//
//	go run ./scripts/genevents -n 100000 -authors 1000 > events.jsonl
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func main() {
	n := flag.Int("n", 10000, "events to write")
	authors := flag.Int("authors", 100, "distinct authors")
	start := flag.Int64("start", 1_700_000_000, "created_at of the first event")
	flag.Parse()
	keys := make([]nostr.SecretKey, *authors)
	for i := range keys {
		keys[i] = nostr.SecretKeyFromSeed(fmt.Appendf(nil, "genevents %d", i))
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	for i := range *n {
		ev := &nostr.Event{
			CreatedAt: *start + int64(i),
			Kind:      nostr.KindTextNote,
			Tags:      nostr.Tags{{"t", "bench"}},
			Content:   fmt.Sprintf("event %d of the petrel client benchmark: a short note of typical length, about one line of text.", i),
		}
		nostr.SignEvent(ev, keys[i%len(keys)])
		w.Write(ev.Raw)
		w.WriteByte('\n')
	}
}
