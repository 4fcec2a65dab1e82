// The fairground contract on chi v5 (Debian golang-github-go-chi-chi-dev):
// a chi.Router with URL parameters, encoding/json, and per-route middleware
// chains with r.With(mw1, ..., mwN), chi's own way to scope middleware.
package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
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

func main() {
	cpus, err := strconv.Atoi(os.Getenv("FAIRGROUND_CPUS"))
	if err != nil || cpus < 1 {
		cpus = 1
	}
	runtime.GOMAXPROCS(cpus)

	r := chi.NewRouter()
	r.Get("/", plaintext)
	r.Get("/json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"message": "Hello, World!"})
	})
	r.Get("/users/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		}{chi.URLParam(r, "id"), "ada"})
	})
	r.Post("/echo", func(w http.ResponseWriter, r *http.Request) {
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
	})
	r.Post("/validate", func(w http.ResponseWriter, r *http.Request) {
		var p person
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, bodyLimit)).Decode(&p); err != nil || !p.valid() {
			http.Error(w, "invalid person", http.StatusUnprocessableEntity)
			return
		}
		writeJSON(w, p)
	})
	// r.With(...) scopes middleware to one route; the first is the outermost.
	for n := 0; n <= 10; n++ {
		mws := make([]func(http.Handler) http.Handler, 0, n)
		for i := 1; i <= n; i++ {
			mws = append(mws, echoHeader(i))
		}
		r.With(mws...).Get("/mw/"+strconv.Itoa(n), plaintext)
	}
	log.Printf("chi listening on :8080 with GOMAXPROCS=%d", cpus)
	log.Fatal(http.ListenAndServe("0.0.0.0:8080", r))
}
