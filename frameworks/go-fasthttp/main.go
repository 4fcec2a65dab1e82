// The fairground contract on fasthttp (Debian golang-github-valyala-fasthttp-dev):
// a RequestHandler switching on the path, encoding/json, and middleware as
// func(fasthttp.RequestHandler) fasthttp.RequestHandler wrappers (fasthttp
// has no router or middleware type of its own).
package main

import (
	"bytes"
	"encoding/json"
	"log"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

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

func writeJSON(ctx *fasthttp.RequestCtx, v interface{}) {
	body, err := json.Marshal(v)
	if err != nil {
		ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

func hello(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain")
	ctx.SetBodyString("Hello, World!")
}

// echoHeader is middleware layer i: it reads x-test and sets x-mw-{i}.
func echoHeader(i int) func(fasthttp.RequestHandler) fasthttp.RequestHandler {
	name := "X-Mw-" + strconv.Itoa(i)
	return func(next fasthttp.RequestHandler) fasthttp.RequestHandler {
		return func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.SetBytesV(name, ctx.Request.Header.Peek("X-Test"))
			next(ctx)
		}
	}
}

// chain wraps h in n layers, layer 1 outermost.
func chain(n int, h fasthttp.RequestHandler) fasthttp.RequestHandler {
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

	chains := make(map[string]fasthttp.RequestHandler)
	for n := 0; n <= 10; n++ {
		chains["/mw/"+strconv.Itoa(n)] = chain(n, hello)
	}

	handler := func(ctx *fasthttp.RequestCtx) {
		path := string(ctx.Path())
		switch {
		case ctx.IsGet() && path == "/":
			hello(ctx)
		case ctx.IsGet() && path == "/json":
			writeJSON(ctx, map[string]string{"message": "Hello, World!"})
		case ctx.IsGet() && strings.HasPrefix(path, "/users/"):
			id := path[len("/users/"):]
			if id == "" || strings.Contains(id, "/") {
				ctx.NotFound()
				return
			}
			writeJSON(ctx, struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			}{id, "ada"})
		case ctx.IsPost() && path == "/echo":
			dec := json.NewDecoder(bytes.NewReader(ctx.PostBody()))
			dec.UseNumber() // keep numbers exactly as sent
			var v interface{}
			if err := dec.Decode(&v); err != nil {
				ctx.Error("invalid JSON", fasthttp.StatusBadRequest)
				return
			}
			writeJSON(ctx, v)
		case ctx.IsPost() && path == "/validate":
			var p person
			if err := json.Unmarshal(ctx.PostBody(), &p); err != nil || !p.valid() {
				ctx.Error("invalid person", fasthttp.StatusUnprocessableEntity)
				return
			}
			writeJSON(ctx, p)
		default:
			if h, ok := chains[path]; ok && ctx.IsGet() {
				h(ctx)
				return
			}
			ctx.NotFound()
		}
	}

	server := &fasthttp.Server{Handler: handler, MaxRequestBodySize: 1 << 20}
	log.Printf("fasthttp listening on :8080 with GOMAXPROCS=%d", cpus)
	log.Fatal(server.ListenAndServe("0.0.0.0:8080"))
}
