// The fairground contract on Echo v4 (Debian golang-github-labstack-echo-dev):
// echo routes, c.JSON, c.Bind, and per-route echo.MiddlewareFunc chains.
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

	"github.com/labstack/echo/v4"
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

func plaintext(c echo.Context) error {
	return c.Blob(http.StatusOK, "text/plain", []byte("Hello, World!"))
}

// echoHeader is middleware layer i: it reads x-test and sets x-mw-{i}.
func echoHeader(i int) echo.MiddlewareFunc {
	name := "X-Mw-" + strconv.Itoa(i)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Response().Header().Set(name, c.Request().Header.Get("X-Test"))
			return next(c)
		}
	}
}

func main() {
	cpus, err := strconv.Atoi(os.Getenv("FAIRGROUND_CPUS"))
	if err != nil || cpus < 1 {
		cpus = 1
	}
	runtime.GOMAXPROCS(cpus)

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true

	e.GET("/", plaintext)
	e.GET("/json", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"message": "Hello, World!"})
	})
	e.GET("/users/:id", func(c echo.Context) error {
		return c.JSON(http.StatusOK, struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		}{c.Param("id"), "ada"})
	})
	e.POST("/echo", func(c echo.Context) error {
		body, err := io.ReadAll(io.LimitReader(c.Request().Body, bodyLimit))
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "unreadable body")
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber() // keep numbers exactly as sent
		var v interface{}
		if err := dec.Decode(&v); err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "invalid JSON")
		}
		return c.JSON(http.StatusOK, v)
	})
	e.POST("/validate", func(c echo.Context) error {
		var p person
		if err := c.Bind(&p); err != nil || !p.valid() {
			return echo.NewHTTPError(http.StatusUnprocessableEntity, "invalid person")
		}
		return c.JSON(http.StatusOK, p)
	})
	// Route-level middleware: the first listed is the outermost.
	for n := 0; n <= 10; n++ {
		mws := make([]echo.MiddlewareFunc, 0, n)
		for i := 1; i <= n; i++ {
			mws = append(mws, echoHeader(i))
		}
		e.GET("/mw/"+strconv.Itoa(n), plaintext, mws...)
	}
	log.Printf("echo listening on :8080 with GOMAXPROCS=%d", cpus)
	log.Fatal(e.Start("0.0.0.0:8080"))
}
