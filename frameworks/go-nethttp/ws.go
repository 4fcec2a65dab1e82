// The ws-echo scenario: GET /ws upgraded with gorilla/websocket (Debian's
// golang-github-gorilla-websocket-dev), its defaults kept: no compression
// (EnableCompression is false), 4 KiB read and write buffers, no read limit,
// the default ping handler (a pong with the ping's payload) and close
// handler (a close frame echoing the client's code). One goroutine per
// connection, the one reader and the one writer gorilla allows, echoes each
// message whole with the type it came with.
package main

import (
	"net/http"

	"github.com/gorilla/websocket"
)

var upgrader = websocket.Upgrader{}

func wsEcho(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil) // answers a failed upgrade itself
	if err != nil {
		return
	}
	defer c.Close()
	for {
		mt, message, err := c.ReadMessage()
		if err != nil { // a close frame (already answered) or a broken connection
			return
		}
		if err := c.WriteMessage(mt, message); err != nil {
			return
		}
	}
}
