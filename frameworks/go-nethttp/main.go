// The fairground contract on Go's standard library net/http: a ServeMux,
// encoding/json, and middleware as func(http.Handler) http.Handler wrappers.
// The same mux serves HTTP/1.1 on 8080, HTTP/1.1 and HTTP/2 over TLS on 8443
// (net/http's own TLS server with its bundled HTTP/2, ALPN h2 and http/1.1)
// and HTTP/2 with prior knowledge on 8082 (golang.org/x/net/http2/h2c, from
// Debian's golang-golang-x-net-dev). The database scenarios are in db.go,
// the WebSocket echo on /ws (gorilla/websocket) in ws.go.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// bodyLimit bounds request bodies; the contract sends at most 64 KiB.
const bodyLimit = 1 << 20

type person struct {
	Name  *string `json:"name"`
	Age   *int    `json:"age"`
	Email *string `json:"email"`
}

func (p *person) valid() bool {
	if p.Name == nil || p.Age == nil || p.Email == nil {
		return false
	}
	n := utf8.RuneCountInString(*p.Name)
	e := *p.Email
	return n >= 1 && n <= 64 && *p.Age >= 0 && *p.Age <= 150 &&
		len(e) >= 3 && len(e) <= 254 && strings.Contains(e, "@") &&
		!strings.HasPrefix(e, "@") && !strings.HasSuffix(e, "@")
}

func writeJSON(w http.ResponseWriter, v interface{}) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func plaintext(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, "Hello, World!")
}

func root(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	plaintext(w, r)
}

func jsonHandler(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]string{"message": "Hello, World!"})
}

func user(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/users/")
	if id == "" || strings.Contains(id, "/") {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}{id, "ada"})
}

func echo(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, bodyLimit))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // keep numbers exactly as sent
	var v interface{}
	if err := dec.Decode(&v); err != nil {
		http.Error(w, "invalid JSON", http.StatusBadRequest)
		return
	}
	writeJSON(w, v)
}

func validate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var p person
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, bodyLimit)).Decode(&p); err != nil || !p.valid() {
		http.Error(w, "invalid person", http.StatusUnprocessableEntity)
		return
	}
	writeJSON(w, p)
}

// echoHeader is middleware layer i: it reads x-test and sets x-mw-{i}.
func echoHeader(i int) func(http.Handler) http.Handler {
	name := "X-Mw-" + strconv.Itoa(i)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(name, r.Header.Get("X-Test"))
			next.ServeHTTP(w, r)
		})
	}
}

// chain wraps h in n layers, layer 1 outermost.
func chain(n int, h http.Handler) http.Handler {
	for i := n; i >= 1; i-- {
		h = echoHeader(i)(h)
	}
	return h
}

func main() {
	cpus, err := strconv.Atoi(os.Getenv("FAIRGROUND_CPUS"))
	if err != nil || cpus < 1 {
		cpus = 1
	}
	runtime.GOMAXPROCS(cpus)

	mux := http.NewServeMux()
	mux.HandleFunc("/", root)
	mux.HandleFunc("/json", jsonHandler)
	mux.HandleFunc("/users/", user)
	mux.HandleFunc("/echo", echo)
	mux.HandleFunc("/validate", validate)
	for n := 0; n <= 10; n++ {
		mux.Handle(fmt.Sprintf("/mw/%d", n), chain(n, http.HandlerFunc(plaintext)))
	}
	registerDatabase(mux) // /db, /queries, /updates, /fortunes (db.go)
	// WebSocket echo (ws.go), on every listener: 8080, https 8443, 8082.
	mux.HandleFunc("/ws", wsEcho)
	// h2c: x/net's h2c handler answers HTTP/2 with prior knowledge (the
	// client preface) and passes anything else on as HTTP/1.1.
	h2cPort := portEnv("FAIRGROUND_H2C_PORT", 8082)
	go func() {
		srv := &http.Server{Addr: fmt.Sprintf("0.0.0.0:%d", h2cPort), Handler: h2c.NewHandler(mux, &http2.Server{})}
		log.Fatal(srv.ListenAndServe())
	}()
	log.Printf("net/http h2c listening on :%d", h2cPort)
	// https and h2 only when fairground mounted a certificate: ServeTLS
	// configures net/http's HTTP/2 server and ALPN ["h2", "http/1.1"].
	if cert := os.Getenv("FAIRGROUND_TLS_CERT"); cert != "" {
		key := os.Getenv("FAIRGROUND_TLS_KEY")
		tlsPort := portEnv("FAIRGROUND_TLS_PORT", 8443)
		go func() {
			srv := &http.Server{Addr: fmt.Sprintf("0.0.0.0:%d", tlsPort), Handler: mux}
			log.Fatal(srv.ListenAndServeTLS(cert, key))
		}()
		log.Printf("net/http https/h2 listening on :%d", tlsPort)
	}
	log.Printf("net/http listening on :8080 with GOMAXPROCS=%d", cpus)
	log.Fatal(http.ListenAndServe("0.0.0.0:8080", mux))
}

// portEnv reads a port from the environment variable name, or def.
func portEnv(name string, def int) int {
	if p, err := strconv.Atoi(os.Getenv(name)); err == nil && p > 0 {
		return p
	}
	return def
}
