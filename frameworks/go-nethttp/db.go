// The database scenarios the way Go's TechEmpower net/http entries write
// them: database/sql with the lib/pq driver (Debian golang-github-lib-pq-dev),
// a pool sized by SetMaxOpenConns/SetMaxIdleConns, prepared statements, and
// html/template for the fortunes page.
package main

import (
	"database/sql"
	"fmt"
	"html/template"
	"log"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/lib/pq"
)

const (
	worldRows        = 10000
	worldSelectSQL   = "SELECT id, randomnumber FROM world WHERE id = $1"
	worldUpdateSQL   = "UPDATE world SET randomnumber = $1 WHERE id = $2"
	fortuneSelectSQL = "SELECT id, message FROM fortune"
)

type world struct {
	ID           int32 `json:"id"`
	RandomNumber int32 `json:"randomNumber"`
}

type fortune struct {
	ID      int32
	Message string
}

var fortunesTmpl = template.Must(template.New("fortunes").Parse(
	`<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>` +
		`{{range .}}<tr><td>{{.ID}}</td><td>{{.Message}}</td></tr>{{end}}` +
		`</table></body></html>`))

// database holds the pool and its prepared statements. The pool is opened
// at start; the statements are prepared on first use (and again after a
// failure), so a server whose database is not up yet still starts and
// answers every other scenario.
type database struct {
	host string
	db   *sql.DB

	ready                                 atomic.Bool
	mu                                    sync.Mutex
	worldSelect, worldUpdate, fortuneStmt *sql.Stmt
}

// openDatabase returns nil when FAIRGROUND_DB_HOST is unset: no database
// in this run.
func openDatabase() *database {
	host := os.Getenv("FAIRGROUND_DB_HOST")
	if host == "" {
		return nil
	}
	port := envOr("FAIRGROUND_DB_PORT", "5432")
	dsn := fmt.Sprintf("host=%s port=%s dbname=%s user=%s password=%s sslmode=disable connect_timeout=5",
		host, port, envOr("FAIRGROUND_DB_NAME", "hello_world"),
		envOr("FAIRGROUND_DB_USER", "benchmarkdbuser"), envOr("FAIRGROUND_DB_PASSWORD", "benchmarkdbpass"))
	db, err := sql.Open("postgres", dsn) // only checks the DSN; connects on use
	if err != nil {
		log.Printf("ERROR database at %s:%s: %v", host, port, err)
		return nil
	}
	pool := 8
	if n, err := strconv.Atoi(os.Getenv("FAIRGROUND_DB_POOL")); err == nil && n >= 1 {
		pool = n
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	d := &database{host: host + ":" + port, db: db}
	go func() { // in the background: the listeners do not wait for the database
		if err := d.prepare(); err != nil {
			log.Printf("ERROR database at %s unreachable (db endpoints answer 503 until it is): %v", d.host, err)
		} else {
			log.Printf("database pool to %s, %d connections (lib/pq)", d.host, pool)
		}
	}()
	return d
}

// prepare prepares the three statements once; database/sql then prepares
// each on every pooled connection it runs on.
func (d *database) prepare() error {
	if d.ready.Load() {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ready.Load() {
		return nil
	}
	ws, err := d.db.Prepare(worldSelectSQL)
	if err != nil {
		return err
	}
	wu, err := d.db.Prepare(worldUpdateSQL)
	if err != nil {
		ws.Close()
		return err
	}
	fs, err := d.db.Prepare(fortuneSelectSQL)
	if err != nil {
		ws.Close()
		wu.Close()
		return err
	}
	d.worldSelect, d.worldUpdate, d.fortuneStmt = ws, wu, fs
	d.ready.Store(true)
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func randomID() int32 {
	return int32(rand.Intn(worldRows) + 1)
}

// queriesParam applies TechEmpower's rule: missing, empty, not a number or
// below 1 is 1; above 500 is 500.
func queriesParam(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("queries"))
	if err != nil || n < 1 {
		return 1
	}
	if n > 500 {
		return 500
	}
	return n
}

// handler wraps a database handler: 503 when the run has no database or
// the statements cannot be prepared yet.
func (d *database) handler(h func(*database, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if d == nil {
			http.Error(w, "no database configured", http.StatusServiceUnavailable)
			return
		}
		if err := d.prepare(); err != nil {
			log.Printf("database at %s: %v", d.host, err)
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		h(d, w, r)
	}
}

func (d *database) readWorld(id int32) (world, error) {
	var wld world
	err := d.worldSelect.QueryRow(id).Scan(&wld.ID, &wld.RandomNumber)
	return wld, err
}

func dbHandler(d *database, w http.ResponseWriter, r *http.Request) {
	wld, err := d.readWorld(randomID())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, wld)
}

func queriesHandler(d *database, w http.ResponseWriter, r *http.Request) {
	n := queriesParam(r)
	worlds := make([]world, n)
	for i := range worlds {
		var err error
		if worlds[i], err = d.readWorld(randomID()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	writeJSON(w, worlds)
}

// updatesHandler reads each row with its own SELECT, gives it a new number
// and writes it back with one UPDATE per row (autocommit, as the Go
// TechEmpower entries do), then answers with the new values.
func updatesHandler(d *database, w http.ResponseWriter, r *http.Request) {
	n := queriesParam(r)
	worlds := make([]world, n)
	for i := range worlds {
		var err error
		if worlds[i], err = d.readWorld(randomID()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		worlds[i].RandomNumber = randomID()
	}
	for _, wld := range worlds {
		if _, err := d.worldUpdate.Exec(wld.RandomNumber, wld.ID); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	writeJSON(w, worlds)
}

func fortunesHandler(d *database, w http.ResponseWriter, r *http.Request) {
	rows, err := d.fortuneStmt.Query()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fortunes := make([]fortune, 0, 16)
	for rows.Next() {
		var f fortune
		if err := rows.Scan(&f.ID, &f.Message); err != nil {
			rows.Close()
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fortunes = append(fortunes, f)
	}
	if err := rows.Err(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fortunes = append(fortunes, fortune{0, "Additional fortune added at request time."})
	sort.Slice(fortunes, func(i, j int) bool { return fortunes[i].Message < fortunes[j].Message })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := fortunesTmpl.Execute(w, fortunes); err != nil {
		log.Printf("fortunes: %v", err)
	}
}

// registerDatabase mounts the four database routes on mux.
func registerDatabase(mux *http.ServeMux) {
	rand.Seed(time.Now().UnixNano()) // Go 1.19's global source starts at seed 1
	d := openDatabase()
	mux.HandleFunc("/db", d.handler(dbHandler))
	mux.HandleFunc("/queries", d.handler(queriesHandler))
	mux.HandleFunc("/updates", d.handler(updatesHandler))
	mux.HandleFunc("/fortunes", d.handler(fortunesHandler))
}
