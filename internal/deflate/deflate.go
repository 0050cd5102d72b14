package deflate

import (
	"errors"
	"fmt"
	"github.com/klauspost/compress/flate"
	"sync"
)

// flushTail is what a sync flush ends with: the LEN and NLEN of an empty
// stored block.
var flushTail = [4]byte{0x00, 0x00, 0xff, 0xff}

// MaxStored is the longest part AppendStored takes: a stored block's
// LEN is 16 bits.
const MaxStored = 0xffff

// ErrLevel is returned by New for a level compress/flate does not have.
var ErrLevel = errors.New("deflate: compression level must be 1 (fastest) to 9 (smallest)")

// Codec compresses message parts at one level. It holds no state between
// calls: each call takes a compressor from a pool and returns it, so a
// connection that is not being written holds none (a compressor is
// hundreds of kilobytes). A Codec is safe for concurrent use.
type Codec struct {
	level int
	pool  sync.Pool // *writer at level
	huff  sync.Pool // *writer, Huffman coding only
}

// writer is a pooled compressor and the slice it appends to.
type writer struct {
	fw  *flate.Writer
	out []byte
}

func (w *writer) Write(p []byte) (int, error) {
	w.out = append(w.out, p...)
	return len(p), nil
}

// New returns a Codec compressing at level, 1 (compress/flate's
// BestSpeed) to 9 (BestCompression).
func New(level int) (*Codec, error) {
	if level < flate.BestSpeed || level > flate.BestCompression {
		return nil, fmt.Errorf("%w: %d", ErrLevel, level)
	}
	return &Codec{level: level}, nil
}

// Level returns the compression level.
func (c *Codec) Level() int { return c.level }

func get(pool *sync.Pool, level int) *writer {
	if w, _ := pool.Get().(*writer); w != nil {
		return w
	}
	w := &writer{}
	fw, err := flate.NewWriter(w, level)
	if err != nil {
		panic("BUG: deflate: " + err.Error()) // the level was checked by New
	}
	w.fw = fw
	return w
}

// compress appends p... compressed, sync-flushed, to dst. The
// compressor (klauspost/compress's flate) stores a short input that
// holds few repeats, such as a small event, most of which is hex: then
// the input is coded again with Huffman codes alone, which take hex to
// about half its size.
func (c *Codec) compress(dst []byte, p ...[]byte) []byte {
	n := len(dst)
	in := 0
	for _, b := range p {
		in += len(b)
	}
	dst = run(&c.pool, c.level, dst, p)
	if len(dst)-n >= in+len(flushTail) {
		// Not smaller: try Huffman coding alone, keep the smaller.
		end := len(dst)
		dst = run(&c.huff, flate.HuffmanOnly, dst, p)
		if h := dst[end:]; len(h) < end-n {
			dst = append(dst[:n], h...)
		} else {
			dst = dst[:end]
		}
	}
	return dst
}

// run appends p... compressed by a writer of pool, sync-flushed, to dst.
func run(pool *sync.Pool, level int, dst []byte, p [][]byte) []byte {
	w := get(pool, level)
	w.out = dst
	w.fw.Reset(w)
	for _, b := range p {
		_, _ = w.fw.Write(b) // writer.Write never fails
	}
	_ = w.fw.Flush()
	dst = w.out
	w.out = nil
	pool.Put(w)
	return dst
}

// AppendPart appends the concatenation of p compressed as a part that
// another part may follow: byte-aligned, ending with a sync flush. It
// refers to nothing before it.
func (c *Codec) AppendPart(dst []byte, p ...[]byte) []byte {
	return c.compress(dst, p...)
}

// AppendLast appends the concatenation of p compressed as the last part of
// a message: AppendPart's bytes less the final 00 00 ff ff.
func (c *Codec) AppendLast(dst []byte, p ...[]byte) []byte {
	n := len(dst)
	dst = c.compress(dst, p...)
	if len(dst)-n < len(flushTail) || [4]byte(dst[len(dst)-4:]) != flushTail {
		panic("BUG: deflate: a sync flush does not end with 00 00 ff ff")
	}
	return dst[:len(dst)-4]
}

// AppendStored appends p (at most MaxStored bytes) as a part holding it
// uncompressed: one stored block, five bytes of header. It costs no
// compression and is as small as compressing a short string without
// repetitions (a subscription id in an EVENT prefix), whose literals take
// eight bits or more each.
func AppendStored(dst, p []byte) []byte {
	if len(p) > MaxStored {
		panic("BUG: deflate: stored part over 65535 bytes")
	}
	n := uint16(len(p))
	// BFINAL 0, BTYPE 00, padded to the byte; LEN and NLEN little-endian.
	dst = append(dst, 0x00, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8))
	return append(dst, p...)
}

// StoredLen returns the length AppendStored gives a part of n bytes.
func StoredLen(n int) int { return n + 5 }
