package server

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/petrel-relay/petrel/internal/relay"
)

// handleOKTrace serves the relay's OK trace on the debug listener
// (server.pprof_listen): POST /debug/petrel/oktrace/start starts one
// (?max=N records, default and at most relay.OKTraceMax), POST
// /debug/petrel/oktrace/stop ends it and returns its records as text,
// one EVENT a line:
//
//	# petrel oktrace v1: id received verified committed answered (unix ns); records N dropped M
//	<event id hex> <received> <verified> <committed> <answered>
//
// One trace runs at a time (409 otherwise). `petrel bench ladder
// --oktrace` uses it to split each step's OK latency.
func (s *Server) handleOKTrace(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/debug/petrel/oktrace/start":
		max := 0
		if v := r.URL.Query().Get("max"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > relay.OKTraceMax {
				http.Error(w, fmt.Sprintf("max: want 1 to %d records", relay.OKTraceMax), http.StatusBadRequest)
				return
			}
			max = n
		}
		if err := s.relay.StartOKTrace(max); err != nil {
			http.Error(w, err.Error(), okTraceStatus(err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "/debug/petrel/oktrace/stop":
		recs, dropped, err := s.relay.StopOKTrace()
		if err != nil {
			http.Error(w, err.Error(), okTraceStatus(err))
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		bw := bufio.NewWriterSize(w, 64<<10)
		fmt.Fprintf(bw, "# petrel oktrace v1: id received verified committed answered (unix ns); records %d dropped %d\n", len(recs), dropped)
		var line []byte
		for i := range recs {
			rec := &recs[i]
			line = hex.AppendEncode(line[:0], rec.ID[:])
			line = append(line, ' ')
			line = strconv.AppendInt(line, rec.Received, 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, rec.Verified, 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, rec.Committed, 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, rec.Answered, 10)
			line = append(line, '\n')
			if _, err := bw.Write(line); err != nil {
				return
			}
		}
		_ = bw.Flush()
	default:
		http.NotFound(w, r)
	}
}

func okTraceStatus(err error) int {
	if errors.Is(err, relay.ErrOKTraceRunning) || errors.Is(err, relay.ErrOKTraceIdle) {
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}
