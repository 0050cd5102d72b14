package relay

import "testing"

// TestFIFO interleaves pushes and pops so the queue is never empty, and
// checks the order, that the backing array stays bounded (compaction),
// and that popped slots no longer hold their values.
func TestFIFO(t *testing.T) {
	var q fifo[*int]
	next, want := 0, 0
	push := func() { v := next; next++; q.push(&v) }
	push()
	for round := 0; round < 10000; round++ {
		push()
		push()
		for i := 0; i < 2; i++ {
			if got := *q.pop(); got != want {
				t.Fatalf("round %d: popped %d, want %d", round, got, want)
			}
			want++
		}
		if q.len() != 1 {
			t.Fatalf("round %d: len %d, want 1", round, q.len())
		}
		if cap(q.items) > 4*fifoCompactAt {
			t.Fatalf("round %d: backing array grew to %d for a queue of 1", round, cap(q.items))
		}
		for i := 0; i < q.head; i++ {
			if q.items[i] != nil {
				t.Fatalf("round %d: popped slot %d still holds a value", round, i)
			}
		}
	}
	q.push(nil, nil)
	rest := q.take()
	if len(rest) != 3 || *rest[0] != want || q.len() != 0 {
		t.Fatalf("take = %d items (first %v), len after %d", len(rest), rest[0], q.len())
	}
}
