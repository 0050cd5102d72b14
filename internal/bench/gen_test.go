package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestGeneratorDeterministic(t *testing.T) {
	cfg := GenConfig{Seed: 7, Authors: 10, Stream: "x", Start: 1_700_000_000}
	a := NewGenerator(cfg)
	b := NewGenerator(cfg)
	for i := 0; i < 50; i++ {
		ea, eb := a.Event(i), b.Event(i)
		if !bytes.Equal(ea.Raw, eb.Raw) {
			t.Fatalf("event %d differs between two generators of one config:\n%s\n%s", i, ea.Raw, eb.Raw)
		}
	}
	// Parallel generation gives the same bytes as one at a time.
	set, err := a.Generate(context.Background(), 5, 40, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	for j, ev := range set.Events {
		if want := b.Event(5 + j); !bytes.Equal(ev.Raw, want.Raw) {
			t.Fatalf("Generate event %d differs from Event(%d)", j, 5+j)
		}
		if got := string(set.Frames[j]); got != `["EVENT",`+string(ev.Raw)+`]` {
			t.Fatalf("frame %d = %.80s", j, got)
		}
		if i, ok := set.Index(ev.ID); !ok || i != j {
			t.Fatalf("Index(event %d) = %d, %v", j, i, ok)
		}
	}
}

// TestDropParsed: a set without its parsed events still has every frame
// and finds every id, which is all the publishing scenarios use.
func TestDropParsed(t *testing.T) {
	g := NewGenerator(GenConfig{Seed: 3, Authors: 4, Start: 1_700_000_000})
	set, err := g.Generate(context.Background(), 0, 30, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]nostr.ID, set.Len())
	frames := make([]string, set.Len())
	for i, ev := range set.Events {
		ids[i], frames[i] = ev.ID, string(set.Frames[i])
	}
	set.DropParsed()
	if set.Events != nil || set.Len() != 30 {
		t.Fatalf("after DropParsed: %d parsed events, Len %d; want none and 30", len(set.Events), set.Len())
	}
	for i := range ids {
		if j, ok := set.Index(ids[i]); !ok || j != i {
			t.Fatalf("Index(event %d) = %d, %v", i, j, ok)
		}
		if string(set.Frames[i]) != frames[i] {
			t.Fatalf("frame %d changed", i)
		}
	}
}

func TestGeneratorMatchesSignEvent(t *testing.T) {
	g := NewGenerator(GenConfig{Seed: 5, Authors: 3, Start: 1_700_000_000})
	for i := 0; i < 6; i++ {
		want := g.Unsigned(i)
		nostr.SignEvent(want, AuthorKey(5, i%3))
		if got := g.Event(i); !bytes.Equal(got.Raw, want.Raw) {
			t.Fatalf("event %d:\n%s\nSignEvent gives\n%s", i, got.Raw, want.Raw)
		}
	}
}

func TestGeneratorVaries(t *testing.T) {
	f := func(name string, x, y GenConfig, sameAuthors bool) {
		t.Helper()
		gx, gy := NewGenerator(x), NewGenerator(y)
		if bytes.Equal(gx.Event(3).Raw, gy.Event(3).Raw) {
			t.Errorf("%s: same event", name)
		}
		if (gx.Authors()[0] == gy.Authors()[0]) != sameAuthors {
			t.Errorf("%s: same authors = %v, want %v", name, !sameAuthors, sameAuthors)
		}
	}
	base := GenConfig{Seed: 1, Authors: 5, Start: 1_700_000_000}
	other := base
	other.Seed = 2
	f("seed", base, other, false)
	other = base
	other.Stream = "fill"
	f("stream", base, other, true)
	other = base
	other.Start++
	f("start", base, other, true)
}

func TestGeneratorShape(t *testing.T) {
	g := NewGenerator(GenConfig{Seed: 3, Authors: 4, Start: 1_700_000_000, PerSecond: 10})
	vocab := map[string]bool{}
	for _, w := range Vocabulary {
		vocab[w] = true
	}
	set, err := g.Generate(context.Background(), 0, 200, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := nostr.DefaultVerifier()
	for i, ev := range set.Events {
		if ev.Kind != 1 {
			t.Fatalf("event %d kind %d", i, ev.Kind)
		}
		if n := len(ev.Content); n < 100 || n > 300 {
			t.Fatalf("event %d content is %d bytes", i, n)
		}
		for _, w := range strings.Split(ev.Content, " ") {
			if !vocab[w] {
				t.Fatalf("event %d has word %q outside the vocabulary", i, w)
			}
		}
		if len(ev.Tags) != 3 || ev.Tags[0].Name() != "p" || ev.Tags[1].Name() != "e" || ev.Tags[2].Name() != "t" {
			t.Fatalf("event %d tags %v", i, ev.Tags)
		}
		if p := ev.Tags[0].Value(); p == ev.PubKey.Hex() {
			t.Fatalf("event %d p-tags its own author", i)
		}
		if ev.PubKey != g.Authors()[i%4] {
			t.Fatalf("event %d author is not author %d", i, i%4)
		}
		if want := int64(1_700_000_000 + i/10); ev.CreatedAt != want {
			t.Fatalf("event %d created_at %d, want %d", i, ev.CreatedAt, want)
		}
		if !nostr.CheckID(ev) || !nostr.VerifyEvent(v, ev) {
			t.Fatalf("event %d: bad id or signature", i)
		}
		parsed, err := nostr.ParseEvent(ev.Raw, nil)
		if err != nil || parsed.ID != ev.ID {
			t.Fatalf("event %d does not parse back: %v", i, err)
		}
	}
}

func TestStartFor(t *testing.T) {
	f := func(now int64, n, per int, want int64) {
		t.Helper()
		if got := StartFor(now, n, per); got != want {
			t.Errorf("StartFor(%d, %d, %d) = %d, want %d", now, n, per, got, want)
		}
	}
	f(1000, 0, 0, 1000)
	f(1000, 1, 0, 1000)
	f(1000, 100, 0, 1000)
	f(1000, 101, 0, 999)
	f(1000, 1000, 10, 901)
	// The last event's created_at is now.
	g := NewGenerator(GenConfig{Start: StartFor(5000, 1234, 0)})
	if got := g.CreatedAt(1233); got != 5000 {
		t.Errorf("last event created_at %d, want 5000", got)
	}
}

func BenchmarkGenerate(b *testing.B) {
	g := NewGenerator(GenConfig{Seed: 1, Start: 1_700_000_000})
	b.Run("unsigned", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			g.Unsigned(i)
		}
	})
	b.Run("signed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			g.Event(i)
		}
	})
}

// TestGeneratorNaturalText: TextNatural content is deterministic, 100-300
// bytes of lowercase words like the default's, and has a long tail: far
// more distinct words than Vocabulary's 248, the most frequent being
// Vocabulary's first. The default stays TextVocabulary, unchanged.
func TestGeneratorNaturalText(t *testing.T) {
	base := GenConfig{Seed: 3, Authors: 10, Start: 1_700_000_000}
	nat := base
	nat.Text = TextNatural
	voc := base
	voc.Text = TextVocabulary
	gd, gv, gn, gn2 := NewGenerator(base), NewGenerator(voc), NewGenerator(nat), NewGenerator(nat)
	natural, vocabulary := map[string]int{}, map[string]int{}
	for i := 0; i < 2000; i++ {
		d, v, n := gd.Unsigned(i), gv.Unsigned(i), gn.Unsigned(i)
		if d.Content != v.Content {
			t.Fatalf("event %d: the default is not TextVocabulary", i)
		}
		if n.Content != gn2.Unsigned(i).Content {
			t.Fatalf("event %d: natural content differs between two generators", i)
		}
		if len(n.Content) < 100 || len(n.Content) > 300 {
			t.Fatalf("event %d: %d bytes of content", i, len(n.Content))
		}
		for _, w := range strings.Fields(n.Content) {
			if strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") != "" {
				t.Fatalf("event %d: word %q", i, w)
			}
			natural[w]++
		}
		for _, w := range strings.Fields(v.Content) {
			vocabulary[w]++
		}
	}
	if len(vocabulary) > len(Vocabulary) || len(natural) < 5*len(Vocabulary) {
		t.Fatalf("distinct words: %d natural, %d vocabulary", len(natural), len(vocabulary))
	}
	top := ""
	for w, c := range natural {
		if top == "" || c > natural[top] {
			top = w
		}
	}
	if top != Vocabulary[0] {
		t.Fatalf("most frequent natural word %q (%d), want %q", top, natural[top], Vocabulary[0])
	}
}

// TestNaturalWordsDistinct: every rank of the natural vocabulary has its
// own word.
func TestNaturalWordsDistinct(t *testing.T) {
	seen := make(map[string]uint64, NaturalWords)
	for r := uint64(0); r < NaturalWords; r++ {
		w := string(naturalWord(nil, r))
		if prev, dup := seen[w]; dup {
			t.Fatalf("ranks %d and %d are both %q", prev, r, w)
		}
		seen[w] = r
	}
}
