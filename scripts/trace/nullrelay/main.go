// Command nullrelay answers every EVENT with OK true at once, without
// verifying or storing anything: run `petrel bench ladder` against it to
// see how much of a ladder's OK latency is the load client and the
// loopback itself, not the relay (docs/BENCHMARKS.md, issue 19).
package main

import (
	"bytes"
	"flag"
	"log"
	"net/http"

	"github.com/gorilla/websocket"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:7871", "address to listen on")
	flag.Parse()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			w.Write([]byte("{}"))
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		key := []byte(`"id":"`)
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			i := bytes.Index(msg, key)
			if !bytes.HasPrefix(msg, []byte(`["EVENT"`)) || i < 0 || len(msg) < i+len(key)+64 {
				c.WriteMessage(websocket.TextMessage, []byte(`["NOTICE","nullrelay: only EVENT"]`))
				continue
			}
			id := msg[i+len(key) : i+len(key)+64]
			out := make([]byte, 0, 100)
			out = append(out, `["OK","`...)
			out = append(out, id...)
			out = append(out, `",true,""]`...)
			if err := c.WriteMessage(websocket.TextMessage, out); err != nil {
				return
			}
		}
	})
	log.Fatal(http.ListenAndServe(*listen, nil))
}
