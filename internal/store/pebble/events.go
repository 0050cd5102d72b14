package pebble

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// events is pebble's EventListener for the store: what pebble does in the
// background that may delay commits, written to the log so that a latency
// spike can be matched with its cause. Write stalls (commits blocked
// until a flush or compaction catches up) are warnings, counted and timed
// for Store.Stats; slow disk operations are warnings too; flushes and
// compactions (which pebble's metrics count) are logged at debug level
// with their durations (petrel serve --log-level debug).
type events struct {
	log        *slog.Logger
	stallStart atomic.Int64 // unix ns of the current write stall's start; 0: none
	stalls     atomic.Uint64
	stalledNs  atomic.Int64 // total time commits were stalled
}

func (e *events) listener() *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			e.log.Error("store: pebble background error", "err", err)
		},
		FlushEnd: func(i pebble.FlushInfo) {
			e.log.Debug("store: memtable flushed", "job", i.JobID, "reason", i.Reason, "memtables", i.Input,
				"bytes", i.InputBytes, "took", i.TotalDuration.Round(time.Microsecond), "err", i.Err)
		},
		CompactionEnd: func(i pebble.CompactionInfo) {
			from := -1
			if len(i.Input) > 0 {
				from = i.Input[0].Level
			}
			e.log.Debug("store: compaction", "job", i.JobID, "reason", i.Reason, "from_level", from, "to_level", i.Output.Level,
				"tables_out", len(i.Output.Tables), "took", i.TotalDuration.Round(time.Microsecond), "err", i.Err)
		},
		WriteStallBegin: func(i pebble.WriteStallBeginInfo) {
			e.stalls.Add(1)
			e.stallStart.Store(time.Now().UnixNano())
			e.log.Warn("store: commits stalled until pebble catches up", "reason", i.Reason)
		},
		WriteStallEnd: func() {
			var took time.Duration
			if s := e.stallStart.Swap(0); s != 0 {
				took = time.Duration(time.Now().UnixNano() - s)
				e.stalledNs.Add(int64(took))
			}
			e.log.Warn("store: commits resumed", "stalled", took.Round(time.Microsecond))
		},
		DiskSlow: func(i pebble.DiskSlowInfo) {
			e.log.Warn("store: slow disk operation", "op", i.OpType.String(), "path", i.Path, "took", i.Duration.Round(time.Millisecond))
		},
	}
}
