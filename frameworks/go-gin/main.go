// The fairground contract on Gin (Debian golang-github-gin-gonic-gin-dev):
// gin.New() routes, c.JSON, ShouldBindJSON with binding tags, and per-route
// gin.HandlerFunc middleware chains.
package main

import (
	"log"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/gin-gonic/gin/binding"
)

type person struct {
	Name  string `json:"name" binding:"required,min=1,max=64"`
	Age   *int   `json:"age" binding:"required,min=0,max=150"`
	Email string `json:"email" binding:"required"`
}

// emailOK: 3 to 254 bytes with an @ that is neither first nor last.
func emailOK(e string) bool {
	return len(e) >= 3 && len(e) <= 254 && strings.Contains(e, "@") &&
		!strings.HasPrefix(e, "@") && !strings.HasSuffix(e, "@")
}

func plaintext(c *gin.Context) {
	c.Data(http.StatusOK, "text/plain", []byte("Hello, World!"))
}

// echoHeader is middleware layer i: it reads x-test and sets x-mw-{i}.
func echoHeader(i int) gin.HandlerFunc {
	name := "X-Mw-" + strconv.Itoa(i)
	return func(c *gin.Context) {
		c.Header(name, c.GetHeader("X-Test"))
		c.Next()
	}
}

func main() {
	cpus, err := strconv.Atoi(os.Getenv("FAIRGROUND_CPUS"))
	if err != nil || cpus < 1 {
		cpus = 1
	}
	runtime.GOMAXPROCS(cpus)

	gin.SetMode(gin.ReleaseMode)
	binding.EnableDecoderUseNumber = true
	r := gin.New()
	r.GET("/", plaintext)
	r.GET("/json", func(c *gin.Context) {
		c.JSON(http.StatusOK, gin.H{"message": "Hello, World!"})
	})
	r.GET("/users/:id", func(c *gin.Context) {
		c.JSON(http.StatusOK, gin.H{"id": c.Param("id"), "name": "ada"})
	})
	r.POST("/echo", func(c *gin.Context) {
		var v interface{}
		// gin's JSON binding decodes with UseNumber when enabled below,
		// so numbers come back exactly as sent.
		if err := c.ShouldBindJSON(&v); err != nil {
			c.String(http.StatusBadRequest, "invalid JSON")
			return
		}
		c.JSON(http.StatusOK, v)
	})
	r.POST("/validate", func(c *gin.Context) {
		var p person
		if err := c.ShouldBindJSON(&p); err != nil || !emailOK(p.Email) {
			c.String(http.StatusUnprocessableEntity, "invalid person")
			return
		}
		c.JSON(http.StatusOK, p)
	})
	// Each /mw/N route is a chain of N middleware handlers then the handler;
	// gin runs them in order, so layer 1 is the outermost.
	for n := 0; n <= 10; n++ {
		handlers := make([]gin.HandlerFunc, 0, n+1)
		for i := 1; i <= n; i++ {
			handlers = append(handlers, echoHeader(i))
		}
		handlers = append(handlers, plaintext)
		r.GET("/mw/"+strconv.Itoa(n), handlers...)
	}
	log.Printf("gin listening on :8080 with GOMAXPROCS=%d", cpus)
	log.Fatal(r.Run("0.0.0.0:8080"))
}
