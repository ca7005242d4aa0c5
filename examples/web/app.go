package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sourced-go/sourced/shell/sourced"
	"github.com/sourced-go/sourced/shell/sqlitestore"
)

// Commands and events: plain structs whose JSON attributes the log indexes.
// A command's partition keys are required attributes.
type (
	CreateCourse struct {
		CourseID   string `json:"course_id" sourced:"required"`
		CourseName string `json:"course_name" sourced:"required"`
		Capacity   int    `json:"capacity"`
	}
	CourseCreated struct {
		CourseID   string `json:"course_id"`
		CourseName string `json:"course_name"`
		Capacity   int    `json:"capacity"`
	}
	EnrolStudent struct {
		CourseID  string `json:"course_id" sourced:"required"`
		StudentID string `json:"student_id" sourced:"required"`
	}
	StudentEnrolled struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
	}
	WelcomeStudent struct {
		StudentID string `json:"student_id" sourced:"required"`
		CourseID  string `json:"course_id"`
	}
	StudentWelcomed struct {
		StudentID string `json:"student_id"`
		CourseID  string `json:"course_id"`
	}
)

// Registry registers the application's message types.
func Registry() (*sourced.Registry, error) {
	reg := sourced.NewRegistry()
	return reg, errors.Join(
		sourced.Register[CreateCourse](reg, "courses.create_course"),
		sourced.Register[CourseCreated](reg, "courses.course_created"),
		sourced.Register[EnrolStudent](reg, "courses.enrol_student"),
		sourced.Register[StudentEnrolled](reg, "courses.student_enrolled"),
		sourced.Register[WelcomeStudent](reg, "students.welcome"),
		sourced.Register[StudentWelcomed](reg, "students.welcomed"),
	)
}

// Domain errors: the deciders wrap them, the HTTP handlers map them to
// status codes.
var (
	ErrConflict = errors.New("conflict")
	ErrNoCourse = errors.New("no such course")
)

// CourseNames keeps course names unique: its consistency boundary is the
// name.
var CourseNames = sourced.Decider[bool]{Group: "courses.course_names", PartitionBy: []string{"course_name"}}.With(
	sourced.Evolve(func(_ bool, _ CourseCreated) bool { return true }),
	sourced.Decide(func(taken bool, c CreateCourse) ([]any, error) {
		if taken {
			return nil, fmt.Errorf("%w: course name %q is taken", ErrConflict, c.CourseName)
		}
		if c.Capacity <= 0 {
			c.Capacity = 2
		}
		return []any{CourseCreated(c)}, nil
	}),
)

// course is what enrolment decides on.
type course struct {
	Exists   bool
	Capacity int
	Students []string
}

// Enrolments enforces each course's capacity (its boundary is the course)
// and welcomes every student it enrols, in the background.
var Enrolments = sourced.Decider[course]{Group: "courses.enrolments", PartitionBy: []string{"course_id"}}.With(
	sourced.Evolve(func(s course, e CourseCreated) course { s.Exists, s.Capacity = true, e.Capacity; return s }),
	sourced.Evolve(func(s course, e StudentEnrolled) course { s.Students = append(s.Students, e.StudentID); return s }),
	sourced.Decide(func(s course, c EnrolStudent) ([]any, error) {
		switch {
		case !s.Exists:
			return nil, fmt.Errorf("%w: %s", ErrNoCourse, c.CourseID)
		case slices.Contains(s.Students, c.StudentID):
			return nil, fmt.Errorf("%w: %s is already enrolled in %s", ErrConflict, c.StudentID, c.CourseID)
		case len(s.Students) >= s.Capacity:
			return nil, fmt.Errorf("%w: course %s is full", ErrConflict, c.CourseID)
		}
		return []any{StudentEnrolled(c)}, nil
	}),
	sourced.React(func(_ course, e StudentEnrolled) []any {
		return []any{WelcomeStudent{StudentID: e.StudentID, CourseID: e.CourseID}}
	}),
)

// Welcomes decides the welcome messages the enrolments dispatch (a real
// application would send an e-mail in an AfterSync).
var Welcomes = sourced.Decider[struct{}]{Group: "students.welcomes", PartitionBy: []string{"student_id"}}.With(
	sourced.Decide(func(_ struct{}, c WelcomeStudent) ([]any, error) { return []any{StudentWelcomed(c)}, nil }),
)

// Roster is the read model of a course, served by GET /courses/{id}.
type Roster struct {
	CourseID string   `json:"course_id"`
	Name     string   `json:"name"`
	Capacity int      `json:"capacity"`
	Students []string `json:"students"`
	Welcomed []string `json:"welcomed"`
}

// Rosters projects each course's roster into the course_rosters table of
// the store's SQLite file, in the transaction that acknowledges the
// events: the read model never misses an event nor sees one twice.
var Rosters = sourced.Projector[Roster]{Group: "courses.rosters", PartitionBy: []string{"course_id"}}.With(
	sourced.Evolve(func(r Roster, e CourseCreated) Roster {
		r.CourseID, r.Name, r.Capacity = e.CourseID, e.CourseName, e.Capacity
		return r
	}),
	sourced.Evolve(func(r Roster, e StudentEnrolled) Roster { r.Students = append(r.Students, e.StudentID); return r }),
	sourced.Evolve(func(r Roster, e StudentWelcomed) Roster { r.Welcomed = append(r.Welcomed, e.StudentID); return r }),
	sourced.Sync(func(ctx context.Context, tx sourced.SyncTx, b sourced.Batch[Roster]) error {
		if b.State.Name == "" {
			return nil // events of a course whose creation is still to come
		}
		doc, err := json.Marshal(b.State)
		if err != nil {
			return err
		}
		conn, err := sqlitestore.Conn(tx)
		if err != nil {
			return err
		}
		return sqlitex.Execute(conn,
			`INSERT INTO course_rosters (course_id, roster) VALUES (?, ?)
			ON CONFLICT (course_id) DO UPDATE SET roster = excluded.roster`,
			&sqlitex.ExecOptions{Args: []any{b.State.CourseID, string(doc)}})
	}),
)

// App is the application: the store (whose reader pool also serves the
// read model, see roster) and the runtime running the workers in this
// process.
type App struct {
	Store   *sqlitestore.Store
	Runtime *sourced.Runtime
	log     *slog.Logger
}

// Open opens (installing if need be) the store at path, creates the read
// model's table and builds the runtime. Start the runtime with
// App.Runtime.Start; stop everything with Shutdown.
func Open(ctx context.Context, path string, cfg sourced.Config) (*App, error) {
	reg, err := Registry()
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	store, err := sqlitestore.Install(ctx, path, sqlitestore.Options{Registry: reg, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	app := &App{Store: store, log: cfg.Logger}
	err = store.Update(ctx, func(tx sourced.Tx) error {
		conn, err := sqlitestore.Conn(tx)
		if err != nil {
			return err
		}
		return sqlitex.ExecuteTransient(conn,
			`CREATE TABLE IF NOT EXISTS course_rosters (course_id TEXT PRIMARY KEY, roster TEXT NOT NULL)`, nil)
	})
	if err == nil {
		app.Runtime, err = sourced.NewRuntime(store, cfg, CourseNames, Enrolments, Welcomes, Rosters)
	}
	if err != nil {
		return nil, errors.Join(err, store.Close())
	}
	return app, nil
}

// Routes returns the HTTP API:
//
//	POST /courses                  {"course_id", "course_name", "capacity"}
//	POST /courses/{id}/students    {"student_id"}
//	GET  /courses/{id}             the course's roster (the read model)
func (a *App) Routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /courses", func(w http.ResponseWriter, r *http.Request) {
		var cmd CreateCourse
		if !decodeBody(w, r, &cmd) {
			return
		}
		res, err := sourced.Handle(r.Context(), a.Store, CourseNames, cmd)
		a.answer(w, r, http.StatusCreated, res.CommandResult, err)
	})
	mux.HandleFunc("POST /courses/{id}/students", func(w http.ResponseWriter, r *http.Request) {
		var cmd EnrolStudent
		if !decodeBody(w, r, &cmd) {
			return
		}
		cmd.CourseID = r.PathValue("id")
		res, err := sourced.Handle(r.Context(), a.Store, Enrolments, cmd)
		a.answer(w, r, http.StatusCreated, res.CommandResult, err)
	})
	mux.HandleFunc("GET /courses/{id}", func(w http.ResponseWriter, r *http.Request) {
		roster, found, err := a.roster(r.Context(), r.PathValue("id"))
		switch {
		case err != nil:
			a.fail(w, r, err)
		case !found:
			writeJSON(w, http.StatusNotFound, problem{Error: "no such course (or not projected yet)"})
		default:
			writeJSON(w, http.StatusOK, roster)
		}
	})
	return mux
}

// problem is the body of an error response.
type problem struct {
	Error  string         `json:"error"`
	Fields []fieldProblem `json:"fields,omitempty"`
}

// fieldProblem is one invalid attribute of a command.
type fieldProblem struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// accepted is the body of an accepted command's response.
type accepted struct {
	Position int64    `json:"position"`
	Events   []string `json:"events"`
}

// answer writes the outcome of a decided command: the status for an
// accepted one, and for an error the status it stands for. Nothing was
// stored in any error case.
func (a *App) answer(w http.ResponseWriter, r *http.Request, status int, res sourced.CommandResult, err error) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body := accepted{Position: res.Position, Events: []string{}}
	for _, e := range res.Events {
		body.Events = append(body.Events, e.Type)
	}
	writeJSON(w, status, body)
}

// fail maps an error to its HTTP status.
func (a *App) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ve *sourced.ValidationError
	switch {
	case errors.As(err, &ve):
		p := problem{Error: "invalid command"}
		for _, f := range ve.Fields {
			p.Fields = append(p.Fields, fieldProblem{Field: f.Field, Problem: f.Problem})
		}
		writeJSON(w, http.StatusBadRequest, p)
	case errors.Is(err, ErrNoCourse):
		writeJSON(w, http.StatusNotFound, problem{Error: err.Error()})
	case errors.Is(err, ErrConflict):
		writeJSON(w, http.StatusConflict, problem{Error: err.Error()})
	case errors.Is(err, sourced.ErrBusy):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, problem{Error: "busy, try again"})
	case r.Context().Err() != nil:
		// The client went away (or the server is shutting down).
		writeJSON(w, http.StatusServiceUnavailable, problem{Error: "request cancelled"})
	default:
		a.log.ErrorContext(r.Context(), "web: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		writeJSON(w, http.StatusInternalServerError, problem{Error: "internal error"})
	}
}

// roster reads a course's roster from the read model, on the store's
// reader pool (Store.View): it never waits for the workers' write lock.
func (a *App) roster(ctx context.Context, id string) (Roster, bool, error) {
	var (
		r     Roster
		found bool
	)
	err := a.Store.View(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.Execute(conn, `SELECT roster FROM course_rosters WHERE course_id = ?`, &sqlitex.ExecOptions{
			Args: []any{id},
			ResultFunc: func(stmt *sqlite.Stmt) error {
				found = true
				return json.Unmarshal([]byte(stmt.ColumnText(0)), &r)
			},
		})
	})
	return r, found, err
}

// Shutdown stops the application in the order that loses nothing: the
// server stops accepting requests and waits for those in flight (each
// command is stored, or not, before its answer); the workers drain what
// those commands caused; the workers stop; the store closes last.
func Shutdown(ctx context.Context, srv *http.Server, app *App) error {
	var errs []error
	if srv != nil {
		errs = append(errs, srv.Shutdown(ctx))
	}
	errs = append(errs,
		app.Runtime.WaitIdle(ctx, 0),
		app.Runtime.Stop(ctx),
		app.Close(),
	)
	return errors.Join(errs...)
}

// Close closes the store (stop the runtime first).
func (a *App) Close() error { return a.Store.Close() }

func decodeBody(w http.ResponseWriter, r *http.Request, dst any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		writeJSON(w, http.StatusBadRequest, problem{Error: "body is not a valid JSON command: " + err.Error()})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// shutdownTimeout bounds the graceful shutdown of main.
const shutdownTimeout = 30 * time.Second
