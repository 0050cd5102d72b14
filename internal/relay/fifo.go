package relay

// fifo is a first-in first-out queue that reuses its backing array. Popped
// slots are zeroed, so the GC can free what they pointed to, and the live
// part moves to the front once the popped prefix is most of the array, so
// a queue that is never quite empty does not grow without bound. Not safe
// for concurrent use: its owner locks.
type fifo[T any] struct {
	items []T
	head  int
	trim  capTrim // gives back a peak's array once uses stay small
}

// fifoCompactAt is the popped prefix from which a fifo may compact.
const fifoCompactAt = 64

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) push(v ...T) {
	q.items = append(q.items, v...)
	q.trim.used(q.len())
}

// pop removes and returns the oldest item; the queue must not be empty.
func (q *fifo[T]) pop() T {
	v := q.items[q.head]
	var zero T
	q.items[q.head] = zero
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
		if q.trim.emptied(cap(q.items)) {
			q.items = nil
		}
	case q.head >= fifoCompactAt && q.head > len(q.items)/2:
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return v
}

// take removes and returns every item, oldest first, and drops the
// backing array.
func (q *fifo[T]) take() []T {
	rest := q.items[q.head:]
	q.items, q.head = nil, 0
	return rest
}
